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
  with efficiency.grouped_setup  fit split, after the GEMM curve; held-out scored after.
                               The two jointly: a grouped call's fixed setup
                               (GROUPED_SETUP_GRID, 0-15 us step 0.5) and its
                               streaming rate (docs/hardware-model.md §2.7); the
                               whole grid of both, each setup one `parasim
                               validate` run in which every point is repeated
                               once per rate on a copy of the GPU file holding
                               that rate (5 minutes on two busy cores)
  efficiency.launch_overhead   (only when --keys names it) the plain BF16 and FP8
                               GEMM points of the fit split (no groups): the fixed
                               cost of every kernel, grid 4-7 us step 0.1; held-out
                               scored after (Blackwell: tests/data/validation/
                               gemm-blackwell.yaml, XLA's sm_100 table)
  efficiency.gemm.nvfp4 and    (only when --keys names gemm_fp4) the FP4 GEMM points
  efficiency.gemm.mxfp4        (nvfp4, mxfp4) of the fit split: one ceiling for both
                               formats (one tensor path), grid 0.40-0.90 step 0.005
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

--attention-shape fits instead the two FlashAttention-2 shape constants of
topologies/kernels/flash-attention.yaml, the same for every GPU, jointly with
the FA2 shares of the GPUs whose FA2 kernels are read (docs/hardware-model.md
§3; docs/validation.md §3):

  head_dim0_flash2             grid 0-64 step 4 (FA2's head_dim loss)
  seq0_backward                grid 128-1152 step 32 (the backward's prologue)
  each GPU's FA2 share         efficiency.attention_flash2, or efficiency.attention
                               where the file has none (A100: FA2 is its best
                               kernel); on the grid 0.25-0.90 step 0.005, the
                               least MAPE of that GPU's FA2 points at each grid
                               point above, found by a walk from the last grid
                               point's share to one no worse than its neighbours
                               (the full grid's answer where a GPU's MAPE has one
                               minimum in the share; the full grid is searched
                               again at the optimum and printed beside it)

on kernel points only: every attention point of --reference (the reference
set: FA2 fwd+bwd on A100 and H100, FA3 forward on H100) and the attention
points of --dataset's fit split (the H200's FA2 and cuDNN kernels at head_dim
128; its held-out split is never read, and scored after). The FA3 and cuDNN
points keep their GPU's efficiency.attention; they are read because the
backward's prologue times cuDNN's backward too. The objective is the MAPE of
all the points read; a tie goes to the smaller constants. Each step of the
walk is one `parasim validate --attention-fit FILE` run, in which every FA2
point is repeated once per share on a copy of its GPU file that holds that
share. --head-dim0-grid and --seq0-backward-grid search a part of the grid
(the whole one is 561 grid points, each a few `parasim validate` runs: 15 minutes
on two busy cores).

    python3 tools/fit-kernel-constants.py --attention-shape \\
        --reference ../shared/validation/published.yaml \\
        --dataset tests/data/validation/h200-kernels.yaml [--write]
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
GROUPED_SETUP_GRID = [round(0.5 * i, 1) for i in range(31)]  # 0-15 us
CONSTANTS = [  # key under efficiency:, grid, which points
    ("hbm", [round(0.80 + 0.005 * i, 3) for i in range(37)], lambda p: p["kind"] == "memory", False),
    ("attention_flash2", [round(0.25 + 0.005 * i, 3) for i in range(61)],
     lambda p: p["kind"] == "attention" and p["op"]["impl"] == "flash2", True),
    ("hbm_grouped", [round(0.40 + 0.005 * i, 3) for i in range(111)],
     lambda p: p["kind"] == "gemm" and "groups" in p["op"] and p["op"]["dtype"] == "bf16", True),
    ("gemm_grouped_fp8", [round(0.40 + 0.005 * i, 3) for i in range(81)],
     lambda p: p["kind"] == "gemm" and "groups" in p["op"] and p["op"]["dtype"] == "fp8"
     and p["op"]["m"] >= GROUPED_FP8_MIN_M, True),
    ("launch_overhead", [round(4.0 + 0.1 * i, 1) for i in range(31)],
     lambda p: p["kind"] == "gemm" and "groups" not in p["op"] and p["op"]["dtype"] in ("bf16", "fp8"), True),
    ("gemm_fp4", [round(0.40 + 0.005 * i, 3) for i in range(101)],
     lambda p: p["kind"] == "gemm" and "groups" not in p["op"] and p["op"]["dtype"] in ("nvfp4", "mxfp4"), True),
]
# Fitted only when --keys names them: the default run (the H200's measurement) keeps its launch
# overhead, confirmed there rather than fitted, and has no FP4 points.
NOT_BY_DEFAULT = ("launch_overhead", "gemm_fp4")


def split_of(point):
    m = re.search(r"split: ([a-z-]+)", point.get("notes", ""))
    return m.group(1) if m else None


def with_value(text, key, value, comment):
    if key == "launch_overhead":
        return with_launch(text, value, comment)
    if key == "gemm_fp4":
        for dtype in ("nvfp4", "mxfp4"):
            text = with_value_at(text, "    " + dtype, value, comment)
        return text
    return with_value_at(text, "  " + key, value, comment)


def with_launch(text, us, comment):
    # A time with its unit; the comment keeps its column.
    new, n = re.subn(r"^(  launch_overhead: +)([0-9.]+ us *)#.*$",
                     lambda m: f"{m.group(1)}{f'{us:g} us'.ljust(len(m.group(2)) - 1)} # {comment}", text, count=1,
                     flags=re.M)
    if n != 1:
        sys.exit("no efficiency.launch_overhead in the GPU file")
    return new


def with_value_at(text, key, value, comment):
    # The comment keeps its column: the number and its padding together keep their width.
    new, n = re.subn(rf"^({key}: +)([0-9.]+ *)#.*$",
                     lambda m: f"{m.group(1)}{f'{value:g}'.ljust(len(m.group(2)) - 1)} # {comment}", text, count=1,
                     flags=re.M)
    if n != 1:
        sys.exit(f"no efficiency.{key.strip()} in the GPU file")
    return new


def with_setup(text, us, comment):
    # efficiency.grouped_setup, written after efficiency.hbm_grouped where the file has none yet;
    # its comment starts in the column of launch_overhead's.
    line = f"  grouped_setup: {us:g} us".ljust(34) + f"# {comment}"
    new, n = re.subn(r"^  grouped_setup: .*$", lambda m: line, text, count=1, flags=re.M)
    if n == 1:
        return new
    new, n = re.subn(r"^(  hbm_grouped: .*)$", lambda m: m.group(1) + "\n" + line, text, count=1, flags=re.M)
    if n != 1:
        sys.exit("no efficiency.hbm_grouped in the GPU file to write efficiency.grouped_setup after")
    return new


def fit_grouped(parasim, fit_points, gpu, text, rates, comments):
    """(MAPE, setup, rate): the least MAPE of fit_points over GROUPED_SETUP_GRID x rates
    (a tie: the smaller setup, then the smaller rate), and the least MAPE without a setup."""
    def variant(rate):
        return f"{gpu}-grouped-{rate:.3f}".replace(".", "p")

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        gpu_dir = os.path.join(tmp, "gpus")
        shutil.copytree(GPU_DIR, gpu_dir)
        # Every point once per rate, each on its variant of the GPU file; notes and sources
        # dropped (the simulation reads neither); JSON, which is YAML and faster to write.
        repeated = [dict({k: v for k, v in p.items() if k != "notes"}, source="fit", id=f"{p['id']}@{r}",
                         hardware=dict(p["hardware"], gpu=variant(r))) for r in rates for p in fit_points]
        with open(os.path.join(tmp, "points.json"), "w") as f:
            json.dump({"points": repeated}, f)
        for setup in GROUPED_SETUP_GRID:
            base = with_setup(text, setup, comments[1])
            for r in rates:
                t = with_value(base, "hbm_grouped", r, comments[0])
                with open(os.path.join(gpu_dir, variant(r) + ".yaml"), "w") as f:
                    f.write(re.sub(r"^name: .*$", f"name: {variant(r)}", t, count=1, flags=re.M))
            out = subprocess.run([parasim, "validate", os.path.join(tmp, "points.json"), "--gpu-dir", gpu_dir,
                                  "--format", "json", "-j", "2"], check=True, capture_output=True, text=True).stdout
            errors = {}
            for p in json.loads(out)["points"]:
                errors.setdefault(float(p["id"].rsplit("@", 1)[1]), []).append(abs(p["error"]))
            results += [(sum(e) / len(e), setup, r) for r, e in errors.items()]
    return min(results), min(r for r in results if r[1] == 0)


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


KERNEL_FILE = "topologies/kernels/flash-attention.yaml"
HEAD_DIM0_FLASH2_GRID = list(range(0, 65, 4))
SEQ0_BACKWARD_GRID = list(range(128, 1153, 32))
FLASH2_SHARE_GRID = [round(0.25 + 0.005 * i, 3) for i in range(131)]


def grid_arg(text):
    first, last, step = (int(x) for x in text.split(":"))
    return list(range(first, last + 1, step))


def with_shape(text, key, value):
    new, n = re.subn(rf"^({key}:\n  value: )[0-9.]+$", lambda m: f"{m.group(1)}{value:g}", text, count=1, flags=re.M)
    if n != 1:
        sys.exit(f"no {key} in {KERNEL_FILE}")
    return new


def shape_value(text, key):
    return float(re.search(rf"^{key}:\n  value: ([0-9.]+)$", text, flags=re.M).group(1))


def share_key(gpu_text):
    # FA2 runs at efficiency.attention_flash2 where the file has it, else at
    # efficiency.attention (the best kernel before Hopper is FA2).
    return "attention_flash2" if re.search(r"^  attention_flash2:", gpu_text, flags=re.M) else "attention"


def share_value(gpu_text, key):
    return float(re.search(rf"^  {key}: +([0-9.]+)", gpu_text, flags=re.M).group(1))


def attention_errors(parasim, kernel_text, tmp):
    """Signed errors of tmp/points.yaml at one grid point: {id: error} of the
    points as given, {(gpu, share): [errors]} of the FA2 points repeated per share."""
    with open(os.path.join(tmp, "flash-attention.yaml"), "w") as f:
        f.write(kernel_text)
    out = subprocess.run([parasim, "validate", os.path.join(tmp, "points.yaml"), "--gpu-dir",
                          os.path.join(tmp, "gpus"), "--attention-fit", os.path.join(tmp, "flash-attention.yaml"),
                          "--format", "json", "-j", "2"], check=True, capture_output=True, text=True).stdout
    by_fa2 = {}
    fixed_errors = {}
    for p in json.loads(out)["points"]:
        if p.get("skipped"):
            sys.exit(f"{p['id']} skipped: {p.get('reason')}")
        if "@" in p["id"]:
            _, gpu, share = p["id"].split("@")
            by_fa2.setdefault((gpu, float(share)), []).append(p["error"])
        else:
            fixed_errors[p["id"]] = p["error"]
    return fixed_errors, by_fa2


def variant(gpu, share):
    return f"{gpu}-fa2-{share:.3f}".replace(".", "p")


def attention_shape(a):
    ref = [p for p in yaml.safe_load(open(a.reference))["points"] if p["kind"] == "attention"]
    own = [p for p in yaml.safe_load(open(a.dataset))["points"] if p["kind"] == "attention"]
    fit_points = ref + [p for p in own if split_of(p) == "fit"]
    held = [p for p in own if split_of(p) == "held-out"]
    kernel_text = open(KERNEL_FILE).read()
    gpus = sorted({p["hardware"]["gpu"] for p in fit_points if p["op"]["impl"] == "flash2"})
    gpu_text = {g: open(os.path.join(GPU_DIR, g + ".yaml")).read() for g in gpus}
    keys = {g: share_key(gpu_text[g]) for g in gpus}

    def write_points(tmp, shares):
        # The FA2 points once per share of shares[gpu], each on a GPU file
        # holding that share; notes and sources dropped (the simulation reads
        # neither, and a shorter file loads faster). Written as JSON, which is
        # YAML and much faster to write from Python.
        out = []
        for p in fit_points:
            q = {k: v for k, v in p.items() if k != "notes"}
            q["source"] = "fit"
            g = p["hardware"]["gpu"]
            if p["op"]["impl"] != "flash2" or g not in gpus:
                out.append(q)
                continue
            for s in shares[g]:
                out.append(dict(q, id=f"{p['id']}@{g}@{s}", hardware=dict(p["hardware"], gpu=variant(g, s))))
        with open(os.path.join(tmp, "points.yaml"), "w") as f:
            json.dump({"points": out}, f)

    def best_shares(kernel, tmp, shares):
        # Each GPU's share: least MAPE of its FA2 points (a tie: the smaller);
        # returns the summed absolute errors of all points and their count too.
        write_points(tmp, shares)
        fixed_errors, by_fa2 = attention_errors(a.parasim, kernel, tmp)
        best, total, n = {}, sum(abs(e) for e in fixed_errors.values()), len(fixed_errors)
        for g in gpus:
            b = min((sum(abs(e) for e in by_fa2[(g, s)]), s) for s in shares[g])
            best[g] = b[1]
            total += b[0]
            n += len(by_fa2[(g, b[1])])
        return best, total, n

    def search(kernel, tmp, start):
        # A walk on the 0.005 grid from `start` (the last grid point's shares)
        # to a share no worse than both its neighbours, all GPUs at once: the
        # full grid's answer wherever a GPU's MAPE has one minimum in the share
        # (checked on the full grid at the optimum below).
        step = FLASH2_SHARE_GRID[1] - FLASH2_SHARE_GRID[0]
        seen = {g: {} for g in gpus}
        todo = {g: [s for s in FLASH2_SHARE_GRID if abs(s - start[g]) <= step + 1e-9] for g in gpus}
        while any(todo.values()):
            write_points(tmp, todo)
            fixed_errors, by_fa2 = attention_errors(a.parasim, kernel, tmp)
            for (g, s), errors in by_fa2.items():
                seen[g][s] = (sum(abs(e) for e in errors), len(errors))
            todo = {}
            for g in gpus:
                best = min(seen[g], key=lambda s: (seen[g][s][0], s))
                todo[g] = [s for s in FLASH2_SHARE_GRID if abs(s - best) <= step + 1e-9 and s not in seen[g]]
        shares = {g: min(seen[g], key=lambda s: (seen[g][s][0], s)) for g in gpus}
        total = sum(abs(e) for e in fixed_errors.values()) + sum(seen[g][shares[g]][0] for g in gpus)
        return shares, total, len(fixed_errors) + sum(seen[g][shares[g]][1] for g in gpus)

    with tempfile.TemporaryDirectory() as tmp:
        gpu_dir = os.path.join(tmp, "gpus")
        shutil.copytree(GPU_DIR, gpu_dir)
        for g in gpus:
            for s in FLASH2_SHARE_GRID:
                text = with_value(gpu_text[g], keys[g], s, "a fit-kernel-constants.py grid copy")
                text = re.sub(r"^name: .*$", f"name: {variant(g, s)}", text, count=1, flags=re.M)
                with open(os.path.join(gpu_dir, variant(g, s) + ".yaml"), "w") as f:
                    f.write(text)
        results = []
        start = {g: share_value(gpu_text[g], keys[g]) for g in gpus}
        for d0 in a.head_dim0_grid:
            for s0 in a.seq0_backward_grid:
                shares, total, n = search(with_shape(with_shape(kernel_text, "head_dim0_flash2", d0), "seq0_backward",
                                                     s0), tmp, start)
                results.append((total / n, d0, s0, shares))
                start = shares
            row = min((r for r in results if r[1] == d0), key=lambda r: (r[0], r[2]))
            print(f"  head_dim0_flash2 {d0}: best seq0_backward {row[2]}, MAPE {row[0] * 100:.2f}%", file=sys.stderr,
                  flush=True)
        m, d0, s0, shares = min(results, key=lambda r: (r[0], r[1], r[2]))
        new_text = with_shape(with_shape(kernel_text, "head_dim0_flash2", d0), "seq0_backward", s0)
        full, _, _ = best_shares(new_text, tmp, {g: FLASH2_SHARE_GRID for g in gpus})
        file_d0, file_s0 = shape_value(kernel_text, "head_dim0_flash2"), shape_value(kernel_text, "seq0_backward")
        now = next((r for r in results if r[1] == file_d0 and r[2] == file_s0), None)
    print(f"head_dim0_flash2 {d0}, seq0_backward {s0}; MAPE {m * 100:.2f}% over {n} kernel points "
          f"({len(ref)} of {a.reference}, {n - len(ref)} of the fit split of {a.dataset})")
    for g in gpus:
        print(f"  {g}: efficiency.{keys[g]} {shares[g]} (the full 0.005 grid: {full[g]}; "
              f"file: {share_value(gpu_text[g], keys[g])})")
    if now:
        print(f"the files' head_dim0_flash2 {file_d0:g}, seq0_backward {file_s0:g}: MAPE {now[0] * 100:.2f}%"
              + (" (the same)" if (file_d0, file_s0) == (d0, s0) else " (the grid's optimum differs)"))
    else:
        print(f"the files' head_dim0_flash2 {file_d0:g}, seq0_backward {file_s0:g} are not on the grid searched")
    new_gpu = {g: with_value(gpu_text[g], keys[g], shares[g],
                             re.search(rf"^  {keys[g]}: +[0-9.]+ *# (.*)$", gpu_text[g], flags=re.M).group(1))
               for g in gpus}
    if held:
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(GPU_DIR, os.path.join(tmp, "gpus"))
            for g in gpus:
                with open(os.path.join(tmp, "gpus", g + ".yaml"), "w") as f:
                    f.write(new_gpu[g])
            with open(os.path.join(tmp, "points.yaml"), "w") as f:
                yaml.safe_dump({"points": held}, f, sort_keys=False)
            fixed_errors, _ = attention_errors(a.parasim, new_text, tmp)
        print(f"held-out split of {a.dataset}: MAPE {sum(abs(e) for e in fixed_errors.values()) / len(held) * 100:.2f}% "
              f"(n {len(held)}; never read by the fit)")
    if a.write:
        with open(KERNEL_FILE, "w") as f:
            f.write(new_text)
        for g in gpus:
            with open(os.path.join(GPU_DIR, g + ".yaml"), "w") as f:
                f.write(new_gpu[g])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parasim", default="build/bin/parasim")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--gpu", help="the GPU whose constants are fitted (not with --attention-shape)")
    ap.add_argument("--write", action="store_true", help="write the fitted values into the GPU file")
    ap.add_argument("--keys", default=",".join(c[0] for c in CONSTANTS if c[0] not in NOT_BY_DEFAULT),
                    help="the constants to fit (and write), comma-separated")
    ap.add_argument("--attention-shape", action="store_true",
                    help="fit head_dim0_flash2 and seq0_backward jointly with the FA2 shares (above)")
    ap.add_argument("--reference", help="with --attention-shape: the reference set, every attention point read")
    ap.add_argument("--head-dim0-grid", type=grid_arg, default=HEAD_DIM0_FLASH2_GRID,
                    help="with --attention-shape: head_dim0_flash2's grid, FIRST:LAST:STEP (default 0:64:4)")
    ap.add_argument("--seq0-backward-grid", type=grid_arg, default=SEQ0_BACKWARD_GRID,
                    help="with --attention-shape: seq0_backward's grid, FIRST:LAST:STEP (default 128:1152:32)")
    a = ap.parse_args()
    if a.attention_shape:
        if not a.reference:
            ap.error("--attention-shape needs --reference")
        attention_shape(a)
        return
    if not a.gpu:
        ap.error("--gpu is required")
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
        what = {"launch_overhead": "BF16 and FP8 GEMMs", "gemm_fp4": "FP4 GEMMs"}.get(key, key.replace("_", " "))
        comment = (f"fitted_on: tools/fit-kernel-constants.py --dataset {a.dataset} --gpu {a.gpu}"
                   + (f" --keys {key}" if key in NOT_BY_DEFAULT else "") + f", the "
                   f"{len(fit_points)} {a.gpu} {what}"
                   + (f" (tokens per expert >= {GROUPED_FP8_MIN_M})" if key == "gemm_grouped_fp8" else "") + f" {which}"
                   + (" (held-out points never read)" if split else ""))
        if key == "hbm_grouped":
            setup_comment = (f"fitted_on: tools/fit-kernel-constants.py --dataset {a.dataset} --gpu {a.gpu} --keys "
                             f"hbm_grouped, jointly with hbm_grouped on the {len(fit_points)} {a.gpu} BF16 grouped "
                             "GEMMs of the fit split (held-out points never read): a grouped call's GPU time beyond "
                             "launch_overhead, whatever its groups and bytes (docs/hardware-model.md §2.7)")
            comment += ", jointly with grouped_setup"
            (m, setup, rate), none = fit_grouped(a.parasim, fit_points, a.gpu, text, grid, (comment, setup_comment))
            best = (m, rate)
            text = with_setup(text, setup, setup_comment)
            print(f"{a.gpu}: efficiency.grouped_setup {setup:g} us (without it: hbm_grouped {none[2]}, {which} "
                  f"MAPE {none[0] * 100:.2f}%)", flush=True)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                best = min((mape(a.parasim, fit_points, a.gpu, with_value(text, key, v, comment), tmp), v)
                           for v in grid)
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
