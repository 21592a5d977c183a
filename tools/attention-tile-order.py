#!/usr/bin/env python3
"""How much a persistent attention kernel's tile order costs, for the reference
set's FlashAttention-3 forward kernels (docs/validation.md §7, "Attention
kernels"). Not part of the model: a check of one candidate mechanism.

Each point's tiles are its query blocks (FA3's forward tiles by head_dim,
flash-attention.yaml's flash3_tiles; non-causal head_dim 128 runs 128 x 176),
one per (query block, head, sequence), the query block varying fastest as in
FA3's tile schedulers. A tile's work is the key blocks it visits (causal: up to
its last row). Three orders on 132 SMs, one tile at a time per SM:

  static    SM j takes tiles j, j+132, ... (StaticPersistentTileScheduler, the
            released FA3 of 2024-07-11 for causal and non-causal kernels)
  in order  a free SM takes the next tile (an atomic counter, causal kernels
            from 2024-08)
  longest   a free SM takes the longest tile left (causal kernels from 2025-01)

It prints the finish time over the mean work per SM for each, and for causal
points the causal rate over the non-causal one that the in-order and static
tails predict (with the causal diagonal's computed keys), beside the measured
one where the set has both.

    python3 tools/attention-tile-order.py ../shared/validation/published.yaml
"""
import heapq
import math
import sys

import yaml

SMS = 132
FORWARD_TILES = {64: (192, 128), 128: (128, 128), 256: (128, 80)}  # flash3_tiles
NONCAUSAL_HD128_BLOCK_N = 176


def tiles(op, causal):
    bm, bn = FORWARD_TILES[op["head_dim"]]
    if not causal and op["head_dim"] == 128:
        bn = NONCAUSAL_HD128_BLOCK_N
    s = op["seq_len"]
    work = [math.ceil((min(s, (m + 1) * bm) if causal else s) / bn) for m in range(math.ceil(s / bm))]
    return work * (op["batch"] * op["heads"]), bm, bn


def finish(work, order):
    if order == "static":
        loads = [0] * SMS
        for i, w in enumerate(work):
            loads[i % SMS] += w
        return max(loads)
    free = [0] * SMS
    for w in (sorted(work, reverse=True) if order == "longest" else work):
        heapq.heappush(free, heapq.heappop(free) + w)
    return max(free)


def main():
    points = [p for p in yaml.safe_load(open(sys.argv[1]))["points"]
              if p["kind"] == "attention" and p["op"]["impl"] == "flash3" and p["op"]["pass"] == "fwd"]
    by_shape = {(p["op"]["head_dim"], p["op"]["seq_len"], p["op"]["causal"]): p for p in points}
    for p in sorted(points, key=lambda p: (p["op"]["head_dim"], p["op"]["seq_len"], p["op"]["causal"])):
        op = p["op"]
        work, bm, bn = tiles(op, op["causal"])
        mean = sum(work) / SMS
        tails = {o: finish(work, o) / mean for o in ("static", "in order", "longest")}
        line = (f"{p['id']}: {len(work)} tiles; finish / mean: "
                + ", ".join(f"{o} {t:.3f}" for o, t in tails.items()))
        if op["causal"]:
            plain, _, _ = tiles(op, False)
            plain_tail = finish(plain, "static") / (sum(plain) / SMS)
            s = op["seq_len"]
            diag = s / (s + bm + (bn - math.gcd(bm, bn)))  # the model's causal diagonal (hardware-model.md §3)
            line += "; causal / non-causal rate: " + ", ".join(
                f"{o} {plain_tail / tails[o] * diag:.3f}" for o in ("static", "in order"))
            other = by_shape.get((op["head_dim"], s, False))
            if other:
                line += f", measured {other['measured']['value'] / 2 / p['measured']['value']:.3f}"
        print(line)


if __name__ == "__main__":
    main()
