"""The inputs of tools/cli-mutation-smoke.py beyond `--set` on the shipped
scenarios: each family writes its mutated files into a private case folder
(never into the repository) and returns the command that reads them
(docs/testing.md, "Mutation smoke").

    validate   one to three points of a validation file, mutated -> parasim validate
    trace      a serving trace CSV (huge, 0, NaN, duplicate rows, extra columns,
               CRLF, a million rows) -> parasim serve
    histogram  an expert-load CSV for Mixtral's routing: histogram(FILE) -> parasim run
    hf         a Hugging Face config.json of tests/data/hf with mutated fields,
               given as --set model=PATH -> parasim run or serve
    plan       the serving plan search with a narrowed space and mutated
               constraints -> parasim plan
    output     a fast command whose output flags (-o, --trace, --requests-csv,
               --json, --csv, --plot, validate --scenarios) point at new paths, existing files and
               folders, symbolic links (to files, folders, nowhere, in a loop),
               one path twice, or through a file; --threads and --format varied

Every function takes the random generator, the case folder and the repository
root, and returns a Case. Nothing here runs parasim.
"""
import json
import os
import random

import yaml

# Numbers and near-numbers that a hostile file may hold where a size is expected.
HOSTILE = [0, -1, 1, 2, 3, 7, 64, 4096, 2**31, 2**40, 2**63, 2**64, 1e300, -1e300, float("nan"), float("inf"),
           0.5, 1.5, "x", "", None, True, [], {}]


class Case:
    """A command to run in `cwd`; `writes` the paths it is asked to write
    (files, or folders whose contents it writes): nothing else in the case
    folder may change, and when it fails nothing at all may."""

    def __init__(self, family, cmd, cwd, writes=(), flag_errors=False):
        self.family, self.cmd, self.cwd = family, cmd, cwd
        self.writes = list(writes)
        self.flag_errors = flag_errors  # a refusal may name a flag rather than file:line:col


def _write(path, text, mode="w"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, mode) as f:
        f.write(text)


