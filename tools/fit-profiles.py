#!/usr/bin/env python3
"""Fits each software profile's kernel_efficiency on the whole training runs of
a validation dataset, with leave-one-source-out cross-validation
(docs/software-profiles.md, "Fitting"; the rule: ../shared/validation/README.md).

One command reproduces it:

    python3 tools/fit-profiles.py                 # report only
    python3 tools/fit-profiles.py --write         # also rewrite topologies/software/*.yaml

How: the dataset's training points are simulated at a grid of
kernel_efficiency values (every profile at the same value in one run of
`parasim validate --software-dir`, so one run serves every profile; the other
profile values stay as the files give them). A point's simulated time is
interpolated linearly in 1/e between grid values (a kernel's time past its
launch overhead is proportional to 1/e). The fitted value of a profile
minimises the mean absolute error of its points, on a 0.005 grid, rounded to
0.01. Cross-validation: for each source (the points' `source` field), the
profiles are refitted without that source's points and its points are
predicted; a profile left with no points takes the value fitted on all the
remaining points pooled (every stack in the dataset has a single source, so
this is what the held-out prediction uses). Nothing here is random.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRID = [round(0.60 + 0.05 * i, 2) for i in range(9)]  # 0.60 .. 1.00


def set_efficiency(path, value, key, evidence, inherited_ok=False):
    """Rewrites a profile file's kernel_efficiency as {value, key: evidence}.

    A file that `extends:` another and states no kernel_efficiency has its
    base's (docs/software-profiles.md §2a): with inherited_ok it is left as it
    is, since rewriting the base sets its value too."""
    with open(path) as f:
        text = f.read()
    new, n = re.subn(r"(kernel_efficiency:\n  value: )[0-9.]+\n  (source|fitted_on): .*\n",
                     lambda m: f"{m.group(1)}{value}\n  {key}: \"{evidence}\"\n", text)
    if n == 0 and re.search(r"^extends: ", text, re.M) and "\nkernel_efficiency:" not in text:
        if inherited_ok:
            return
        sys.exit(f"{path}: kernel_efficiency comes from the profile it extends; state it there or here")
    if n != 1:
        sys.exit(f"{path}: no kernel_efficiency block to rewrite")
    with open(path, "w") as f:
        f.write(new)


def run_grid(parasim, dataset, jobs, cache):
    """Per grid value: {point id: simulated seconds}."""
    if cache and os.path.exists(cache):
        with open(cache) as f:
            data = json.load(f)
        if data.get("grid") == GRID and data.get("dataset") == os.path.abspath(dataset):
            return {float(k): v for k, v in data["sim"].items()}
    sim = {}
    for e in GRID:
        with tempfile.TemporaryDirectory() as tmp:
            sw = os.path.join(tmp, "software")
            shutil.copytree(os.path.join(ROOT, "topologies", "software"), sw)
            for name in os.listdir(sw):
                set_efficiency(os.path.join(sw, name), f"{e}", "source", "grid", inherited_ok=True)
            out = subprocess.run([parasim, "validate", dataset, "--kind", "training", "--software-dir", sw,
                                  "--format", "json", "-j", str(jobs)], check=True, capture_output=True, text=True)
        report = json.loads(out.stdout)
        sim[e] = {p["id"]: p["simulated"] for p in report["points"] if p.get("simulated") is not None}
        print(f"grid kernel_efficiency={e}: {len(sim[e])} points", file=sys.stderr)
    if cache:
        with open(cache, "w") as f:
            json.dump({"grid": GRID, "dataset": os.path.abspath(dataset), "sim": sim}, f)
    return sim


def simulated_at(sim, pid, e):
    """The point's time at efficiency e, linear in 1/e between grid values."""
    xs = [(1 / g, sim[g][pid]) for g in GRID]
    x = 1 / e
    xs.sort()
    for (x0, y0), (x1, y1) in zip(xs, xs[1:]):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    raise ValueError(f"efficiency {e} outside the grid")


def mape(points, sim, measured, e_of):
    errs = [abs(simulated_at(sim, p, e_of(p)) - measured[p]) / measured[p] for p in points]
    return sum(errs) / len(errs)


