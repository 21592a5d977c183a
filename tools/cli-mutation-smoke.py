#!/usr/bin/env python3
"""Runs parasim on mutated inputs that load, and reports every run that
breaks the hostile-input rules (docs/testing.md, "Mutation smoke").

    python3 tools/cli-mutation-smoke.py                     # seed 1, 150 runs, every family
    python3 tools/cli-mutation-smoke.py --seed 7 --runs 400 --timeout 120 --bin PATH
    python3 tools/cli-mutation-smoke.py --family trace,output --runs 50

Families (tools/mutation_smoke_inputs.py writes the inputs of all but the first):
- scenario: a shipped scenario of scenarios/ (not the plan-* searches, which
  take minutes) under one to three `--set` overrides drawn from KEYS, in range
  and out of range: the workload's keys for its mode, the strategy's, and
  the referenced cluster, GPU and model documents' (`cluster.*`, `gpu.*`,
  `model.*`); `run`, `serve` or `sweep` (`--threads` varied);
- validate, trace, histogram, hf, plan, output: see that module.

A run is a finding when it:
- exits with a code other than 0 (a result) or 2 (refused input);
- runs past --timeout seconds of CPU (or ten times that of wall time);
- is refused with anything but one line that gives file:line:col (or names
  the `--set` override it refuses; for a flag's value, one `parasim:` line);
- changes, adds or removes anything in its case folder but the paths it was
  asked to write (a link's target counts as asked), leaves a *.tmp-parasim
  behind, or, refused, changes anything at all;
- (once, at the end) leaves a new untracked file in the repository.

Every run gets a private case folder under the system's temporary folder,
removed afterwards unless the run is a finding (its folder is printed, with
the command, to reproduce it). Nothing is written into the repository; not
part of CI: its runs take minutes. Same seed, same runs. Exit status 1 when
anything was found.
"""
import argparse
import collections
import hashlib
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mutation_smoke_inputs as inputs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