def _leaves(node, prefix=()):
    """Every (path, value) below a YAML or JSON tree, maps and lists included."""
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            out.append((prefix + (k,), v))
            out += _leaves(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.append((prefix + (i,), v))
            out += _leaves(v, prefix + (i,))
    return out


def _mutate_tree(rng, tree, keys_under=None):
    """Replaces, deletes or adds one value of `tree` in place; returns what it did."""
    leaves = [(p, v) for p, v in _leaves(tree) if keys_under is None or p[0] in keys_under]
    if rng.random() < 0.9:  # mostly a scalar: a map replaced whole is refused at once
        leaves = [(p, v) for p, v in leaves if not isinstance(v, (dict, list))] or leaves
    if not leaves:
        return "nothing to mutate"
    path, value = rng.choice(leaves)
    parent = tree
    for k in path[:-1]:
        parent = parent[k]
    action = rng.random()
    if action < 0.1 and isinstance(parent, dict):
        del parent[path[-1]]
        return f"deleted {'.'.join(map(str, path))}"
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
    if number and action < 0.65:  # near the value: most such inputs load and run
        new = rng.choice([value * 2, value * 16, value * 2**20, value // 2 if isinstance(value, int) else value / 2,
                          value + 1, value - 1, 0, 1])
    elif isinstance(value, str) and action < 0.4:
        new = rng.choice([value + "x", value.upper(), "auto", value.replace(" ", "")])
    else:
        new = rng.choice(HOSTILE)
    parent[path[-1]] = new
    return f"{'.'.join(map(str, path))}={new!r}"


# ---------------------------------------------------------------- validate

def validate(rng, case_dir, root):
    files = [os.path.join(root, "tests", "data", "validation", f)
             for f in sorted(os.listdir(os.path.join(root, "tests", "data", "validation")))]
    files.append(os.path.join(os.path.dirname(root), "shared", "validation", "published.yaml"))
    files = [f for f in files if os.path.exists(f) and not f.endswith("annotations.yaml")]
    src = rng.choice(files)
    data = _load_yaml_cached(src)
    points = [p for p in data.get("points", []) if "kind" in p] if isinstance(data, dict) else []
    if not points:
        return None
    chosen = json.loads(json.dumps(rng.sample(points, min(len(points), rng.randint(1, 3)))))
    did = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        p = rng.choice(chosen)
        did.append(_mutate_tree(rng, p, {"hardware", "model", "workload", "parallelism", "op", "measured",
                                         "software", "kind"}))
    # A point's own run length: the serving ones simulate up to thousands of requests.
    path = os.path.join(case_dir, "points.yaml")
    _write(path, yaml.safe_dump({"points": chosen}, sort_keys=False))
    return Case("validate", ["validate", path, "--jobs", "1"], case_dir), f"{os.path.basename(src)}: {did}"


_YAML_CACHE = {}


def _load_yaml_cached(path):
    if path not in _YAML_CACHE:
        with open(path) as f:
            _YAML_CACHE[path] = yaml.safe_load(f)
    return _YAML_CACHE[path]


# ---------------------------------------------------------------- serving trace

TRACE_SCENARIO = """name: smoke-trace
software: {{name: vllm}}
cluster: dgx-h100
gpus: {gpus}
model: llama3-8b
workload:
  mode: serving
  dtype: bf16
  serving:
    arrivals: {{process: trace, file: trace.csv}}
{extra}    scheduler: {scheduler}
    max_batch: {max_batch}
strategies:
  - {{name: tp1, tp: 1}}
"""

TRACE_VALUES = ["0", "-1", "1", "16777216", "16777217", "4294967296", "18446744073709551617", "1e9", "nan", "NaN",
                "inf", "-0", "1e308", "0x10", "1_000", " 12 ", "", "1.5", "+5", "1e-320", "31536000", "31536001"]


def trace(rng, case_dir, root):
    n = rng.choice([1, 2, 10, 200])
    t = 0.0
    rows = []
    for _ in range(n):
        t += rng.expovariate(20.0)
        rows.append([f"{t:.6f}", str(rng.randint(1, 4096)), str(rng.randint(1, 512))])
    did = []
    for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
        kind = rng.choice(["value", "value", "duplicate", "columns", "missing", "blank", "unsorted"])
        r = rng.randrange(len(rows))
        if kind == "value":
            if rows[r]:
                rows[r][rng.randrange(len(rows[r]))] = rng.choice(TRACE_VALUES)
        elif kind == "duplicate":
            rows[r:r] = [list(rows[r])] * rng.choice([1, 1000])
        elif kind == "columns":
            rows[r] = rows[r] + ["7"] * rng.choice([1, 1000])
        elif kind == "missing":
            rows[r] = rows[r][: rng.randrange(3)]
        elif kind == "blank":
            rows.insert(r, rng.choice([[""], ["# comment"], ["   "]]))
        elif rows[r]:
            rows[r][0] = "0.0000001" if r else "9"
        did.append(f"{kind} row {r}")
    header = rng.choice(["arrival_s,prompt_tokens,output_tokens"] * 25 +
                        ["prompt_tokens,arrival_s,output_tokens", "ARRIVAL_S,prompt_tokens,output_tokens",
                         "\ufeffarrival_s,prompt_tokens,output_tokens", "arrival_s,prompt_tokens,output_tokens,x", ""])
    eol = rng.choice(["\n"] * 10 + ["\r\n", "\r"])
    text = eol.join([header] + [",".join(r) for r in rows]) + rng.choice([eol, ""])
    extra = ""
    if rng.random() < 0.03:  # a million rows, of which the run reads only a few
        text = "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i * 1e-3:.3f},100,10\n" for i in range(10**6))
        extra, did, header, eol = "    requests: 20\n", ["10^6 rows"], "arrival_s,prompt_tokens,output_tokens", "\n"
    elif rng.random() < 0.4:
        extra = f"    requests: {rng.choice([1, 5, 1000000, 0])}\n"
    if rng.random() < 0.3:
        extra += f"    warmup_requests: {rng.choice([0, 1, 5, 200])}\n"
    if rng.random() < 0.3:
        extra += f"    slo: {{ttft_ms: {rng.choice([0, 1, 1e300, -1])}, tpot_ms: {rng.choice([1, 100])}}}\n"
    _write(os.path.join(case_dir, "trace.csv"), text.encode("utf-8", "surrogatepass"), "wb")
    scenario = TRACE_SCENARIO.format(gpus=rng.choice([1, 2]), extra=extra,
                                     scheduler=rng.choice(["continuous", "chunked-prefill", "static"]),
                                     max_batch=rng.choice([1, 4, 256]))
    path = os.path.join(case_dir, "trace.yaml")
    _write(path, scenario)
    return Case("trace", ["serve", path], case_dir), f"{did} header {header[:20]!r} eol {eol!r}"