def fit(points, sim, measured):
    """The efficiency minimising the points' MAPE; ties go to the value nearest 1."""
    best = None
    for i in range(int((GRID[-1] - GRID[0]) / 0.005 + 0.5) + 1):
        e = round(GRID[-1] - 0.005 * i, 3)
        m = mape(points, sim, measured, lambda p: e)
        if best is None or m < best[1] - 1e-12:
            best = (e, m)
    return round(best[0], 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parasim", default=os.path.join(ROOT, "build", "bin", "parasim"))
    ap.add_argument("--dataset", default=os.path.join(ROOT, "..", "shared", "validation", "published.yaml"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cache", default="", help="keep the grid's simulations in this JSON file")
    ap.add_argument("--write", action="store_true", help="rewrite kernel_efficiency in topologies/software/*.yaml")
    ap.add_argument("--markdown", default="", help="write the result tables (markdown) to this file")
    args = ap.parse_args()

    with open(args.dataset) as f:
        data = yaml.safe_load(f)
    sim = run_grid(args.parasim, args.dataset, args.jobs, args.cache)
    pts = [p for p in data["points"] if p["kind"] == "training" and all(p["id"] in sim[g] for g in GRID)]
    measured = {p["id"]: p["measured"]["value"] for p in pts}
    stack = {p["id"]: p.get("software", {}).get("name", "default") for p in pts}
    source = {p["id"]: p["source"] for p in pts}
    stacks = sorted(set(stack.values()))
    ids = [p["id"] for p in pts]

    fitted = {s: fit([p for p in ids if stack[p] == s], sim, measured) for s in stacks}
    cv = {}
    for src in sorted(set(source.values())):
        rest = [p for p in ids if source[p] != src]
        pooled = fit(rest, sim, measured)
        for p in ids:
            if source[p] != src:
                continue
            own = [q for q in rest if stack[q] == stack[p]]
            cv[p] = fit(own, sim, measured) if own else pooled

    lines = ["| software | points | fitted kernel_efficiency | MAPE at 1.0 (no fit) | in-sample MAPE | leave-one-source-out MAPE |",
             "|---|---|---|---|---|---|"]
    for s in stacks:
        mine = [p for p in ids if stack[p] == s]
        lines.append(f"| {s} | {len(mine)} | {fitted[s]:.2f} | {100 * mape(mine, sim, measured, lambda p: 1.0):.1f}% | "
                     f"{100 * mape(mine, sim, measured, lambda p: fitted[stack[p]]):.1f}% | "
                     f"{100 * mape(mine, sim, measured, lambda p: cv[p]):.1f}% |")
    lines.append(f"| all | {len(ids)} | | {100 * mape(ids, sim, measured, lambda p: 1.0):.1f}% | "
                 f"{100 * mape(ids, sim, measured, lambda p: fitted[stack[p]]):.1f}% | "
                 f"{100 * mape(ids, sim, measured, lambda p: cv[p]):.1f}% |")
    lines += ["", "| id | software | measured | error at 1.0 | in-sample error | held-out efficiency | held-out error |",
              "|---|---|---|---|---|---|---|"]
    for p in ids:
        err = lambda e: 100 * (simulated_at(sim, p, e) - measured[p]) / measured[p]
        lines.append(f"| {p} | {stack[p]} | {measured[p]:.4g} | {err(1.0):+.1f}% | {err(fitted[stack[p]]):+.1f}% | "
                     f"{cv[p]:.2f} | {err(cv[p]):+.1f}% |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table)

    if args.write:
        name = os.path.relpath(args.dataset, ROOT)
        doc = os.path.join(ROOT, "docs", "validation.md")
        with open(doc) as f:
            text = f.read()
        begin, end = "<!-- BEGIN GENERATED by tools/fit-profiles.py -->\n", "<!-- END GENERATED by tools/fit-profiles.py -->"
        if begin in text and end in text:
            head, rest = text.split(begin, 1)
            text = (head + begin + f"Command: `python3 tools/fit-profiles.py --write` on `{name}` (training points; "
                    "errors interpolated between grid runs, see docs/software-profiles.md §5).\n\n" + table + end +
                    rest.split(end, 1)[1])
            with open(doc, "w") as f:
                f.write(text)
        for s in stacks:
            path = os.path.join(ROOT, "topologies", "software", f"{s}.yaml")
            mine = [p for p in ids if stack[p] == s]
            why = (f"fitted by tools/fit-profiles.py, least MAPE of the {len(mine)} training runs of this stack in "
                   f"{name}: {', '.join(mine)}")
            set_efficiency(path, f"{fitted[s]:.2f}", "fitted_on", why)
            print(f"wrote {path}: kernel_efficiency {fitted[s]:.2f}", file=sys.stderr)


if __name__ == "__main__":
    main()