COUNTS = ["0", "1", "2", "2", "4", "4", "8", "3", "5", "7", "16", "64", "4096", "-1", "2147483648"]
BIG = COUNTS + ["1099511627776", "9223372036854775808", "1e300", "nan", "0.5", "x"]
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
    "workload.kv_dtype": ["fp8", "fp16", "nvfp4", "int8"],
    "workload.recompute": ["full", "selective", "none", "x"],
    "workload.attention": ["flash1", "flash2", "flash3", "naive", "cudnn"],
    "workload.dropout.hidden": ["0", "0.1", "1", "-1", "2"],
    "workload.moe.routing": ["balanced", "random", "zipf(0)", "zipf(-1)", "zipf(8)", "zipf(nan)",
                             "histogram(nofile.csv)"],
    "workload.moe.capacity_factor": ["0", "0.01", "1e9", "-1", "1024"],
    "workload.moe.dispatcher": ["alltoall", "allgather", "deepep", "x"],
    "workload.serving.requests": COUNTS,
    "workload.serving.duration": ["0 s", "1 ms", "1 s", "1e12 s", "-1 s", "1"],
    "workload.serving.warmup_requests": COUNTS,
    "workload.serving.seed": ["0", "9223372036854775807", "9223372036854775808", "-1"],
    "workload.serving.max_batch": COUNTS,
    "workload.serving.max_tokens_per_iteration": COUNTS,
    "workload.serving.block_size": COUNTS,
    "workload.serving.prefix_cache.shared_prefix_tokens": COUNTS + ["16777216", "16777217"],
    "workload.serving.decode_context_bucket": COUNTS,
    "workload.serving.gpu_memory_utilization": ["0.01", "0.1", "0.22", "1", "0", "1.5", "nan"],
    "workload.serving.preemption": ["recompute", "swap", "x"],
    "workload.serving.async_scheduling": ["true", "false"],
    "workload.serving.prefilled": ["true", "false"],
    "workload.serving.scheduler": ["static", "continuous", "chunked-prefill", "x"],
    "workload.serving.router": ["round-robin", "least-outstanding-tokens", "random-room", "x"],
    "workload.serving.slo": ["{ttft_ms: 0, tpot_ms: 0}", "{ttft_ms: 1e300}", "{tpot_ms: -1}", "{ttft_ms: nan}"],
    "workload.serving.arrivals.process": ["poisson", "gamma", "fixed", "closed", "trace"],
    "workload.serving.arrivals.rate": ["0", "1e-300", "1e300", "-3", "nan", "inf", "1e6", "1.2e-5"],
    "workload.serving.arrivals.cv": ["0", "0.01", "0.1", "10", "100", "1e9"],
    "workload.serving.arrivals.concurrency": COUNTS + ["1048576"],
    "workload.serving.arrivals.normalize": ["true", "false"],
    "workload.serving.prompt_tokens": ["{distribution: fixed, value: 16777216}", "{distribution: uniform, min: 5, "
                                       "max: 1}", "{distribution: lognormal, mean: 1e12, sigma: 4}",
                                       "{distribution: lognormal, mean: 1, sigma: 0}"],
    "workload.serving.prompt_tokens.mean": ["0", "1", "1e12", "-5"],
    "workload.serving.output_tokens.mean": ["0", "1", "1e12"],
    "workload.serving.output_tokens.sigma": ["0", "4", "4.01", "nan"],
    "workload.serving.disaggregation.prefill_replicas": COUNTS,
    "workload.serving.disaggregation.decode_tp": COUNTS,
    "workload.serving.disaggregation.decode_dp": COUNTS,
    "workload.serving.disaggregation.connector": ["nixl", "p2p-nccl", "x"],
    "workload.serving.disaggregation.dispatch": ["serial", "concurrent"],
    # The referenced documents, edited in memory (docs/scenario-reference.md, "--set and paths").
    "cluster.nodes": COUNTS + ["auto"],
    "cluster.gpus_per_node": COUNTS,
    "cluster.nics_per_node": COUNTS,
    "cluster.planes": COUNTS,
    "cluster.leaf_switch_ports": COUNTS + ["65536", "65538"],
    "cluster.spine_oversubscription": COUNTS,
    "cluster.pcie_switches_per_node": COUNTS,
    "cluster.inter_node": ["none", "single-switch", "fat-tree", "rail-optimized", "x"],
    "cluster.intra_node": ["nvswitch", "nvlink-mesh", "nvlink-pairs", "pcie"],
    "cluster.in_switch_reduction": ["true", "false"],
    "cluster.links.nvlink.bandwidth": ["0 GB/s", "1e-300 GB/s", "1e30 GB/s", "-1 GB/s", "1 B/s", "nan GB/s"],
    "cluster.links.network.latency": ["0 us", "1e20 s", "-1 us", "1 ps", "0.1 ps"],
    "cluster.links.pcie.bandwidth": ["1 B/s", "63 GB/s", "1e30 TB/s"],
    "gpu": ["h100-sxm", "a100-sxm-80gb", "v100-sxm2-16gb", "b200", "l4", "t4", "x"],
    "gpu.memory.capacity": ["0 GiB", "1 B", "1 GiB", "1e30 GiB", "16 EiB", "-1 GiB"],
    "gpu.memory.bandwidth": ["1 B/s", "0 GB/s", "1e30 TB/s"],
    "gpu.sm_count": COUNTS,
    "gpu.peak.bf16": ["0 TFLOP/s", "1 FLOP/s", "1e30 TFLOP/s"],
    "gpu.l2.size": ["0 B", "1 B", "1 TiB"],
    "gpu.efficiency.gemm.bf16": ["0", "1e-300", "1", "2", "-1"],
    "gpu.efficiency.launch_overhead": ["0 us", "1e12 s", "-1 us"],
    "model.layers": BIG,
    "model.hidden": BIG,
    "model.heads": BIG,
    "model.kv_heads": BIG,
    "model.head_dim": BIG,
    "model.ffn": BIG,
    "model.vocab": BIG,
    "model.max_seq": BIG,
    "model.moe.experts": BIG,
    "model.moe.top_k": BIG,
    "model.mtp_layers": COUNTS,
    "model.rotary_dim": COUNTS,
}
TRAINING_ONLY = ("micro_batch", "global_batch", "seq_len", "recompute", "zero", "schedule", "virtual", "stage_layers",
                 "dropout")
INFERENCE_ONLY = ("workload.batch", "workload.prompt_tokens", "workload.output_tokens", "attention_dp", "two_batch")


def command_of(text):
    if "mode: serving" in text:
        return "serve"
    return "sweep" if "\nsweep:" in text else "run"


def keys_for(text):
    serving = "mode: serving" in text
    documents = ("cluster", "gpu", "model")  # every mode has them
    keys = [k for k in KEYS if ("serving" in k) == serving or k.split(".")[0] in documents]
    if serving or "mode: inference" in text:
        return [k for k in keys if not any(x in k for x in TRAINING_ONLY)]
    return [k for k in keys if not any(x in k for x in INFERENCE_ONLY)]


def scenario_case(rng, case_dir, root):
    scenarios_dir = os.path.join(root, "scenarios")
    name = rng.choice(sorted(f for f in os.listdir(scenarios_dir) if f.endswith(".yaml") and not f.startswith("plan-")))
    with open(os.path.join(scenarios_dir, name)) as f:
        text = f.read()
    pool = keys_for(text)
    cmd = [command_of(text), os.path.join(scenarios_dir, name)]
    for key in rng.sample(pool, rng.randint(1, min(3, len(pool)))):
        cmd += ["--set", f"{key}={rng.choice(KEYS[key])}"]
    if cmd[0] == "sweep":
        cmd += ["--threads", rng.choice(["1", "1", "2", "0", "-1", "4096"])]
    return inputs.Case("scenario", cmd, case_dir, flag_errors=cmd[0] == "sweep"), ""


