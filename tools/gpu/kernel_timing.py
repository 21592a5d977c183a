"""How tools/gpu/measure-kernels.py times kernels and records the machine: the
time budget, the CSV tables written row by row, the L2 flush, the cold (one
kernel after an L2 flush, CUDA events) and warm (back-to-back launches in a
CUDA graph) timers, and meta.json's versions and clocks. Kept apart from the
sections so that each section reads as the shapes it measures.
"""
import csv
import ctypes
import datetime
import os
import platform
import statistics
import subprocess
import time

import torch

DEV = "cuda"
FLUSH_BYTES = 256 << 20
START = time.monotonic()


def elapsed():
    return time.monotonic() - START


class Budget:
    def __init__(self, seconds):
        self.deadline = seconds
        self.cut = []

    def left(self):
        return self.deadline - elapsed()

    def over(self, section, reserve=0.0):
        if self.left() < reserve:
            if section not in self.cut:
                self.cut.append(section)
                log(f"budget: {section} cut short at {elapsed():.0f} s")
            return True
        return False


def log(msg):
    print(f"[{elapsed():7.1f} s] {msg}", flush=True)


class Table:
    """A CSV file written row by row, flushed, so a cut run keeps what it took."""

    def __init__(self, path, columns):
        self.f = open(path, "w", newline="")
        self.w = csv.writer(self.f)
        self.w.writerow(columns)
        self.f.flush()
        self.rows = 0

    def add(self, row):
        self.w.writerow(row)
        self.f.flush()
        self.rows += 1


_flush = None


def flush_l2():
    """Fills L2 with clean lines of a buffer four times its size. Reading, not
    writing: a zeroed buffer would leave L2 full of dirty lines, and the timed
    kernel would pay for writing them back (about 13 us on an H200, measured)."""
    global _flush
    if _flush is None:
        _flush = torch.ones(FLUSH_BYTES // 4, dtype=torch.float32, device=DEV)
    torch.sum(_flush)


def cold_us(fn, min_reps=10, max_reps=100, target_s=0.03):
    """Median and minimum microseconds of fn() after an L2 flush, per repetition."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.monotonic()
    fn()
    torch.cuda.synchronize()
    est = max(time.monotonic() - t0, 1e-6)
    reps = int(min(max_reps, max(min_reps, target_s / est)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        flush_l2()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    t = sorted(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))
    return statistics.median(t), t[0], reps


def cold_or_none(fn, what, **kw):
    """cold_us(fn), or None (logged, naming `what`) when the kernel cannot run: a
    shape or backend one library refuses must not stop the section."""
    try:
        return cold_us(fn, **kw)
    except Exception as e:
        log(f"  {what}: {type(e).__name__}: {e}")
        return None


def warm_us(fn, target_s=0.02, max_launches=100):
    """Mean microseconds of back-to-back fn() in a CUDA graph (operands stay in L2
    when they fit). None when the graph cannot be captured."""
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        t0 = time.monotonic()
        fn()
        torch.cuda.synchronize()
        est = max(time.monotonic() - t0, 1e-6)
        n = int(min(max_launches, max(5, target_s / est)))
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(n):
                fn()
        g.replay()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        best = None
        for _ in range(3):
            a.record()
            g.replay()
            b.record()
            torch.cuda.synchronize()
            us = a.elapsed_time(b) * 1e3 / n
            best = us if best is None else min(best, us)
        del g
        return best, n
    except Exception as e:  # a kernel that cannot be captured: keep the cold figure
        log(f"  graph capture failed: {type(e).__name__}: {e}")
        torch.cuda.synchronize()
        return None, 0


def fmt(x, digits=3):
    return "" if x is None else f"{x:.{digits}f}"


# --------------------------------------------------------------------------- meta

def smi(query):
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        return dict(zip(query.split(","), [v.strip() for v in out.split("\n")[0].split(",")]))
    except Exception as e:
        return {"error": str(e)}


def loaded_library_version(fragment, symbol):
    """Major.minor.patch of a loaded NVIDIA library, read through its
    *GetProperty(MAJOR|MINOR|PATCH) entry point."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({l.split()[-1] for l in f if fragment in l and ".so" in l})
        for p in paths:
            lib = ctypes.CDLL(p)
            fn = getattr(lib, symbol, None)
            if fn is None:
                continue
            parts = []
            for prop in range(3):
                v = ctypes.c_int()
                fn(ctypes.c_int(prop), ctypes.byref(v))
                parts.append(str(v.value))
            return {"path": os.path.basename(p), "version": ".".join(parts)}
    except Exception as e:
        return {"error": str(e)}
    return None


def meta(args, clocks_before):
    p = torch.cuda.get_device_properties(0)
    try:
        import triton
        triton_version = triton.__version__
    except Exception:
        triton_version = None
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gpu": {"name": p.name, "sm_count": p.multi_processor_count, "total_memory_bytes": p.total_memory,
                "l2_cache_bytes": getattr(p, "L2_cache_size", None), "compute_capability": f"{p.major}.{p.minor}"},
        "nvidia_smi_before": clocks_before,
        "nvidia_smi_after": smi("clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,temperature.gpu,power.draw,"
                                "power.limit"),
        "driver": smi("driver_version,vbios_version"),
        "cuda_runtime": torch.version.cuda,
        "cublas": loaded_library_version("libcublas.so", "cublasGetProperty"),
        "cublaslt": loaded_library_version("libcublasLt.so", "cublasLtGetProperty"),
        "cudnn": torch.backends.cudnn.version(),
        "torch": torch.__version__,
        "triton": triton_version,
        "python": platform.python_version(),
        "timing": {"cold": "median of per-repetition CUDA-event times, each after reading a 256 MiB buffer",
                   "warm": "least of 3 replays of a CUDA graph of n back-to-back launches, divided by n",
                   "flush_bytes": FLUSH_BYTES},
        "budget_s": args.budget_s,
        "sections_cut_short": [],
        "wall_s": None,
    }
