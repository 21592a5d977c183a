#!/usr/bin/env bash
# Regenerates the tables of docs/serving.md (the blocks between the GENERATED
# markers: "Validation status" and "The median error, point by point") from `parasim validate` on the serving
# validation set, tests/data/validation/serving.yaml, so no simulated figure
# in the report is typed in. The test "the published serving throughputs stay
# within the guarded MAPE" (tests/serve/test_serving_validation.cpp) runs the
# same points through the same functions.
#
# Usage: bash docs/serving-validation.sh [PARASIM]   (default build/bin/parasim)
# Needs python3.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/bin/parasim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" validate tests/data/validation/serving.yaml --format json -o "$tmp/serving.json"
# The engine alone, for the attribution table: the same median-like points
# with the vLLM profile's serving host times removed (its `serving:` block,
# the last block of the file).
mkdir "$tmp/software"
cp topologies/software/*.yaml "$tmp/software/"
python3 - "$tmp/software/vllm.yaml" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
i = text.index("\nserving:\n")
if text[i + 1:].count("\n") != sum(1 for l in text[i + 1:].splitlines() if l == "serving:" or l.startswith(" ")):
    sys.exit("vllm.yaml: the serving: block is not the last block of the file")
open(path, "w").write(text[:i + 1])
PY
ids=$(python3 -c 'import json, sys
print(",".join(p["id"] for p in json.load(open(sys.argv[1]))["points"]
               if p["simulated"] is not None and p.get("statistic") not in (None, "p99")))' "$tmp/serving.json")
"$bin" validate tests/data/validation/serving.yaml --software-dir "$tmp/software" --id "$ids" --format json \
    -o "$tmp/engine.json"
python3 - "$tmp/serving.json" docs/serving.md "$tmp/engine.json" <<'PY'
import json, re, sys
result, doc = sys.argv[1], sys.argv[2]
engine = {p["id"]: p["simulated"] for p in json.load(open(sys.argv[3]))["points"]}
report = json.load(open(result))
points = report["points"]
rows = [p for p in points if p["id"].startswith("trtllm-1.0-") and p["metric"] == "tokens_per_s"]
for p in rows:
    if p["simulated"] is None:
        sys.exit(f"{p['id']} was skipped: {p.get('skipped')}")

def key(p):  # (model, gpu, tp, isl/osl) from the id trtllm-1.0-<model>-<gpu>-tp<k>-<isl>-<osl>
    m = re.match(r"trtllm-1\.0-(llama3\d)-[0-9a-z]+-(h\d+)-tp(\d+)-(\d+)-(\d+)$", p["id"])
    return m.group(1), m.group(2), int(m.group(3)), f"{m.group(4)}/{m.group(5)}"

cols = {}
for p in rows:
    model, gpu, tp, lens = key(p)
    cols.setdefault((gpu, model, tp), {})[lens] = p
order = ["128/128", "128/2048", "128/4096", "500/2000", "1000/1000", "1000/2000", "2048/128", "2048/2048", "5000/500"]
name = {"llama31": "8B", "llama33": "70B"}
fmt_n = lambda v: f"{v:,.0f}"
def err(e):
    s = f"{100 * e:+.1f}%".replace("-", "\u2212")
    return f"**{s}**" if abs(e) > 0.2 else s
out = []
for gpu in ("h100", "h200"):
    keys = sorted([k for k in cols if k[0] == gpu], key=lambda k: k[1])
    head = "| ISL/OSL |" + "".join(f" {name[k[1]]}, {k[2] if k[2] > 1 else 1} {gpu.upper()}: measured | parasim | error |" for k in keys)
    out.append(head)
    out.append("|---|" + "---|---|---|" * len(keys))
    for lens in order:
        line = f"| {lens} |"
        for k in keys:
            p = cols[k][lens]
            line += f" {fmt_n(p['measured'])} | {fmt_n(p['simulated'])} | {err(p['error'])} |"
        out.append(line)
    out.append("")
errs = [abs(p["error"]) for p in rows]
signed = [p["error"] for p in rows]
srt = sorted(errs)
median = (srt[len(srt) // 2 - 1] + srt[len(srt) // 2]) / 2
by_col = ", ".join(
    f"{name[k[1]]} {k[0].upper()} {100 * sum(abs(p['error']) for p in cols[k].values()) / len(cols[k]):.1f}%"
    for k in sorted(cols, key=lambda k: (k[0], k[1])))
out.append(f"(output tokens/s, all GPUs of the replica together.) Throughput MAPE over the {len(rows)} "
           f"TensorRT-LLM points: **{100 * sum(errs) / len(errs):.1f}%** (median {100 * median:.1f}%, mean signed "
           f"error {100 * sum(signed) / len(signed):+.1f}%); by column: {by_col}; "
           f"{sum(1 for e in errs if e > 0.1)} points over 10%, {sum(1 for e in errs if e > 0.2)} over 20%.")

# Every other point (the vLLM points, latencies under load), one row each,
# then the error by class over every point of the file: throughput, the
# median-like statistics (p50, mean) and the P99s.
rest = [p for p in points if p not in rows]
def metric(p):
    return p["metric"] + (" " + p["statistic"] if p.get("statistic") else "")
def num(v):
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}"
lat = ["| point | metric | measured | parasim | error |", "|---|---|---|---|---|"]
for p in rest:
    if p["simulated"] is None:
        lat.append(f"| {p['id']} | {metric(p)} | {num(p['measured'])} | skipped | {p.get('skipped')} |")
    else:
        lat.append(f"| {p['id']} | {metric(p)} | {num(p['measured'])} | {num(p['simulated'])} | {err(p['error'])} |")
def cls(p):
    if not p.get("statistic"): return "throughput"
    return "P99" if p["statistic"] == "p99" else "median-like (p50, p90, mean)"
lat.append("")
lines = []
for c, target in (("throughput", "10%"), ("median-like (p50, p90, mean)", "10%"), ("P99", "20%")):
    errs = [abs(p["error"]) for p in points if p["simulated"] is not None and cls(p) == c]
    if errs:
        lines.append(f"{c}: MAPE **{100 * sum(errs) / len(errs):.1f}%** over {len(errs)} points (target {target}; "
                     f"{sum(1 for e in errs if e > 0.1)} over 10%, {sum(1 for e in errs if e > 0.2)} over 20%)")
    else:
        lines.append(f"{c}: no point (target {target})")
allerr = [abs(p["error"]) for p in points if p["simulated"] is not None]
lat.append("Over every point of `tests/data/validation/serving.yaml` (" + f"{len(allerr)} simulated, "
           f"MAPE {100 * sum(allerr) / len(allerr):.1f}%), by class: " + "; ".join(lines) + ".")

# Attribution of the median-like error (docs/serving.md, "The median error,
# point by point"): every median-like point, its load (clients of a closed
# loop or a rate, from its id), the sign of its error and its share of the
# class's summed absolute error; then the shares by group.
med = [p for p in points if p["simulated"] is not None and cls(p).startswith("median")]
total = sum(abs(p["error"]) for p in med)
def load(p):
    m = re.search(r"-conc(\d+)-", p["id"])
    if m: return m.group(1) + (" client" if m.group(1) == "1" else " clients")
    m = re.search(r"-rate(\w+)-", p["id"])
    return "all at once" if m and m.group(1) == "inf" else (f"{m.group(1)} req/s" if m else "")
def group(p):
    if "-rateinf-" in p["id"]: return "the burst of 500 requests at once (TTFT and TPOT)"
    if p["metric"] != "ttft_ms": return "TPOT and end to end, and TTFT at 16 req/s"
    if "-rate" in p["id"]: return "TPOT and end to end, and TTFT at 16 req/s"
    return "TTFT of a closed loop, " + ("over (parasim above)" if p["error"] > 0 else "under (parasim below)")
att = ["| point | load | metric | measured | parasim | error | share of the class's error | engine alone |",
       "|---|---|---|---|---|---|---|---|"]
for p in sorted(med, key=lambda p: -abs(p["error"])):
    alone = engine.get(p["id"])
    att.append(f"| {p['id']} | {load(p)} | {metric(p)} | {num(p['measured'])} | {num(p['simulated'])} | "
               f"{err(p['error'])} | {100 * abs(p['error']) / total:.1f}% | "
               f"{'skipped' if alone is None else num(alone)} |")
att.append("")
groups = {}
for p in med:
    groups.setdefault(group(p), []).append(abs(p["error"]))
ttft = [abs(p["error"]) for p in med if p["metric"] == "ttft_ms"]
att.append(f"TTFT: {len(ttft)} of the {len(med)} points, {100 * sum(ttft) / total:.0f}% of the class's summed error. "
           f"By group (class MAPE {100 * total / len(med):.1f}%): " + "; ".join(
    f"{g}: {len(e)} points, {100 * sum(e) / total:.0f}% of the error (MAPE {100 * sum(e) / len(e):.1f}%)"
    for g, e in sorted(groups.items(), key=lambda kv: -sum(kv[1]))) + ".")
summary = att[-1]

# The same points by source (the id up to its load, -conc<C>- or -rate<R>-,
# names one run set of one source) and metric: how many, their MAPE and their
# mean signed error, so a source whose points all lean one way stands out.
def source(p):
    return re.sub(r"-(conc|rate)\w+-.*$", "", p["id"])
cells = {}
for p in med:
    cells.setdefault((source(p), metric(p)), []).append(p["error"])
att.append("")
att.append("| source (run set) | GPU | metric | points | MAPE | mean signed error |")
att.append("|---|---|---|---|---|---|")
gpu_of = {source(p): p.get("gpu", "") for p in med}
for (src, m), e in sorted(cells.items(), key=lambda kv: -sum(abs(x) for x in kv[1])):
    signed = 100 * sum(e) / len(e)
    att.append(f"| {src} | {gpu_of[src]} | {m} | {len(e)} | {100 * sum(abs(x) for x in e) / len(e):.1f}% | "
               + f"{signed:+.1f}%".replace("-", "\u2212") + " |")

text = open(doc).read()
for tag, body in (("", out), (" (latencies)", lat), (" (median attribution)", att)):
    begin, end = f"<!-- BEGIN GENERATED by docs/serving-validation.sh{tag} -->", f"<!-- END GENERATED{tag} -->"
    i, j = text.index(begin), text.index(end, text.index(begin))
    text = text[:i] + begin + "\n" + "\n".join(body) + "\n" + text[j:]
open(doc, "w").write(text)
print(out[-1])
print(lat[-1])
print(summary)
PY
