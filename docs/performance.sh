#!/usr/bin/env bash
# Draws docs/performance-scale.svg: the CPU time and peak RSS of one
# simulated iteration against the number of GPUs, log-log, collapsed and
# uncollapsed, from `parasim bench scale --format json`, so no figure in
# docs/performance.md's plot is typed in.
#
# Usage: bash docs/performance.sh [PARASIM | BENCH.json]
#   PARASIM     the parasim binary (default build/bin/parasim); runs the
#               benchmark (minutes: the uncollapsed cases simulate every GPU)
#   BENCH.json  a saved `parasim bench scale --format json` output instead
# Needs python3 and gnuplot.
set -euo pipefail
cd "$(dirname "$0")/.."
arg=${1:-build/bin/parasim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case "$arg" in
    *.json) cp "$arg" "$tmp/bench.json" ;;
    *) "$arg" bench scale --format json > "$tmp/bench.json" ;;
esac

python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
cases = json.load(open(f"{tmp}/bench.json"))

def gp(s):
    # A gnuplot double-quoted string, printed as is (the plot uses noenhanced).
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'

series = {}  # (model, collapse) -> [(gpus, cpu_s, rss_gb)]
for c in cases:
    label = c["case"]
    if c["events"] is None:
        continue  # the collective alone, not an iteration
    model = "GPT-3 175B" if "GPT-3" in label else "Llama 3 405B" if "Llama" in label else None
    if model is None:
        continue
    series.setdefault((model, c["collapse"]), []).append((c["gpus"], c["cpu_s"], c["peak_rss_bytes"] / 1e9))
names, plots_t, plots_m = [], [], []
style = {("GPT-3 175B", True): (1, 7), ("GPT-3 175B", False): (2, 5), ("Llama 3 405B", True): (3, 9),
         ("Llama 3 405B", False): (4, 11)}
for i, (key, pts) in enumerate(sorted(series.items())):
    f = f"{tmp}/s{i}.dat"
    with open(f, "w") as out:
        for g, cpu, rss in sorted(pts):
            out.write(f"{g} {cpu} {rss}\n")
    lc, pt = style.get(key, (5, 13))
    title = gp(f"{key[0]}, {'collapsed' if key[1] else 'every GPU simulated'}")
    plots_t.append(f"{gp(f)} using 1:2 with linespoints lc {lc} pt {pt} ps 1.4 title {title}")
    plots_m.append(f"{gp(f)} using 1:3 with linespoints lc {lc} pt {pt} ps 1.4 title {title}")
with open(f"{tmp}/plot.gp", "w") as o:
    o.write("""set terminal svg size 1000,460 dynamic font "Helvetica,12" background "#ffffff"
set output "docs/performance-scale.svg"
set termoption noenhanced
set multiplot layout 1,2 title "parasim bench scale: one training iteration, CPU time and peak RSS vs GPUs (log-log)"
set logscale xy
set grid
set key center right box opaque
set xrange [512:32768]
set xlabel "GPUs in the cluster"
set ylabel "CPU seconds (user + system)"
plot """ + ", ".join(plots_t) + """
set ylabel "peak RSS (GB, the process's so far)"
plot """ + ", ".join(plots_m) + """
unset multiplot
""")
PY
gnuplot "$tmp/plot.gp"
echo "wrote docs/performance-scale.svg"
