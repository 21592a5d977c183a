#!/usr/bin/env python3
"""SGLang's expert statistics as a parasim expert histogram (docs/moe.md
section 2, `routing: histogram(FILE)`), per layer or pooled; and, per layer,
the busiest GPU's load over the mean GPU's under the contiguous placement
parasim takes (GPU j holds experts j x E/G ... (j+1) x E/G - 1, no EPLB).
Not part of the model: a converter and a check.

Input: a JSON file {"logical_count": [[tokens of expert e] for each layer]},
indexed by the model's 0-based layer (SGLang's expert-distribution format;
LMSYS's attachment to sgl-project/sglang issue #6017,
attachment_ep_statistics/*.json, as GeneratedRandomly/SGLang-reproduce@1d8dbc14
copies it). Dense layers (all zero) are left out.

Usage: sglang-expert-csv.py STATS.json per-layer|pooled [GPUS]
  per-layer  `layer,expert,tokens`, one row per MoE layer and expert
  pooled     `expert,tokens`, each expert's tokens summed over the layers
  GPUS       instead of a CSV: per layer, busiest / mean GPU (contiguous),
             and the same for the pooled counts
"""
import json
import sys


def busiest_over_mean(w, gpus):
    per = len(w) // gpus
    loads = [sum(w[g * per:(g + 1) * per]) for g in range(gpus)]
    return max(loads) / (sum(loads) / gpus)


def main():
    path, form = sys.argv[1], sys.argv[2]
    counts = json.load(open(path))["logical_count"]
    layers = [(l, w) for l, w in enumerate(counts) if sum(w) > 0]
    pooled = [sum(w[e] for _, w in layers) for e in range(len(layers[0][1]))]
    if len(sys.argv) > 3:
        gpus = int(sys.argv[3])
        r = [(l, busiest_over_mean(w, gpus)) for l, w in layers]
        for l, x in r:
            print(f"layer {l}: {x:.4f}")
        mean = sum(x for _, x in r) / len(r)
        worst = max(r, key=lambda p: p[1])
        print(f"per layer: mean {mean:.4f}, min {min(x for _, x in r):.4f}, max {worst[1]:.4f} (layer {worst[0]})")
        print(f"pooled: {busiest_over_mean(pooled, gpus):.4f}")
        return
    print(f"# source: {path.split('/')[-1]}, SGLang's expert statistics (logical_count) that LMSYS recorded")
    print("# and attached to sgl-project/sglang issue #6017 (github.com/user-attachments/files/20036217),")
    print("# read from GeneratedRandomly/SGLang-reproduce@1d8dbc14:attachment_ep_statistics/; converted by")
    print(f"# tools/sglang-expert-csv.py {form} (docs/moe.md section 2). " +
          ("Tokens per expert and layer; layers by the\n# model's 0-based layer index (dense layers, all zero, "
           "have no rows)." if form == "per-layer" else "Each expert's tokens summed over the layers."))
    if form == "per-layer":
        print("layer,expert,tokens")
        for l, w in layers:
            for e, n in enumerate(w):
                print(f"{l},{e},{n:.0f}")
    elif form == "pooled":
        print("expert,tokens")
        for e, n in enumerate(pooled):
            print(f"{e},{n:.0f}")
    else:
        sys.exit("form must be per-layer or pooled")


if __name__ == "__main__":
    main()