# ---------------------------------------------------------------- expert-load histogram

def histogram(rng, case_dir, root):
    per_layer = rng.random() < 0.5
    value_col = rng.choice(["tokens", "share"])
    rows = []
    if per_layer:
        for layer in range(32):
            rows += [[str(layer), str(e), str(rng.randint(0, 5000))] for e in range(8)]
    else:
        rows = [[str(e), str(rng.randint(0, 5000))] for e in range(8)]
    did = []
    for _ in range(rng.choice([0, 0, 1, 1, 2])):
        r = rng.randrange(len(rows))
        kind = rng.choice(["value", "value", "duplicate", "drop", "columns"])
        if kind == "value":
            if rows[r]:
                rows[r][rng.randrange(len(rows[r]))] = rng.choice(TRACE_VALUES + ["8", "32", "-0.0", "1e-300"])
        elif kind == "duplicate":
            rows.append(list(rows[r]))
        elif kind == "drop":
            del rows[r]
        else:
            rows[r].append("1")
        did.append(f"{kind} row {r}")
    if rng.random() < 0.1:  # every value zero
        for row in rows:
            row[-1] = "0"
        did.append("all zero")
    header = ("layer,expert," if per_layer else "expert,") + value_col
    _write(os.path.join(case_dir, "h.csv"), "\n".join([header] + [",".join(r) for r in rows]) + "\n")
    with open(os.path.join(root, "scenarios", "moe-mixtral-8x7b-ep.yaml")) as f:
        text = f.read().replace("routing: balanced", "routing: histogram(h.csv)")
    path = os.path.join(case_dir, "moe.yaml")
    _write(path, text)
    cmd = ["run", path, "--set", f"workload.global_batch={rng.choice([16, 64])}", "--strategy", "tp1-pp2-ep8"]
    return Case("histogram", cmd, case_dir), f"{header}: {did}"


# ---------------------------------------------------------------- Hugging Face config.json

HF_KEYS = ["num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
           "intermediate_size", "vocab_size", "max_position_embeddings", "num_local_experts", "num_experts",
           "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
           "first_k_dense_replace", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
           "v_head_dim", "n_layer", "n_embd", "n_head", "n_inner", "n_positions", "rotary_dim",
           "tie_word_embeddings", "architectures", "decoder_sparse_step", "mlp_only_layers"]
HF_VALUES = [0, -1, 1, 3, 7, 2**20, 2**31, 2**40, 2**63, 2**64, 1e300, float("nan"), 0.5, "64", None, True, [],
             ["NoSuchForCausalLM"], ["LlamaForCausalLM", "GPT2LMHeadModel"]]

INFERENCE_SCENARIO = """name: smoke-model
cluster: dgx-h100
gpus: {gpus}
model: llama3-8b
workload:
  mode: inference
  dtype: bf16
  batch: {batch}
  prompt_tokens: {prompt}
  output_tokens: 4
strategies:
  - {{name: s, tp: {tp}}}
"""


