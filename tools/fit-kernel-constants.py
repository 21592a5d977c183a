#!/usr/bin/env python3
"""Fits one GPU's memory and FlashAttention-2 efficiencies on a kernel set of the
format of ../shared/validation/README.md (docs/validation.md §3), one constant at
a time, each on the points that time it:

  efficiency.hbm               the memory points (copy, read, write, triad on
                               arrays that stream from HBM); a one-number
                               measurement, so every point is read and the
                               error printed is in-sample
  efficiency.attention_flash2  the attention points with impl flash2 of the fit
                               split; the held-out split is scored afterwards
  efficiency.hbm_grouped       the BF16 grouped GEMM points (op.groups) of the
                               fit split, after the GEMM curve; held-out scored after
  efficiency.gemm_grouped_fp8  the FP8 grouped GEMM points of the fit split with
                               at least GROUPED_FP8_MIN_M tokens per expert, after
                               hbm_grouped: a ceiling sets compute-bound kernels,
                               and below that the streaming rate and the launch do
                               (as tools/fit-gemms.py --fp8 fits k0_fp8 from m 1024);
                               the held-out split's such points scored after

Each is an exhaustive search over a fixed grid (least mean absolute percentage
error of `parasim validate`; a tie goes to the smaller value), so it is
deterministic and needs no start. The simulator's own code is the model.

    python3 tools/fit-kernel-constants.py --dataset tests/data/validation/h200-kernels.yaml \\
        --gpu h200 [--keys hbm] [--write]
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

GPU_DIR = "topologies/gpus"
GROUPED_FP8_MIN_M = 1024
CONSTANTS = [  # key under efficiency:, grid, which points
    ("hbm", [round(0.80 + 0.005 * i, 3) for i in range(37)], lambda p: p["kind"] == "memory", False),
    ("attention_flash2", [round(0.25 + 0.005 * i, 3) for i in range(61)],
     lambda p: p["kind"] == "attention" and p["op"]["impl"] == "flash2", True),
    ("hbm_grouped", [round(0.40 + 0.005 * i, 3) for i in range(111)],
     lambda p: p["kind"] == "gemm" and "groups" in p["op"] and p["op"]["dtype"] == "bf16", True),
    ("gemm_grouped_fp8", [round(0.40 + 0.005 * i, 3) for i in range(81)],
     lambda p: p["kind"] == "gemm" and "groups" in p["op"] and p["op"]["dtype"] == "fp8"
     and p["op"]["m"] >= GROUPED_FP8_MIN_M, True),
]


def split_of(point):
    m = re.search(r"split: ([a-z-]+)", point.get("notes", ""))
    return m.group(1) if m else None


def with_value(text, key, value, comment):
    # The comment keeps its column: the number and its padding together keep their width.
    new, n = re.subn(rf"^(  {key}: +)([0-9.]+ *)#.*$",
                     lambda m: f"{m.group(1)}{f'{value:g}'.ljust(len(m.group(2)) - 1)} # {comment}", text, count=1,
                     flags=re.M)
    if n != 1:
        sys.exit(f"no efficiency.{key} in the GPU file")
    return new


def mape(parasim, points, gpu, text, tmp):
    gpu_dir = os.path.join(tmp, "gpus")
    if not os.path.isdir(gpu_dir):
        shutil.copytree(GPU_DIR, gpu_dir)
    with open(os.path.join(gpu_dir, gpu + ".yaml"), "w") as f:
        f.write(text)
    data = os.path.join(tmp, "points.yaml")
    with open(data, "w") as f:
        yaml.safe_dump({"points": points}, f, sort_keys=False)
    out = subprocess.run([parasim, "validate", data, "--gpu-dir", gpu_dir, "--format", "json", "-j", "2"],
                         check=True, capture_output=True, text=True).stdout
    e = [abs(p["error"]) for p in json.loads(out)["points"]]
    return sum(e) / len(e)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parasim", default="build/bin/parasim")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--write", action="store_true", help="write the fitted values into the GPU file")
    ap.add_argument("--keys", default=",".join(c[0] for c in CONSTANTS),
                    help="the constants to fit (and write), comma-separated")
    a = ap.parse_args()
    points = [p for p in yaml.safe_load(open(a.dataset))["points"] if p["hardware"]["gpu"] == a.gpu]
    path = os.path.join(GPU_DIR, a.gpu + ".yaml")
    text = open(path).read()
    for key, grid, chosen, split in CONSTANTS:
        if key not in a.keys.split(","):
            continue
        mine = [p for p in points if chosen(p)]
        fit_points = [p for p in mine if split_of(p) == "fit"] if split else mine
        held = [p for p in mine if split_of(p) == "held-out"] if split else []
        if not fit_points:
            print(f"{a.gpu}: no points for efficiency.{key}")
            continue
        which = "fit split" if split else "points"
        comment = (f"fitted_on: tools/fit-kernel-constants.py --dataset {a.dataset} --gpu {a.gpu}, the "
                   f"{len(fit_points)} {a.gpu} {key.replace('_', ' ')}"
                   + (f" (tokens per expert >= {GROUPED_FP8_MIN_M})" if key == "gemm_grouped_fp8" else "") + f" {which}"
                   + (" (held-out points never read)" if split else ""))
        with tempfile.TemporaryDirectory() as tmp:
            best = min((mape(a.parasim, fit_points, a.gpu, with_value(text, key, v, comment), tmp), v) for v in grid)
        line = f"{a.gpu}: efficiency.{key} {best[1]}; {which} MAPE {best[0] * 100:.2f}% (n {len(fit_points)})"
        text = with_value(text, key, best[1], comment)
        if held:
            with tempfile.TemporaryDirectory() as tmp:
                line += f"; held-out MAPE {mape(a.parasim, held, a.gpu, text, tmp) * 100:.2f}% (n {len(held)})"
        print(line, flush=True)
    if a.write:
        with open(path, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
