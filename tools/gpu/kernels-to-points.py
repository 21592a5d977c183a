#!/usr/bin/env python3
"""Turns one run of tools/gpu/measure-kernels.py (a folder of CSV files and
meta.json, tests/data/kernels/README.md) into kernel points of the format of
../shared/validation/README.md, so that `parasim validate` scores the cost model
against them and tools/fit-gemms.py can calibrate on them.

    python3 tools/gpu/kernels-to-points.py tests/data/kernels/h200-2026-11-25 \\
        --gpu h200 > tests/data/validation/h200-kernels.yaml

What becomes a point (the rest stays in the CSV files, described in the README):
  gemm.csv      every BF16 GEMM, forward and backward: its cold median (operands
                from HBM), metric time_us.
  gemm_fp8.csv  every FP8 GEMM with fast accumulation (the mode Transformer Engine
                uses for forward GEMMs), cold median, time_us.
  attention.csv FlashAttention-2 as impl flash2, cuDNN fused attention as impl
                cudnn, forward and forward+backward, time_us.
  memory.csv    copy, read, write and triad on arrays of 256 MiB and more (four
                times L2 and over: they stream from HBM), bandwidth_GBps of the
                cold column (single launches, not a CUDA graph: in a graph a large
                copy_ becomes a copy-engine memcpy node, which is slower).
Splits: the notes of every GEMM point say `split: fit` or `split: held-out`, by
model (HELD_OUT_MODELS), and of every attention point, by head_dim (128 fit, 64 held out), so a calibration reads only the fit models' shapes and is
scored on the others (docs/validation.md §3). The output is deterministic: rows in
file order, numbers as the CSV wrote them.
"""
import argparse
import csv
import json
import os
import sys

HELD_OUT_MODELS = {"llama3-70b", "llama3-405b"}
ATTENTION_FIT_HEAD_DIM = "128"  # attention points of head_dim 64 are held out
STREAM_MIN_BYTES = 256 << 20


def rows(folder, name):
    with open(os.path.join(folder, name), newline="") as f:
        return list(csv.DictReader(f))


def q(s):
    """A YAML double-quoted scalar."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--gpu", required=True, help="parasim GPU name the points run on")
    args = ap.parse_args()
    folder = args.folder.rstrip("/")
    meta = json.load(open(os.path.join(folder, "meta.json")))
    rel = os.path.relpath(folder)
    versions = (f"{meta['gpu']['name']}, driver {meta['driver']['driver_version']}, CUDA {meta['cuda_runtime']}, "
                f"cuBLAS {meta['cublas']['version']}, cuDNN {meta['cudnn']}, PyTorch {meta['torch']}, "
                f"{meta['date_utc'][:10]}")
    out = sys.stdout
    out.write(f"# Kernel points measured by parasim on one GPU ({versions}),\n"
              f"# generated from {rel} by tools/gpu/kernels-to-points.py: do not edit by hand.\n"
              "# Kernel-level data: they may calibrate the GPU file's efficiency constants\n"
              "# (fit split only); whole runs never do (docs/validation.md §3).\n"
              "points:\n")

    def point(pid, kind, csv_name, notes, op, metric, value):
        out.write(f"- id: {pid}\n  kind: {kind}\n"
                  f"  source: {q(f'parasim measurement: {rel}/{csv_name}, tools/gpu/measure-kernels.py ({versions})')}\n"
                  f"  notes: {q(notes)}\n"
                  f"  hardware:\n    gpu: {args.gpu}\n    gpus: 1\n  op:\n")
        for k, v in op:
            out.write(f"    {k}: {v}\n")
        out.write(f"  measured:\n    metric: {metric}\n    value: {value}\n")

    for r in rows(folder, "gemm.csv"):
        split = "held-out" if r["model"] in HELD_OUT_MODELS else "fit"
        point(f"h200m-gemm-bf16-{r['pass']}-{r['m']}x{r['n']}x{r['k']}", "gemm", "gemm.csv",
              f"cuBLAS via torch.matmul, {r['pass']} GEMM of {r['model']} tp{r['tp']} {r['layer']}; median of "
              f"{r['reps']} launches after an L2 flush (operands from HBM). split: {split}",
              [("m", r["m"]), ("n", r["n"]), ("k", r["k"]), ("dtype", "bf16")], "time_us", r["cold_us"])
    for r in rows(folder, "gemm_fp8.csv"):
        if r["fast_accum"] != "1":
            continue
        split = "held-out" if r["model"] in HELD_OUT_MODELS else "fit"
        point(f"h200m-gemm-fp8-{r['m']}x{r['n']}x{r['k']}", "gemm", "gemm_fp8.csv",
              f"cuBLASLt via torch._scaled_mm, E4M3 inputs, per-tensor scales, BF16 output, fast accumulation; "
              f"forward GEMM of {r['model']} tp{r['tp']} {r['layer']}; median of {r['reps']} launches after an L2 "
              f"flush. split: {split}",
              [("m", r["m"]), ("n", r["n"]), ("k", r["k"]), ("dtype", "fp8")], "time_us", r["cold_us"])
    for r in rows(folder, "attention.csv"):
        causal = "causal" if r["causal"] == "1" else "noncausal"
        what = ("FlashAttention-2 (PyTorch's flash SDPA backend)" if r["backend"] == "flash2"
                else "cuDNN fused attention (PyTorch's cuDNN SDPA backend)")
        point(f"h200m-attn-{r['backend']}-{r['pass']}-{causal}-hd{r['head_dim']}-s{r['seq_len']}", "attention",
              "attention.csv",
              f"{what}; median of {r['reps']} launches after an L2 flush; fwd_bwd = forward plus "
              f"torch.autograd.grad of q, k, v. split: {'fit' if r['head_dim'] == ATTENTION_FIT_HEAD_DIM else 'held-out'}",
              [("batch", r["batch"]), ("heads", r["heads"]), ("head_dim", r["head_dim"]), ("seq_len", r["seq_len"]),
               ("causal", "true" if r["causal"] == "1" else "false"), ("dtype", r["dtype"]),
               ("impl", r["backend"]), ("pass", r["pass"])], "time_us", r["cold_us"])
    for r in rows(folder, "memory.csv"):
        if r["op"] == "read_loop" or int(r["array_bytes"]) < STREAM_MIN_BYTES:
            continue
        point(f"h200m-mem-{r['op']}-{int(r['array_bytes']) >> 20}mib", "memory", "memory.csv",
              f"PyTorch {r['op']} on float32 arrays of {int(r['array_bytes']) >> 20} MiB each; bytes = bytes read "
              f"plus written; median of single launches after an L2 flush",
              [("op", r["op"]), ("bytes", r["bytes_moved"])], "bandwidth_GBps", r["cold_GBps"])


if __name__ == "__main__":
    main()