def hf(rng, case_dir, root):
    hf_dir = os.path.join(root, "tests", "data", "hf")
    name = rng.choice(sorted(os.listdir(hf_dir)))
    with open(os.path.join(hf_dir, name, "config.json")) as f:
        config = json.load(f)
    did = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        key = rng.choice([k for k in HF_KEYS if k in config] * 3 + HF_KEYS)
        old = config.get(key)
        if rng.random() < 0.1:
            config.pop(key, None)
            did.append(f"-{key}")
        elif isinstance(old, int) and not isinstance(old, bool) and rng.random() < 0.5:
            config[key] = rng.choice([old * 2, old // 2, old + 1, old - 1, old * 2**20, 0, 1])
            did.append(f"{key}={config[key]!r}")
        else:
            config[key] = rng.choice(HF_VALUES)
            did.append(f"{key}={config[key]!r}")
    text = json.dumps(config, indent=2)
    if rng.random() < 0.05:
        text = text[: rng.randrange(len(text))]
        did.append("truncated")
    path = os.path.join(case_dir, name, "config.json")
    _write(path, text)
    if rng.random() < 0.7:
        tp = rng.choice([1, 2, 8])
        scenario = os.path.join(case_dir, "inference.yaml")
        _write(scenario, INFERENCE_SCENARIO.format(gpus=tp, tp=tp,
                                                   batch=rng.choice([1, 8]), prompt=rng.choice([16, 512])))
        cmd = ["run", scenario]
    else:
        cmd = ["serve", os.path.join(root, "scenarios", "serving-llama3-8b-h100.yaml"),
               "--set", "workload.serving.requests=30", "--set", "workload.serving.warmup_requests=0"]
    return Case("hf", cmd + ["--set", f"model={path}"], case_dir), f"{name}: {did}"


# ---------------------------------------------------------------- plan

PLAN_SETS = {
    "search.space.tp": ["[1, 2]", "[8]", "[0]", "[3]", "[]", "auto", "[1048576]"],
    "search.space.pp": ["[1]", "[2]", "[80]", "[81]", "[0]", "auto"],
    "search.space.batch": ["[1]", "[256]", "[0]", "[1, 16777216]", "auto"],
    "search.constraints.memory_headroom": ["0", "0.95", "0.96", "-1", "nan"],
    "search.constraints.gpus": ["[8]", "[1]", "[0]", "[3]", "[1048576]", "[2147483648]"],
    "search.constraints.ttft_ms": ["0", "-1", "1e300", "nan"],
    "search.constraints.tpot_ms": ["0", "1", "1e300"],
    "search.objective": ["cost", "time_to_budget", "tokens_per_s", "x"],
    "search.price_per_gpu_hour": ["0", "-1", "2.5", "1e300"],
    "workload.batch": ["1", "2", "16777216", "0"],
    "workload.prompt_tokens": ["1", "16777216"],
}


def plan(rng, case_dir, root):
    cmd = ["plan", os.path.join(root, "scenarios", "plan-llama3-70b-serving-8xh100.yaml"),
           "--threads", rng.choice(["1", "2", "0", "-1", "64"]), "--top", rng.choice(["1", "3", "0", "100000"]),
           "--set", "search.space.tp=[8]"]  # the default space's cost: keep it to a few candidates
    for key in rng.sample(sorted(PLAN_SETS), rng.randint(0, 3)):
        cmd += ["--set", f"{key}={rng.choice(PLAN_SETS[key])}"]
    writes = []
    for flag in rng.sample(["--json", "--csv", "--plot"], rng.randint(0, 2)):
        p = os.path.join(case_dir, flag[2:] + ("" if flag == "--plot" else "." + flag[2:]))
        cmd += [flag, p]
        writes.append(p)
    if rng.random() < 0.1:
        cmd += ["--explain", rng.choice(["0", "1", "999999", "18446744073709551615"])]
    return Case("plan", cmd, case_dir, writes, flag_errors=True), ""


# ---------------------------------------------------------------- output flags

def _target(rng, case_dir, name):
    """A path for an output flag, in one of the states a user's folder may be in;
    the files it points at are sentinels that must survive unless asked for."""
    state = rng.choice(["new", "new", "nested-missing", "existing-file", "existing-dir", "link-file",
                        "link-dangling", "link-dir", "link-loop", "through-file", "tmp-squatter", "dash"])
    p = os.path.join(case_dir, name)
    if state == "nested-missing":
        p = os.path.join(case_dir, "a", "b", name)
    elif state == "existing-file":
        _write(p, "sentinel: the user's own file\n")
    elif state == "existing-dir":
        _write(os.path.join(p, "sentinel.txt"), "keep\n")
    elif state.startswith("link-"):
        _write(os.path.join(case_dir, "elsewhere", "sentinel-target"), "the link's target\n")
        os.makedirs(os.path.join(case_dir, "elsewhere", "dir"), exist_ok=True)
        if state == "link-loop":
            os.symlink(p + ".loop", p)
            os.symlink(p, p + ".loop")
        else:
            os.symlink({"link-file": "elsewhere/sentinel-target", "link-dangling": "elsewhere/missing",
                        "link-dir": "elsewhere/dir"}[state], p)
    elif state == "through-file":
        _write(os.path.join(case_dir, "sentinel-file"), "a file, not a folder\n")
        p = os.path.join(case_dir, "sentinel-file", name)
    elif state == "tmp-squatter":
        _write(p + ".tmp-parasim", "sentinel: a file of the user's that happens to bear this name\n")
    elif state == "dash":
        p = "-"
    return p, state


def output(rng, case_dir, root):
    scen = os.path.join(root, "tests", "data", "scenarios", "one-layer-tp2.yaml")
    base = rng.choice([
        (["run", scen], ["-o", "--trace"]),
        (["run", scen, "--format", rng.choice(["json", "csv", "table", "bogus"])], ["-o"]),
        (["serve", os.path.join(root, "scenarios", "serving-llama3-8b-h100.yaml"), "--set",
          "workload.serving.requests=20", "--set", "workload.serving.warmup_requests=0"], ["-o", "--requests-csv"]),
        (["sweep", os.path.join(root, "scenarios", "partitioning-width.yaml"), "--set",
          "sweep={model: [dense16-h1024]}", "--threads", rng.choice(["1", "2", "0", "-1", "4096", "2147483648"])],
         ["-o", "--plot"]),
        (["plan", os.path.join(root, "scenarios", "plan-llama3-70b-serving-8xh100.yaml"), "--set",
          "search.space.tp=[8]", "--threads", rng.choice(["1", "2", "3"])], ["--json", "--csv", "--plot"]),
        (["validate", os.path.join(root, "tests", "data", "validation", "trtllm05-llama70b.yaml"), "--jobs",
          rng.choice(["1", "2", "0", "-1"])], ["-o", "--scenarios"]),
    ])
    cmd, flags = list(base[0]), base[1]
    writes, states = [], []
    chosen = rng.sample(flags, rng.randint(1, len(flags)))
    for i, flag in enumerate(chosen):
        if i and rng.random() < 0.25:  # one path named by two flags
            p, state = writes[-1], "same-as-previous"
        else:
            p, state = _target(rng, case_dir, f"out{i}" + ("" if flag in ("--plot", "--scenarios") else ".txt"))
        cmd += [flag, p]
        writes.append(p)
        states.append(f"{flag} {state}")
    # "-" is standard output for a file, and a folder of that name for --plot and --scenarios.
    asked = [os.path.join(case_dir, "-") if w == "-" and f in ("--plot", "--scenarios") else w
             for f, w in zip(chosen, writes)]
    return Case("output", cmd, case_dir, [w for w in asked if w != "-"], flag_errors=True), f"{states}"


FAMILIES = {"validate": validate, "trace": trace, "histogram": histogram, "hf": hf, "plan": plan, "output": output}
