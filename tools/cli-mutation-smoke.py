#!/usr/bin/env python3
"""Runs the shipped scenarios under random `--set` overrides and reports every
run that breaks the hostile-input rules (docs/testing.md, "Mutation smoke").

    python3 tools/cli-mutation-smoke.py                     # seed 1, 150 runs
    python3 tools/cli-mutation-smoke.py --seed 7 --runs 400 --timeout 120 --bin PATH

Each run takes one scenario of scenarios/ (not the plan-* searches, which take
minutes) and one to three overrides drawn from KEYS, in range and out of
range, of the keys that apply to its mode (serving, inference or training),
and runs `parasim run`, `serve` or `sweep` on it. A run is a finding when it:
- exits with a code other than 0 (a result) or 2 (refused input);
- runs past --timeout;
- is refused with anything but one line that gives file:line:col (or names
  the `--set` override it refuses).

The fuzzers of .ci/fuzz cover the loaders; this covers the simulation behind
them, which only inputs that load reach. It writes nothing into the
repository (reports go to stdout) and is not part of CI: its runs take
minutes. Same seed, same runs. Exit status 1 when anything was found.
"""
import argparse
import collections
import os
import random
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

COUNTS = ["0", "1", "2", "2", "4", "4", "8", "3", "5", "7", "16", "64", "4096", "-1", "2147483648"]
KEYS = {
    "strategies[0].tp": COUNTS,
    "strategies[0].pp": COUNTS,
    "strategies[0].dp": COUNTS,
    "strategies[0].ep": COUNTS,
    "strategies[0].cp": COUNTS,
    "strategies[0].etp": COUNTS,
    "strategies[0].zero": ["0", "1", "2", "3", "4"],
    "strategies[0].schedule": ["1f1b", "interleaved", "dualpipe", "dualpipev", "gpipe", "zb"],
    "strategies[0].virtual_stages": COUNTS,
    "strategies[0].first_stage_layers": COUNTS,
    "strategies[0].last_stage_layers": COUNTS,
    "strategies[0].attention_dp": ["true", "false"],
    "strategies[0].overlap.two_batch": ["true", "false"],
    "strategies[0].overlap.moe_a2a": ["true", "false"],
    "gpus": COUNTS,
    "workload.micro_batch": COUNTS,
    "workload.global_batch": COUNTS,
    "workload.seq_len": COUNTS,
    "workload.batch": COUNTS,
    "workload.prompt_tokens": COUNTS,
    "workload.output_tokens": COUNTS,
    "workload.dtype": ["fp8", "fp4", "nvfp4", "int8", "fp16", "fp32", "bogus"],
    "workload.recompute": ["full", "selective", "none", "x"],
    "workload.attention": ["flash1", "flash2", "flash3", "naive", "cudnn"],
    "workload.dropout.hidden": ["0", "0.1", "1", "-1", "2"],
    "workload.moe.routing": ["balanced", "zipf(0)", "zipf(-1)", "zipf(1000)", "zipf(nan)", "histogram(nofile.csv)"],
    "workload.moe.capacity_factor": ["0", "0.01", "1e9", "-1"],
    "workload.moe.dispatcher": ["alltoall", "allgather", "deepep", "deepep-ll", "x"],
    "workload.serving.requests": COUNTS,
    "workload.serving.warmup_requests": COUNTS,
    "workload.serving.max_batch": COUNTS,
    "workload.serving.max_tokens_per_iteration": COUNTS,
    "workload.serving.block_size": COUNTS,
    "workload.serving.shared_prefix_tokens": COUNTS,
    "workload.serving.decode_context_bucket": COUNTS,
    "workload.serving.concurrency": COUNTS,
    "workload.serving.gpu_memory_utilization": ["0.01", "0.1", "0.22", "1"],
    "workload.serving.swap_preemption": ["true", "false"],
    "workload.serving.scheduler": ["static", "continuous", "chunked-prefill", "x"],
    "workload.serving.router": ["round-robin", "least-outstanding", "x"],
    "workload.serving.arrivals.process": ["poisson", "gamma", "fixed", "closed"],
    "workload.serving.arrivals.rate": ["0", "1e-300", "1e300", "-3", "nan", "inf"],
    "workload.serving.arrivals.cv": ["0", "0.1", "10", "1e9"],
    "workload.serving.prompt_tokens.mean": ["0", "1", "1e12", "-5"],
    "workload.serving.output_tokens.mean": ["0", "1", "1e12"],
    "workload.serving.disaggregation.prefill_replicas": COUNTS,
    "workload.serving.disaggregation.decode_tp": COUNTS,
    "workload.serving.disaggregation.connector": ["nixl", "p2p-nccl", "x"],
    "workload.serving.disaggregation.dispatch": ["serial", "concurrent"],
}
TRAINING_ONLY = ("micro_batch", "global_batch", "seq_len", "recompute", "zero", "schedule", "virtual", "stage_layers")
INFERENCE_ONLY = ("workload.batch", "workload.prompt_tokens", "workload.output_tokens", "attention_dp", "two_batch")


def command_of(text):
    if "mode: serving" in text:
        return "serve"
    return "sweep" if "\nsweep:" in text else "run"


def keys_for(text):
    serving = "mode: serving" in text
    keys = [k for k in KEYS if ("serving" in k) == serving]
    if serving or "mode: inference" in text:
        return [k for k in keys if not any(x in k for x in TRAINING_ONLY)]
    return [k for k in keys if not any(x in k for x in INFERENCE_ONLY)]


def well_refused(stderr):
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return len(lines) == 1 and (re.search(r":\d+:\d+", lines[0]) or lines[0].startswith("--set"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=150)
    ap.add_argument("--timeout", type=float, default=90)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "parasim"))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    scenarios_dir = os.path.join(ROOT, "scenarios")
    scenarios = sorted(f for f in os.listdir(scenarios_dir) if f.endswith(".yaml") and not f.startswith("plan-"))
    outcomes = collections.Counter()
    findings = 0
    for i in range(args.runs):
        name = rng.choice(scenarios)
        with open(os.path.join(scenarios_dir, name)) as f:
            text = f.read()
        pool = keys_for(text)
        sets = []
        for key in rng.sample(pool, rng.randint(1, min(3, len(pool)))):
            sets += ["--set", f"{key}={rng.choice(KEYS[key])}"]
        cmd = [args.bin, command_of(text), os.path.join("scenarios", name)] + sets
        if cmd[1] == "sweep":
            cmd += ["--threads", "1"]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd=ROOT)
            rc, stderr = r.returncode, r.stderr
        except subprocess.TimeoutExpired:
            rc, stderr = "timeout", ""
        outcomes[rc] += 1
        if rc == 0 or (rc == 2 and well_refused(stderr)):
            continue
        findings += 1
        why = "refused without one located line" if rc == 2 else f"exit {rc}"
        print(f"FINDING run {i}: {why}: {' '.join(cmd[1:])}\n    {stderr.strip()[-400:]}", flush=True)
    summary = ", ".join(f"{n} exit {rc}" for rc, n in sorted(outcomes.items(), key=lambda x: str(x[0])))
    print(f"{args.runs} runs (seed {args.seed}): {summary}; {findings} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