FAMILIES = dict(scenario=scenario_case, **inputs.FAMILIES)


def well_refused(stderr, flag_errors):
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    if len(lines) != 1:
        return False
    line = lines[0]
    return bool(re.search(r":\d+:\d+: ", line) or line.startswith("--set") or
                (flag_errors and line.startswith("parasim: ") and "internal error" not in line))


def snapshot(folder):
    """Every entry below `folder`: relative path -> (kind, content digest or link target)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, folder)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir", "")
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", hashlib.sha256(f.read()).hexdigest())
    return out


def asked(case, rel, kind):
    """Whether the case's command was asked to write `rel` (a path below its
    folder): an asked path, anything below it, or a folder above it (--plot
    makes its folder's parents)."""
    p = os.path.join(case.cwd, rel)
    for w in case.writes:
        for target in {os.path.abspath(w), os.path.realpath(w)}:
            if p == target or p.startswith(target + os.sep) or (kind == "dir" and target.startswith(p + os.sep)):
                return True
    return False


def folder_problems(case, before, after, rc):
    problems = []
    for rel in sorted(set(before) | set(after)):
        if rel.endswith(".tmp-parasim") and rel in after and before.get(rel) != after[rel]:
            problems.append(f"left {rel}")
        elif before.get(rel) != after.get(rel) and (rc != 0 or not asked(case, rel, (after.get(rel) or before[rel])[0])):
            what = "removed" if rel not in after else "created" if rel not in before else "changed"
            problems.append(f"{what} {rel}" + (" (refused run)" if rc != 0 else ""))
    return problems


def cpu_limit(seconds):
    """The child's CPU time limit: the machine may be shared, so wall time
    says little; past it the kernel sends SIGXCPU (a finding, as a timeout)."""
    def apply():
        limit = max(1, int(seconds))
        resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 5))
    return apply


def untracked_files():
    """The repository's untracked files: where a run that wrote into the
    repository would show (edits of tracked files during the runs are the
    developer's, and are not compared)."""
    r = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], capture_output=True, text=True,
                       cwd=ROOT)
    return sorted(line for line in r.stdout.splitlines() if line.startswith("??"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=150)
    ap.add_argument("--timeout", type=float, default=90, help="CPU seconds a run may take (wall: ten times)")
    ap.add_argument("--family", default=",".join(FAMILIES), help="comma-separated: " + ", ".join(FAMILIES))
    ap.add_argument("--verbose", action="store_true", help="print every run's command and last stderr line")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "parasim"))
    args = ap.parse_args()
    families = args.family.split(",")
    for f in families:
        if f not in FAMILIES:
            ap.error(f"unknown family '{f}'")
    binary = os.path.abspath(args.bin)
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="parasim-mutation-smoke-")
    untracked_before = untracked_files()
    outcomes = collections.defaultdict(collections.Counter)
    findings = 0
    for i in range(args.runs):
        family = families[i % len(families)]
        case_dir = os.path.join(work, f"run{i}")
        os.makedirs(case_dir)
        made = FAMILIES[family](rng, case_dir, ROOT)
        if made is None:
            shutil.rmtree(case_dir)
            continue
        case, what = made
        before = snapshot(case_dir)
        try:
            r = subprocess.run([binary] + case.cmd, capture_output=True, text=True, errors="replace",
                               timeout=args.timeout * 10, cwd=case.cwd, preexec_fn=cpu_limit(args.timeout))
            rc, stderr = ("timeout" if r.returncode == -signal.SIGXCPU else r.returncode), r.stderr
        except subprocess.TimeoutExpired:
            rc, stderr = "timeout", ""
        outcomes[family][rc] += 1
        if args.verbose:
            last = (stderr.strip().splitlines() or [""])[-1][:300]
            print(f"run {i} ({family}) exit {rc}: parasim {' '.join(case.cmd)[:300]}\n    {what[:300]}\n    {last}")
        why = []
        if rc not in (0, 2):
            why.append(f"exit {rc}")
        elif rc == 2 and not well_refused(stderr, case.flag_errors):
            why.append("refused without one located line")
        if rc != "timeout":
            why += folder_problems(case, before, snapshot(case_dir), rc)
        if not why:
            shutil.rmtree(case_dir)
            continue
        findings += 1
        print(f"FINDING run {i} ({family}): {'; '.join(why)}\n    parasim {' '.join(case.cmd)}\n"
              f"    cwd {case.cwd}  {what}\n    {stderr.strip()[-400:]}", flush=True)
    if untracked_files() != untracked_before:
        findings += 1
        print("FINDING: the runs left new untracked files in the repository", flush=True)
    if not findings:
        shutil.rmtree(work)
    for family, counter in outcomes.items():
        summary = ", ".join(f"{n} exit {rc}" for rc, n in sorted(counter.items(), key=lambda x: str(x[0])))
        print(f"  {family}: {sum(counter.values())} runs: {summary}")
    print(f"{args.runs} runs (seed {args.seed}): {findings} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
