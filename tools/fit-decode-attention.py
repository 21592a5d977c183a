#!/usr/bin/env python3
"""Fit the TensorRT-LLM 0.6 profile's decode_attention_issue (docs/software-profiles.md §3).

One global parameter of one profile, fitted on whole runs (the dataset's rule: at most three per
profile, never per point, with leave-one-source-out cross-validation). The runs: the inference points
of the dataset whose `source` is the "Peak Throughput" tables of TensorRT-LLM's performance page for v0.6.1 The reference set does
not carry `software:` on them, so this script adds `software: {name: tensorrt-llm, version: '0.6.1'}`
to exactly those points in a temporary copy (their source names the stack and the release). It then
runs `parasim validate --kind inference` with the profile's value on a grid, and prints the mean
absolute error at each value, the in-sample optimum and the leave-one-source-out predictions (each
source's points predicted with the value fitted on the other sources).

    python3 tools/fit-decode-attention.py [--parasim build/bin/parasim] [--dataset PATH]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILE = "tensorrt-llm-0.6.yaml"
SOURCE_MARK = "NVIDIA/TensorRT-LLM docs/source/performance.md"
GRID = [x / 2 for x in range(0, 31)]  # 0, 0.5, ... 15


def with_software(text):
    """The dataset with software named on the v0.6.1 performance-page points (text edit, keeps the rest)."""
    out, ids, block = [], [], []

    def flush():
        if not block:
            return
        b = "".join(block)
        if SOURCE_MARK in b and "v0.6.1" in b and "Peak Throughput" in b and "\n  software:" not in b:
            b = b.rstrip("\n") + "\n  software:\n    name: tensorrt-llm\n    version: '0.6.1'\n"
            ids.append(re.search(r"- id: (\S+)", b).group(1))
        out.append(b)
        block.clear()

    for line in text.splitlines(keepends=True):
        if line.startswith("- id: "):
            flush()
            block.append(line)
        elif block:
            block.append(line)
        else:
            out.append(line)
    flush()
    return "".join(out), ids


def run(parasim, dataset, softdir, ids):
    r = subprocess.run([parasim, "validate", dataset, "--kind", "inference", "--format", "json", "--software-dir",
                        softdir, "--id", ",".join(ids)], capture_output=True, text=True, check=True)
    return {p["id"]: p for p in json.loads(r.stdout)["points"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parasim", default=os.path.join(ROOT, "build/bin/parasim"))
    ap.add_argument("--dataset", default=os.path.join(ROOT, "..", "shared", "validation", "published.yaml"))
    a = ap.parse_args()
    text, ids = with_software(open(a.dataset).read())
    if not ids:
        sys.exit("no TensorRT-LLM v0.6.1 inference points in " + a.dataset)
    profile = open(os.path.join(ROOT, "topologies/software", PROFILE)).read()
    errs = {}  # value -> id -> signed error
    sources = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "points.yaml")
        open(data, "w").write(text)
        soft = os.path.join(tmp, "software")
        shutil.copytree(os.path.join(ROOT, "topologies/software"), soft)
        for v in GRID:
            p = re.sub(r"(decode_attention_issue:\n  value: )[0-9.]+", lambda m: m.group(1) + str(v), profile)
            open(os.path.join(soft, PROFILE), "w").write(p)
            pts = run(a.parasim, data, soft, ids)
            errs[v] = {i: pts[i]["error"] for i in ids if pts[i].get("error") is not None}
    src = {}
    for blk in text.split("\n- id: ")[1:]:
        i = blk.split("\n", 1)[0].strip()
        m = re.search(r"'Peak Throughput - ([^']+)'", blk)
        if i in ids:
            src[i] = m.group(1) if m else "?"
    mae = lambda v, pick: sum(abs(e) for i, e in errs[v].items() if pick(i)) / max(1, sum(1 for i in errs[v] if pick(i)))
    best = min(GRID, key=lambda v: (mae(v, lambda i: True), v))
    print(f"{len(ids)} points; MAPE at 0 (grouped kernel): {100 * mae(0, lambda i: True):.1f}%")
    for v in GRID:
        print(f"  value {v:4.1f}: MAPE {100 * mae(v, lambda i: True):5.1f}%")
    print(f"in-sample optimum: {best}  (MAPE {100 * mae(best, lambda i: True):.1f}%)")
    print("leave-one-source-out:")
    loso = []
    for s in sorted(set(src.values())):
        held = lambda i, s=s: src[i] == s
        v = min(GRID, key=lambda v: (mae(v, lambda i: not held(i)), v))
        for i in ids:
            if held(i) and i in errs[v]:
                loso.append(abs(errs[v][i]))
                print(f"  {i:58s} held-out value {v:4.1f}: {100 * errs[v][i]:+6.1f}%  (in-sample {100 * errs[best][i]:+6.1f}%,"
                      f" grouped {100 * errs[0][i]:+6.1f}%)")
    print(f"leave-one-source-out MAPE: {100 * sum(loso) / len(loso):.1f}%")


if __name__ == "__main__":
    main()
