#!/usr/bin/env python3
"""Measures, on one NVIDIA GPU, the kernels whose efficiency parasim's cost model
calibrates (docs/hardware-model.md, docs/validation.md §3), and writes them as CSV
with the machine's versions beside them (tests/data/kernels/README.md says where
the results live and how they become validation points).

    python3 tools/gpu/measure-kernels.py --out DIR [--budget-s 480]

What it measures, each section in its own CSV, each row flushed as it is taken:
  memory.csv     copy / read / write / triad over array sizes from 1 MiB to 4 GiB:
                 the small sizes stay in L2, the large ones stream from HBM.
  gemm.csv       cuBLAS GEMMs (torch.matmul, BF16) over the shapes that tensor
                 parallelism and decode produce for four transformer sizes, forward
                 (y = x W^T) and, for token counts >= 1024, the two backward GEMMs.
  gemm_fp8.csv   the same forward shapes in FP8 E4M3 (torch._scaled_mm, cuBLASLt,
                 per-tensor scales, BF16 output), with and without fast accumulation.
  attention.csv  FlashAttention-2 (PyTorch's flash backend) and cuDNN attention,
                 forward and forward+backward, the FlashAttention-2 paper's sweep
                 (16k tokens per batch, hidden 2048, head_dim 64 and 128, causal or not).
  decode.csv     one-token decode attention over a KV cache (flash backend, GQA).
  launch.csv     the floor of a tiny kernel: back to back from Python and in a
                 CUDA graph.
  grouped.csv    mixture-of-experts expert GEMMs (BF16): G local experts of one
                 MoE model, m tokens each, as one grouped kernel (torch._grouped_mm)
                 and as G GEMMs one after another (torch.matmul in a loop), the two
                 ways Megatron-Core runs them (--moe-grouped-gemm or SequentialMLP).
                 Not in the default --sections.
  grouped_fp8.csv  the same grouped kernels in FP8 E4M3 (torch._scaled_grouped_mm,
                 row-wise scales for the tokens, per-expert per-column scales for the
                 weights, BF16 output), the form DeepSeek-V3/R1's FP8 experts take.
                 Not in the default --sections.
  elementwise.csv  the memory-bound kernels of a training step (BF16 unless said):
                 LayerNorm and RMSNorm forward and backward, GELU, SwiGLU's
                 silu(a) * b, a residual add, rotary embedding (eager, as
                 Megatron's unfused path), softmax cross-entropy over the vocabulary
                 forward and backward, embedding lookup and its backward, and a fused
                 AdamW step on FP32 parameters; each with the bytes it must move
                 (compulsory traffic: inputs read once, outputs written once), so
                 the achieved bandwidth shows how far below a copy each kernel runs.
                 Not in the default --sections.
  meta.json      GPU, driver, CUDA, cuBLAS, cuDNN, PyTorch and Triton versions,
                 clocks before and after, the date, and the timing method.

Timing method (tools/gpu/kernel_timing.py). A "cold" time is the median over repetitions of one kernel between
two CUDA events, each repetition after a 256 MiB buffer was read so that no
operand is left in L2 and no dirty line either (triton.testing.do_bench zeroes its
buffer instead, which leaves dirty lines for the timed kernel to write back). A "warm" time is the mean
of back-to-back launches of the same kernel on the same operands inside a CUDA
graph, so operands that fit stay in L2 and no Python overhead enters. FLOP counts:
a GEMM is 2mnk; attention forward 4*b*h*s^2*d (halved when causal), backward 2.5
times the forward (the FlashAttention-2 paper's convention).

Everything runs under a time budget (--budget-s): a section that would run past it
is cut short and says so in meta.json. Nothing here is needed by the build or the
tests; CI never runs it.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except ImportError:  # the L2 loop needs Triton; every other section runs without it
    triton = None

if triton is not None:
    @triton.jit
    def read_repeatedly(x_ptr, out_ptr, n, reps, BLOCK: tl.constexpr):
        """Each program reads its grid-stride share of x, reps times, through L2
        only (.cg skips L1), and stores a sum so the loads cannot be dropped."""
        pid = tl.program_id(0)
        step = tl.num_programs(0) * BLOCK
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for _ in range(reps):
            for start in range(pid * BLOCK, n, step):
                acc += tl.load(x_ptr + start + tl.arange(0, BLOCK), cache_modifier=".cg")
        tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), acc)

from kernel_timing import (DEV, Budget, Table, cold_or_none, cold_us, elapsed, fmt, log, meta, smi,
                           warm_us)

BF16 = torch.bfloat16

# Transformer sizes whose TP shards and decode batches the GEMM sweep covers:
# name, hidden, query heads, KV heads, head_dim, ffn, ffn kind (models/*.yaml).
MODELS = [
    ("llama3-8b", 4096, 32, 8, 128, 14336, "swiglu"),
    ("llama3-70b", 8192, 64, 8, 128, 28672, "swiglu"),
    ("gpt3-175b", 12288, 96, 96, 128, 49152, "gelu"),
    ("llama3-405b", 16384, 128, 8, 128, 53248, "swiglu"),
]
TP = [1, 2, 4, 8]
TOKENS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
BACKWARD_MIN_TOKENS = 1024
WARM_MAX_US = 2000  # longer GEMMs are compute-bound: L2 residency cannot change them


# ------------------------------------------------------------------------ memory

def memory_section(out, budget):
    t = Table(os.path.join(out, "memory.csv"),
              ["op", "array_bytes", "bytes_moved", "launches", "us_per_op", "bandwidth_GBps", "cold_us",
               "cold_GBps"])
    ops = {  # name: (arrays, bytes moved per array byte, fn builder)
        "copy": (2, 2, lambda a: (lambda: a[1].copy_(a[0]))),
        "read": (1, 1, lambda a: (lambda: torch.sum(a[0]))),
        "write": (1, 1, lambda a: (lambda: a[0].fill_(1.0))),
        "triad": (3, 3, lambda a: (lambda: torch.add(a[1], a[2], alpha=2.0, out=a[0]))),
    }
    for name, (narrays, moved, build) in ops.items():
        for shift in range(20, 33):  # 1 MiB .. 4 GiB per array
            if budget.over("memory", reserve=300):
                return
            size = 1 << shift
            arrays = [torch.ones(size // 4, dtype=torch.float32, device=DEV) for _ in range(narrays)]
            fn = build(arrays)
            est_s = moved * size / 4e12
            us, n = warm_us(fn, target_s=max(0.005, 50 * est_s), max_launches=max(2, min(200, int(0.02 / est_s))))
            cold, _, _ = cold_us(fn, max_reps=50, target_s=0.01)
            t.add([name, size, moved * size, n, fmt(us), "" if us is None else fmt(moved * size / us / 1e3, 1),
                   fmt(cold), fmt(moved * size / cold / 1e3, 1)])
            del arrays, fn
            torch.cuda.empty_cache()
    l2_loop(t, budget)
    log(f"memory: {t.rows} rows")


def l2_loop(t, budget):
    """L2 bandwidth without launch gaps: one kernel reads an array of S bytes many
    times. Arrays under the L2 size stay resident; large ones stream from HBM."""
    if triton is None:
        log("memory: no Triton, no L2 loop")
        return
    block = 2048
    programs = torch.cuda.get_device_properties(0).multi_processor_count * 4
    out = torch.empty(programs * block, dtype=torch.float32, device=DEV)
    for mib in (2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 128, 256, 1024):
        if budget.over("memory", reserve=300):
            return
        size = mib << 20
        n = size // 4
        x = torch.ones(n, dtype=torch.float32, device=DEV)
        reps = max(1, (4 << 30) // size)
        launch = lambda: read_repeatedly[(programs,)](x, out, n, reps, BLOCK=block, num_warps=8)
        launch()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        best = None
        for _ in range(5):
            a.record()
            launch()
            b.record()
            torch.cuda.synchronize()
            us = a.elapsed_time(b) * 1e3
            best = us if best is None else min(best, us)
        t.add(["read_loop", size, reps * size, 1, fmt(best), fmt(reps * size / best / 1e3, 1), "", ""])
        del x


# ------------------------------------------------------------------------- GEMMs

def layer_gemms(hidden, heads, kv_heads, head_dim, ffn, kind, tp):
    """(layer, n, k) of the forward GEMMs y[m, n] = x[m, k] W^T of one TP shard."""
    qkv = (heads + 2 * kv_heads) * head_dim
    up = ffn * (2 if kind == "swiglu" else 1)
    return [("qkv", qkv // tp, hidden), ("attn_out", hidden, heads * head_dim // tp),
            ("mlp_up", up // tp, hidden), ("mlp_down", hidden, ffn // tp)]


def gemm_section(out, budget):
    t = Table(os.path.join(out, "gemm.csv"),
              ["model", "tp", "layer", "pass", "m", "n", "k", "dtype", "cold_us", "cold_min_us", "reps",
               "warm_us", "warm_launches", "cold_tflops"])
    done = set()
    for tokens in TOKENS:  # every model at small m first: a cut run still spans the sizes
        for model, hidden, heads, kv, hd, ffn, kind in MODELS:
            for tp in TP:
                for layer, n, k in layer_gemms(hidden, heads, kv, hd, ffn, kind, tp):
                    if budget.over("gemm", reserve=200):
                        log(f"gemm: {t.rows} rows")
                        return
                    w = torch.randn(n, k, dtype=BF16, device=DEV)
                    x = torch.randn(tokens, k, dtype=BF16, device=DEV)
                    passes = [("fwd", tokens, n, k, lambda: torch.matmul(x, w.t()))]
                    if tokens >= BACKWARD_MIN_TOKENS:
                        dy = torch.randn(tokens, n, dtype=BF16, device=DEV)
                        # dgrad dx[m, k] = dy[m, n] W[n, k]; wgrad dW[n, k] = dy^T[n, m] x[m, k]
                        passes.append(("dgrad", tokens, k, n, lambda: torch.matmul(dy, w)))
                        passes.append(("wgrad", n, k, tokens, lambda: torch.matmul(dy.t(), x)))
                    for pname, m_, n_, k_, fn in passes:
                        key = (pname, m_, n_, k_)
                        if key in done:
                            continue
                        done.add(key)
                        med, mn, reps = cold_us(fn)
                        wus, wn = warm_us(fn) if med < WARM_MAX_US else (None, 0)
                        t.add([model, tp, layer, pname, m_, n_, k_, "bf16", fmt(med), fmt(mn), reps, fmt(wus), wn,
                               fmt(2.0 * m_ * n_ * k_ / med / 1e6, 2)])
                    del w, x
                    torch.cuda.empty_cache()
        log(f"gemm: tokens {tokens} done, {t.rows} rows")
    log(f"gemm: {t.rows} rows")


def gemm_fp8_section(out, budget):
    t = Table(os.path.join(out, "gemm_fp8.csv"),
              ["model", "tp", "layer", "m", "n", "k", "dtype", "fast_accum", "cold_us", "cold_min_us", "reps",
               "warm_us", "warm_launches", "cold_tflops"])
    e4m3 = torch.float8_e4m3fn
    one = torch.tensor(1.0, device=DEV)
    done = set()
    for tokens in [m for m in TOKENS if m >= 16]:  # cuBLASLt FP8 wants every dimension a multiple of 16
        for model, hidden, heads, kv, hd, ffn, kind in MODELS:
            for tp in TP:
                for layer, n, k in layer_gemms(hidden, heads, kv, hd, ffn, kind, tp):
                    if budget.over("gemm_fp8", reserve=110):
                        log(f"gemm_fp8: {t.rows} rows")
                        return
                    if (tokens, n, k) in done:
                        continue
                    done.add((tokens, n, k))
                    a = torch.randn(tokens, k, device=DEV).to(e4m3)
                    b = torch.randn(n, k, device=DEV).to(e4m3)
                    for fast in (False, True):
                        fn = lambda: torch._scaled_mm(a, b.t(), one, one, out_dtype=BF16, use_fast_accum=fast)
                        r = cold_or_none(fn, f"fp8 {tokens}x{n}x{k}")
                        if r is None:
                            continue
                        med, mn, reps = r
                        wus, wn = warm_us(fn) if med < WARM_MAX_US else (None, 0)
                        t.add([model, tp, layer, tokens, n, k, "fp8_e4m3", int(fast), fmt(med), fmt(mn), reps,
                               fmt(wus), wn, fmt(2.0 * tokens * n * k / med / 1e6, 2)])
                    del a, b
                    torch.cuda.empty_cache()
        log(f"gemm_fp8: tokens {tokens} done, {t.rows} rows")
    log(f"gemm_fp8: {t.rows} rows")


# --------------------------------------------------------------------- attention

def attention_section(out, budget):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    t = Table(os.path.join(out, "attention.csv"),
              ["backend", "pass", "batch", "heads", "seq_len", "head_dim", "causal", "dtype", "cold_us",
               "cold_min_us", "reps", "tflops"])
    backends = [("flash2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]
    for hd in (128, 64):
        heads = 2048 // hd
        for causal in (True, False):
            for seq in (512, 1024, 2048, 4096, 8192, 16384):
                batch = 16384 // seq
                q, k, v, do = (torch.randn(batch, heads, seq, hd, dtype=BF16, device=DEV) for _ in range(4))
                for q_ in (q, k, v):
                    q_.requires_grad_(True)
                fwd_flop = 4.0 * batch * heads * seq * seq * hd / (2 if causal else 1)
                for bname, backend in backends:
                    if budget.over("attention", reserve=60):
                        log(f"attention: {t.rows} rows")
                        return

                    def fwd():
                        with sdpa_kernel([backend]):
                            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                    def fwd_bwd():
                        with sdpa_kernel([backend]):
                            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        return torch.autograd.grad(o, (q, k, v), do)

                    for pname, fn, flop in (("fwd", fwd, fwd_flop), ("fwd_bwd", fwd_bwd, 3.5 * fwd_flop)):
                        r = cold_or_none(fn, f"{bname} {pname} s={seq} d={hd}", min_reps=10, max_reps=50)
                        if r is None:
                            continue
                        med, mn, reps = r
                        t.add([bname, pname, batch, heads, seq, hd, int(causal), "bf16", fmt(med), fmt(mn), reps,
                               fmt(flop / med / 1e6, 2)])
                del q, k, v, do
                torch.cuda.empty_cache()
        log(f"attention: head_dim {hd} done, {t.rows} rows")
    log(f"attention: {t.rows} rows")


def decode_section(out, budget):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    t = Table(os.path.join(out, "decode.csv"),
              ["backend", "batch", "heads", "kv_heads", "kv_len", "head_dim", "dtype", "kv_bytes", "cold_us",
               "cold_min_us", "reps", "kv_GBps"])
    for (heads, kv_heads, hd), batch in ((h, b) for h in ((8, 8, 128), (32, 8, 128)) for b in (1, 8, 32, 128)):
        for kv_len in (1024, 4096, 16384):
            if budget.over("decode", reserve=40):
                return
            q = torch.randn(batch, heads, 1, hd, dtype=BF16, device=DEV)
            k, v = (torch.randn(batch, kv_heads, kv_len, hd, dtype=BF16, device=DEV) for _ in range(2))
            kv_bytes = 2 * batch * kv_heads * kv_len * hd * 2

            def fn():
                with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                    return F.scaled_dot_product_attention(q, k, v, enable_gqa=kv_heads != heads)

            r = cold_or_none(fn, f"decode b={batch} L={kv_len}")
            if r is None:
                continue
            med, mn, reps = r
            t.add(["flash2", batch, heads, kv_heads, kv_len, hd, "bf16", kv_bytes, fmt(med), fmt(mn), reps,
                   fmt(kv_bytes / med / 1e3, 1)])
            del q, k, v
            torch.cuda.empty_cache()
    log(f"decode: {t.rows} rows")


# MoE models' expert projections: name, hidden, expert ffn (models/*.yaml).
MOE_MODELS = [("deepseek-v3", 7168, 2048), ("qwen3-235b-a22b", 4096, 1536), ("qwen3-30b-a3b", 2048, 768),
              ("mixtral-8x7b", 4096, 14336)]


def grouped_kernels(out, budget, fp8):
    """The grouped expert GEMMs of MOE_MODELS: BF16 as one grouped kernel and as a
    Python loop of GEMMs (grouped.csv), or FP8 as one grouped kernel (grouped_fp8.csv)."""
    name = "grouped_fp8" if fp8 else "grouped"
    t = Table(os.path.join(out, name + ".csv"),
              ["model", "projection", "experts", "tokens_per_expert", "n", "k", "dtype", "mode", "cold_us",
               "cold_min_us", "reps", "cold_tflops", "warm_us"])
    for tokens in (16, 64, 128, 256, 512, 1024, 2048, 4096):
        for model, hidden, ffn in MOE_MODELS:
            for proj, n, k in (("up", 2 * ffn, hidden), ("down", hidden, ffn)):
                for experts in (4, 8, 16, 32):
                    if budget.over(name, reserve=15):
                        log(f"{name}: {t.rows} rows")
                        return
                    if experts * max(n, tokens) * k * 2 > (24 << 30):
                        continue
                    offs = torch.arange(tokens, experts * tokens + 1, tokens, device=DEV, dtype=torch.int32)
                    if fp8:
                        e4m3 = torch.float8_e4m3fn
                        x = torch.randn(experts * tokens, k, device=DEV).to(e4m3)
                        w = torch.randn(experts, n, k, device=DEV).to(e4m3)
                        sx = torch.ones(experts * tokens, dtype=torch.float32, device=DEV)
                        sw = torch.ones(experts, n, dtype=torch.float32, device=DEV)
                        modes = (("grouped", lambda: torch._scaled_grouped_mm(
                            x, w.transpose(-2, -1), sx, sw, offs=offs, out_dtype=BF16, use_fast_accum=True)),)
                    else:
                        x = torch.randn(experts * tokens, k, dtype=BF16, device=DEV)
                        w = torch.randn(experts, n, k, dtype=BF16, device=DEV)
                        xs = list(x.split(tokens))
                        modes = (("grouped", lambda: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs,
                                                                       out_dtype=BF16)),
                                 ("loop", lambda: [torch.matmul(xs[e], w[e].t()) for e in range(experts)]))
                    flop = 2.0 * experts * tokens * n * k
                    for mode, fn in modes:
                        r = cold_or_none(fn, f"{name} {mode} {model} {proj} G={experts} m={tokens}")
                        if r is None:
                            continue
                        med, mn, reps = r
                        # In a graph the loop's GPU time shows without Python's launch cost.
                        wus, _ = warm_us(fn) if med < WARM_MAX_US else (None, 0)
                        t.add([model, proj, experts, tokens, n, k, "fp8" if fp8 else "bf16", mode, fmt(med),
                               fmt(mn), reps, fmt(flop / med / 1e6, 2), fmt(wus)])
                    del x, w, modes
                    torch.cuda.empty_cache()
        log(f"{name}: tokens {tokens} done, {t.rows} rows")
    log(f"{name}: {t.rows} rows")


def grouped_section(out, budget):
    grouped_kernels(out, budget, fp8=False)


def grouped_fp8_section(out, budget):
    grouped_kernels(out, budget, fp8=True)


def elementwise_section(out, budget):
    t = Table(os.path.join(out, "elementwise.csv"),
              ["kernel", "pass", "tokens", "hidden", "dtype", "bytes", "cold_us", "cold_min_us", "reps", "GBps"])

    def add(name, pss, tokens, hidden, nbytes, fn, dtype="bf16"):
        if budget.over("elementwise", reserve=10):
            return
        r = cold_or_none(fn, f"{name} {pss} {tokens}x{hidden}")
        if r is None:
            return
        med, mn, reps = r
        t.add([name, pss, tokens, hidden, dtype, nbytes, fmt(med), fmt(mn), reps, fmt(nbytes / med / 1e3, 1)])

    for tokens in (2048, 8192, 32768):
        for hidden in (2048, 4096, 8192):
            n = tokens * hidden
            x = torch.randn(tokens, hidden, dtype=BF16, device=DEV, requires_grad=True)
            y = torch.randn(tokens, hidden, dtype=BF16, device=DEV)
            w = torch.ones(hidden, dtype=BF16, device=DEV, requires_grad=True)
            b = torch.zeros(hidden, dtype=BF16, device=DEV, requires_grad=True)
            dy = torch.randn(tokens, hidden, dtype=BF16, device=DEV)
            add("layer_norm", "fwd", tokens, hidden, 4 * n, lambda: F.layer_norm(x, (hidden,), w, b))
            ln = F.layer_norm(x, (hidden,), w, b)
            add("layer_norm", "bwd", tokens, hidden, 6 * n,
                lambda: torch.autograd.grad(ln, (x, w, b), dy, retain_graph=True))
            add("rms_norm", "fwd", tokens, hidden, 4 * n, lambda: F.rms_norm(x, (hidden,), w))
            rn = F.rms_norm(x, (hidden,), w)
            add("rms_norm", "bwd", tokens, hidden, 6 * n, lambda: torch.autograd.grad(rn, (x, w), dy, retain_graph=True))
            add("gelu_tanh", "fwd", tokens, hidden, 4 * n, lambda: F.gelu(y, approximate="tanh"))
            add("swiglu", "fwd", tokens, hidden, 6 * n, lambda: F.silu(y) * dy)
            add("residual_add", "fwd", tokens, hidden, 6 * n, lambda: y + dy)
            # Rotary on [tokens, heads, 128] in eager PyTorch (rotate-half form): reads x, cos, sin; writes out.
            heads = hidden // 128
            q = y.view(tokens, heads, 128)
            cos = torch.randn(tokens, 1, 128, dtype=BF16, device=DEV)
            sin = torch.randn(tokens, 1, 128, dtype=BF16, device=DEV)

            def rope():
                q1, q2 = q[..., :64], q[..., 64:]
                return q * cos + torch.cat((-q2, q1), dim=-1) * sin

            add("rope_eager", "fwd", tokens, hidden, 4 * n + 2 * 2 * tokens * 128, rope)
            del x, y, w, b, dy, ln, rn, q, cos, sin
            torch.cuda.empty_cache()
        log(f"elementwise: tokens {tokens} done, {t.rows} rows")
    for tokens in (4096, 16384):
        for vocab in (32000, 128256):
            logits = torch.randn(tokens, vocab, dtype=BF16, device=DEV, requires_grad=True)
            target = torch.randint(0, vocab, (tokens,), device=DEV)
            n = tokens * vocab
            # Forward reads the logits (FP32 upcast inside); backward reads them again and writes the gradient.
            add("cross_entropy", "fwd", tokens, vocab, 2 * n, lambda: F.cross_entropy(logits, target))
            loss = F.cross_entropy(logits, target)
            add("cross_entropy", "bwd", tokens, vocab, 4 * n, lambda: torch.autograd.grad(loss, logits, retain_graph=True))
            table = torch.randn(vocab, 4096, dtype=BF16, device=DEV, requires_grad=True)
            add("embedding", "fwd", tokens, 4096, 2 * 2 * tokens * 4096, lambda: F.embedding(target, table), "bf16")
            emb = F.embedding(target, table)
            g = torch.randn(tokens, 4096, dtype=BF16, device=DEV)
            # Backward: the gradient table (vocab x 4096, zeroed and written) plus the token rows read.
            add("embedding", "bwd", tokens, 4096, 2 * vocab * 4096 + 2 * tokens * 4096,
                lambda: torch.autograd.grad(emb, table, g, retain_graph=True))
            del logits, target, loss, table, emb, g
            torch.cuda.empty_cache()
    for params in (1 << 26, 1 << 28):
        p = torch.nn.Parameter(torch.randn(params, dtype=torch.float32, device=DEV))
        p.grad = torch.randn(params, dtype=torch.float32, device=DEV)
        opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
        opt.step()  # creates the moments
        # Reads param, grad, m, v; writes param, m, v: 7 x 4 bytes an element.
        add("adamw_fused", "step", params, 1, 28 * params, opt.step, "fp32")
        del p, opt
        torch.cuda.empty_cache()
    log(f"elementwise: {t.rows} rows")


def launch_section(out, budget):
    t = Table(os.path.join(out, "launch.csv"), ["kernel", "mode", "launches", "us_per_launch"])
    x = torch.zeros(1, dtype=torch.float32, device=DEV)
    a = torch.randn(64, 64, dtype=BF16, device=DEV)
    for name, fn in (("fill_4B", lambda: x.fill_(1.0)), ("gemm_64", lambda: torch.matmul(a, a))):
        if budget.over("launch", reserve=10):
            return
        n = 2000
        for _ in range(100):
            fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(n):
            fn()
        e.record()
        torch.cuda.synchronize()
        t.add([name, "python_loop", n, fmt(s.elapsed_time(e) * 1e3 / n)])
        us, launches = warm_us(fn, target_s=0.01, max_launches=1000)
        t.add([name, "cuda_graph", launches, fmt(us)])
        med, mn, reps = cold_us(fn)
        t.add([name, "after_l2_flush_median", reps, fmt(med)])
    log(f"launch: {t.rows} rows")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=480.0)
    ap.add_argument("--sections", default="launch,memory,gemm,gemm_fp8,attention,decode")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    clocks_before = smi("clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,temperature.gpu,power.draw,power.limit")
    budget = Budget(args.budget_s)
    sections = {"launch": launch_section, "memory": memory_section, "gemm": gemm_section,
                "gemm_fp8": gemm_fp8_section, "attention": attention_section, "decode": decode_section,
                "grouped": grouped_section, "grouped_fp8": grouped_fp8_section,
                "elementwise": elementwise_section}
    for name in args.sections.split(","):
        log(f"section {name}")
        try:
            sections[name](args.out, budget)
        except Exception as e:  # one section's failure must not lose the others
            log(f"section {name} failed: {type(e).__name__}: {e}")
            budget.cut.append(f"{name} (failed: {type(e).__name__})")
            torch.cuda.synchronize()
    m = meta(args, clocks_before)
    m["sections_cut_short"] = budget.cut
    m["wall_s"] = round(elapsed(), 1)
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(m, f, indent=2, sort_keys=True)
    log("done")


if __name__ == "__main__":
    main()
