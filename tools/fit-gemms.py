#!/usr/bin/env python3
"""Fits the GEMM efficiency curve of docs/hardware-model.md §2 per GPU on the
fit split of tests/data/validation/gemm-vidur.yaml (docs/validation.md §3).

Three parameters per GPU, for the dtype the data measured (FP16):
  efficiency.gemm.fp16   the ceiling (the GPU's own tile, long k, full waves)
  gemm_curve.k0          a tile's pipeline prologue/epilogue, in k
  gemm_curve.overlap     the exponent p of the soft roofline
                         (compute^p + hbm^p + l2^p)^(1/p)
The held-out split (points whose notes say `split: held-out`) is never read
by the fit; it is only scored afterwards. The objective is the mean absolute
percentage error of `parasim validate` on the fit split, so the simulator's
own code is the model (no second implementation here). The search is a
coordinate descent on a fixed grid of steps, deterministic.

    python3 tools/fit-gemms.py --parasim build/bin/parasim            # print the fit
    python3 tools/fit-gemms.py --parasim build/bin/parasim --write    # and write the GPU files

--fp8 fits the FP8 pipeline depth instead (docs/hardware-model.md §2.6):
  gemm_curve.k0_fp8      a tile's fixed cost, in k, of FP8 GEMMs only
on the fit split of tests/data/validation/gemm-fp8.yaml (DeepGEMM, H800 read
as h100-sxm), the GEMMs with m >= FP8_MIN_M only: the m = 64 and 128 rows are
6-47 us kernels where the launch cost and memory, not the k loop, set the
time. Every other value of the GPU file stays as it is (the FP16 fit above
comes first). The search is exhaustive on the grid FP8_GRID (least MAPE; a
tie goes to the smaller value), so it is deterministic and needs no start.

    python3 tools/fit-gemms.py --parasim build/bin/parasim --fp8 [--write]

--dataset FILE --gpu NAME --dtype DTYPE fits one GPU on another kernel set of the
same format and split convention, on its GEMMs of that dtype (with --fp8: its FP8
GEMMs), and also scores the held-out split. parasim's own H200 measurement
(tests/data/kernels/h200-2026-11-25, tools/gpu/measure-kernels.py) is fitted so:

    python3 tools/fit-gemms.py --dataset tests/data/validation/h200-kernels.yaml \
        --gpu h200 --dtype bf16 [--write]
    python3 tools/fit-gemms.py --dataset tests/data/validation/h200-kernels.yaml \
        --gpu h200 --fp8 [--write]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

DATASET = "tests/data/validation/gemm-vidur.yaml"
GPU_DIR = "topologies/gpus"
GPUS = ["a100-sxm-80gb", "h100-sxm"]
# name, start, lower, upper, first step (multiplicative for k0 and overlap, additive for the ceiling)
PARAMS = [("ceiling", None, 0.50, 0.99, 0.04), ("k0", 64.0, 8.0, 2048.0, 2.0),
          ("overlap", 4.0, 1.0, 64.0, 2.0)]
ROUNDS = 6
# The ceiling's start of a --dtype bf16 fit: the H100 SXM's BF16 ceiling, 794.5 of
# 989.4 TFLOP/s (MAMF, [STAS-ACC] in topologies/gpus/h100-sxm.yaml), the value the
# H200 file held before its own fit (same SM and tensor cores).
BF16_START = 0.803
FP8_DATASET = "tests/data/validation/gemm-fp8.yaml"
FP8_GPUS = ["h100-sxm"]
FP8_MIN_M = 1024
FP8_GRID = list(range(25, 1001, 25))  # k0_fp8 candidates: 25 .. 1000 step 25


def split_of(point):
    m = re.search(r"split: ([a-z-]+)", point.get("notes", ""))
    return m.group(1) if m else None


def start_ceiling(text, dtype):
    """The ceiling's start. For the FP16 fits it is the GPU file's BF16 ceiling,
    a measurement (MAMF) the fit never writes, so a rerun on fitted files starts
    where the first run did. A --dtype bf16 fit writes that very value, so it
    starts from BF16_START instead, whatever the file holds: the result does not
    depend on an earlier run (starting from the file's own last result, a rerun
    moved H200's k0 from 90 to 89)."""
    if dtype == "bf16":
        return BF16_START
    m = re.search(r"^  gemm:\n(?:    .*\n)*?    bf16: ([0-9.]+)", text, re.M)
    if not m:
        sys.exit("no efficiency.gemm.bf16 in the GPU file")
    return float(m.group(1))


def with_params(text, ceiling, k0, overlap, comment, dtype="fp16"):
    """The GPU file's text with the three values set (other lines untouched)."""
    text = re.sub(r"(^  gemm:\n(?:    .*\n)*?    " + dtype + r": )[0-9.]+( *)(#.*)?$",
                  lambda m: f"{m.group(1)}{ceiling:.3f}{m.group(2) or ' '}# {comment}", text, count=1, flags=re.M)
    fp8 = re.search(r"^  k0_fp8:.*\n", text, re.M)  # the --fp8 fit's line, kept as it is
    text = re.sub(r"^gemm_curve:.*\n(?:  .*\n)*", "", text, flags=re.M)
    if not text.endswith("\n"):
        text += "\n"
    text += (f"gemm_curve:                       # docs/hardware-model.md §2\n"
             f"  k0: {k0:.0f}                         # {comment}\n"
             + (fp8.group(0) if fp8 else "") +
             f"  overlap: {overlap:.2f}                  # {comment}\n")
    return text


class Scorer:
    def __init__(self, parasim, points, tmp):
        self.parasim, self.tmp = parasim, tmp
        self.gpu_dir = os.path.join(tmp, "gpus")
        shutil.copytree(GPU_DIR, self.gpu_dir)
        self.data = os.path.join(tmp, "points.yaml")
        with open(self.data, "w") as f:
            yaml.safe_dump({"points": points}, f, sort_keys=False)
        self.cache = {}

    def errors(self, gpu, text):
        with open(os.path.join(self.gpu_dir, gpu + ".yaml"), "w") as f:
            f.write(text)
        out = subprocess.run([self.parasim, "validate", self.data, "--gpu-dir", self.gpu_dir, "--format", "json",
                              "-j", "2"], check=True, capture_output=True, text=True).stdout
        return {p["id"]: p["error"] for p in json.loads(out)["points"]}

    def mape(self, gpu, text):
        if text not in self.cache:
            e = [abs(v) for v in self.errors(gpu, text).values()]
            self.cache[text] = sum(e) / len(e)
        return self.cache[text]


def of_dtype(points, gpu, dtype, split):
    """The plain GEMMs of one dtype and split (grouped GEMMs, op.groups, have their own fit)."""
    return [p for p in points if p["hardware"]["gpu"] == gpu and p["kind"] == "gemm" and p["op"]["dtype"] == dtype
            and "groups" not in p["op"] and split_of(p) == split]


def fit(gpu, points, parasim, comment, dtype="fp16"):
    base = open(os.path.join(GPU_DIR, gpu + ".yaml")).read()
    fit_points = of_dtype(points, gpu, dtype, "fit")
    with tempfile.TemporaryDirectory() as tmp:
        s = Scorer(parasim, fit_points, tmp)
        x = {name: start for name, start, _, _, _ in PARAMS}
        x["ceiling"] = start_ceiling(base, dtype)
        steps = {name: step for name, _, _, _, step in PARAMS}
        score = lambda v: s.mape(gpu, with_params(base, v["ceiling"], v["k0"], v["overlap"], comment, dtype))
        best = score(x)
        for _ in range(ROUNDS):
            for name, _, lo, hi, _ in PARAMS:
                improved = True
                while improved:
                    improved = False
                    for direction in (+1, -1):
                        y = dict(x)
                        if name == "ceiling":
                            y[name] = round(min(hi, max(lo, x[name] + direction * steps[name])), 3)
                        else:
                            f = steps[name] ** direction
                            y[name] = min(hi, max(lo, x[name] * f))
                            y[name] = round(y[name], 2) if name == "overlap" else round(y[name])
                        if y == x:
                            continue
                        v = score(y)
                        if v < best - 1e-9:
                            x, best, improved = y, v, True
                            break
            steps = {n: (st / 2 if n == "ceiling" else st ** 0.5) for n, st in steps.items()}
        return x, best, len(fit_points)


def with_k0_fp8(text, k0_fp8, comment):
    """The GPU file's text with gemm_curve.k0_fp8 set (after k0), other lines untouched."""
    text = re.sub(r"^  k0_fp8:.*\n", "", text, flags=re.M)
    new, n = re.subn(r"(^gemm_curve:.*\n(?:  .*\n)*?  k0: .*\n)",
                     lambda m: f"{m.group(1)}  k0_fp8: {k0_fp8:<4d}                   # {comment}\n",
                     text, count=1, flags=re.M)
    if n != 1:
        sys.exit("no gemm_curve.k0 in the GPU file: run the FP16 fit first")
    return new


def fit_fp8(gpu, points, parasim, comment):
    """k0_fp8 of least fit-split MAPE over FP8_GRID; also the MAPE at k0 and on the held-out split."""
    base = open(os.path.join(GPU_DIR, gpu + ".yaml")).read()
    fit_points = [p for p in of_dtype(points, gpu, "fp8", "fit") if p["op"]["m"] >= FP8_MIN_M]
    held = of_dtype(points, gpu, "fp8", "held-out")
    with tempfile.TemporaryDirectory() as tmp:
        s = Scorer(parasim, fit_points, tmp)
        scores = [(s.mape(gpu, with_k0_fp8(base, k, comment)), k) for k in FP8_GRID]
        best, k0_fp8 = min(scores)
    with tempfile.TemporaryDirectory() as tmp:
        h = Scorer(parasim, held, tmp)
        held_mape = h.mape(gpu, with_k0_fp8(base, k0_fp8, comment))
    return k0_fp8, best, len(fit_points), held_mape, len(held)


def main_fp8(a):
    dataset = a.dataset or FP8_DATASET
    points = yaml.safe_load(open(dataset))["points"]
    for gpu in ([a.gpu] if a.dataset else FP8_GPUS):
        n_fit = sum(1 for p in of_dtype(points, gpu, "fp8", "fit") if p["op"]["m"] >= FP8_MIN_M)
        what = "parasim's own measurement" if a.dataset else "deepseek-ai/DeepGEMM H800 table"
        args = f" --dataset {dataset} --gpu {gpu}" if a.dataset else ""
        comment = (f"fitted_on: tools/fit-gemms.py --fp8{args}, the {n_fit} {gpu} FP8 GEMMs with m >= {FP8_MIN_M} "
                   f"of the fit split of {dataset} ({what}; held-out points never read)")
        k0_fp8, best, n, held, n_held = fit_fp8(gpu, points, a.parasim, comment)
        print(f"{gpu}: k0_fp8 {k0_fp8}; fit-split MAPE {best * 100:.2f}% (n {n}); "
              f"held-out MAPE {held * 100:.2f}% (n {n_held}, all m)", flush=True)
        if a.write:
            path = os.path.join(GPU_DIR, gpu + ".yaml")
            text = open(path).read()
            with open(path, "w") as f:
                f.write(with_k0_fp8(text, k0_fp8, comment))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parasim", default="build/bin/parasim")
    ap.add_argument("--write", action="store_true", help="write the fitted values into topologies/gpus/*.yaml")
    ap.add_argument("--fp8", action="store_true", help="fit gemm_curve.k0_fp8 on the FP8 dataset instead")
    ap.add_argument("--dataset", help="another kernel set (same format and splits); needs --gpu")
    ap.add_argument("--gpu", help="the one GPU to fit on --dataset")
    ap.add_argument("--dtype", default="fp16", help="with --dataset: the GEMM dtype to fit (fp16, bf16)")
    a = ap.parse_args()
    if bool(a.dataset) != bool(a.gpu):
        ap.error("--dataset and --gpu go together")
    if a.fp8:
        main_fp8(a)
        return
    dataset = a.dataset or DATASET
    points = yaml.safe_load(open(dataset))["points"]
    for gpu in ([a.gpu] if a.dataset else GPUS):
        n_fit = len(of_dtype(points, gpu, a.dtype, "fit"))
        if a.dataset:
            comment = (f"fitted_on: tools/fit-gemms.py --dataset {dataset} --gpu {gpu} --dtype {a.dtype}, the {n_fit} "
                       f"{gpu} {a.dtype.upper()} GEMMs of its fit split (parasim's own measurement; held-out models "
                       f"never read)")
        else:
            comment = (f"fitted_on: tools/fit-gemms.py, the {n_fit} {gpu} FP16 GEMMs of the fit split of "
                       f"{DATASET} (microsoft/vidur profiles; held-out models never read)")
        x, best, n = fit(gpu, points, a.parasim, comment, a.dtype)
        print(f"{gpu}: ceiling {a.dtype} {x['ceiling']:.3f}, k0 {x['k0']:.0f}, overlap {x['overlap']:.2f}; "
              f"fit-split MAPE {best * 100:.2f}% (n {n})", flush=True)
        if a.dataset:
            held = of_dtype(points, gpu, a.dtype, "held-out")
            base = open(os.path.join(GPU_DIR, gpu + ".yaml")).read()
            with tempfile.TemporaryDirectory() as tmp:
                h = Scorer(a.parasim, held, tmp)
                print(f"{gpu}: held-out MAPE {h.mape(gpu, with_params(base, x['ceiling'], x['k0'], x['overlap'], comment, a.dtype)) * 100:.2f}% (n {len(held)})", flush=True)
        if a.write:
            path = os.path.join(GPU_DIR, gpu + ".yaml")
            text = open(path).read()
            with open(path, "w") as f:
                f.write(with_params(text, x["ceiling"], x["k0"], x["overlap"], comment, a.dtype))


if __name__ == "__main__":
    main()
