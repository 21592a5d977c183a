#!/usr/bin/env python3
"""Fit the TensorRT-LLM 0.6 profile's decode_attention_issue (docs/software-profiles.md §3).

One global parameter of one profile, fitted on whole runs (the dataset's rule: at most three per
profile, never per point, with leave-one-source-out cross-validation). The runs: the inference points
of the dataset whose `source` is the "Peak Throughput" tables of TensorRT-LLM's performance page for v0.6.1. The reference set does
not carry `software:` on them; tests/data/validation/published-annotations.yaml states it, citing the page
(docs/validation.md §2, "Annotations"), and the runs are the points it annotates `tensorrt-llm 0.6.1`. It
runs `parasim validate --annotations ... --kind inference` with the profile's value on a grid, and prints the mean
absolute error at each value, the in-sample optimum and the leave-one-source-out predictions (each
source's points predicted with the value fitted on the other sources).

    python3 tools/fit-decode-attention.py [--parasim build/bin/parasim] [--dataset PATH] [--annotations PATH]
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
ANNOTATED = "software=tensorrt-llm 0.6.1 "
GRID = [x / 2 for x in range(0, 31)]  # 0, 0.5, ... 15


def run(parasim, dataset, annotations, ids=None, softdir=None):
    cmd = [parasim, "validate", dataset, "--annotations", annotations, "--kind", "inference", "--format", "json"]
    cmd += ["--software-dir", softdir] if softdir else []
    cmd += ["--id", ",".join(ids)] if ids else []
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return {p["id"]: p for p in json.loads(r.stdout)["points"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parasim", default=os.path.join(ROOT, "build/bin/parasim"))
    ap.add_argument("--dataset", default=os.path.join(ROOT, "..", "shared", "validation", "published.yaml"))
    ap.add_argument("--annotations", default=os.path.join(ROOT, "tests/data/validation/published-annotations.yaml"))
    a = ap.parse_args()
    text = open(a.dataset).read()
    ids = [i for i, p in run(a.parasim, a.dataset, a.annotations).items()
           if any(n.startswith(ANNOTATED) for n in p.get("annotated", []))]
    if not ids:
        sys.exit("no TensorRT-LLM v0.6.1 inference points in " + a.dataset)
    profile = open(os.path.join(ROOT, "topologies/software", PROFILE)).read()
    errs = {}  # value -> id -> signed error
    sources = {}
    with tempfile.TemporaryDirectory() as tmp:
        soft = os.path.join(tmp, "software")
        shutil.copytree(os.path.join(ROOT, "topologies/software"), soft)
        for v in GRID:
            p = re.sub(r"(decode_attention_issue:\n  value: )[0-9.]+", lambda m: m.group(1) + str(v), profile)
            open(os.path.join(soft, PROFILE), "w").write(p)
            pts = run(a.parasim, a.dataset, a.annotations, ids, soft)
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
