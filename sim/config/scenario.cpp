// Scenario loading: resolve cluster/model/GPU references, apply overrides,
// validate every field (file:line:column on error).
#include "sim/config/scenario.h"

#include "sim/config/calibration_loader.h"
#include "sim/config/cluster_loader.h"
#include "sim/config/expert_histogram.h"
#include "sim/config/gpu_loader.h"
#include "sim/config/model_loader.h"
#include "sim/config/run_details.h"
#include "sim/core/limits.h"
#include "sim/net/collective/i_collective.h"

#include <charconv>
#include <cstdlib>
#include <filesystem>

namespace sim::config {

namespace {

// A deep copy without source marks (values that came from the command line
// or a sweep). Aliases are followed, so the copy counts its nodes against
// limits().yaml_nodes: a few lines of nested aliases expand to billions.
// Tags are kept, so the readers refuse a tagged value here as in the file.
YAML::Node strip_marks(const YAML::Node& n, std::uint64_t& budget) {
    if (budget == 0)
        throw LimitError("a --set or sweep value expands to too many YAML nodes (nested aliases?)", "yaml-nodes",
                         limits().yaml_nodes);
    --budget;
    const auto tagged = [&](YAML::Node out) {
        out.SetTag(n.Tag());
        return out;
    };
    switch (n.Type()) {
        case YAML::NodeType::Scalar: return tagged(YAML::Node(n.Scalar()));
        case YAML::NodeType::Sequence: {
            YAML::Node out(YAML::NodeType::Sequence);
            for (const auto& e : n) out.push_back(strip_marks(e, budget));
            return tagged(out);
        }
        case YAML::NodeType::Map: {
            YAML::Node out(YAML::NodeType::Map);
            for (const auto& kv : n) out[kv.first.Scalar()] = strip_marks(kv.second, budget);
            return tagged(out);
        }
        default: return YAML::Node();
    }
}

struct PathToken {
    std::string key;  // map key, or empty for an index
    long index = -1;
};

std::vector<PathToken> split_path(const std::string& path) {
    std::vector<PathToken> out;
    std::size_t i = 0;
    const SourceLocation where{"--set " + path, 0, 0};
    while (i < path.size()) {
        if (path[i] == '[') {
            const std::size_t close = path.find(']', i);
            if (close == std::string::npos) throw ConfigError(where, "unclosed '[' in the path");
            const std::string num = path.substr(i + 1, close - i - 1);
            long index = 0;
            const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), index);
            if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos)
                throw ConfigError(where, fmt::format("'[{}]' is not a list index", num));
            if (ec != std::errc{} || end != num.data() + num.size())
                throw ConfigError(where, fmt::format("index [{}] does not exist", num));
            out.push_back(PathToken{"", index});
            i = close + 1;
            if (i < path.size() && path[i] == '.') ++i;
            continue;
        }
        std::size_t end = path.find_first_of(".[", i);
        if (end == std::string::npos) end = path.size();
        if (end == i) throw ConfigError(where, "empty field name in the path");
        out.push_back(PathToken{path.substr(i, end - i), -1});
        i = end;
        if (i < path.size() && path[i] == '.') ++i;
    }
    if (out.empty()) throw ConfigError(where, "empty path");
    return out;
}

void apply(YAML::Node root, const std::string& full_path, const std::vector<PathToken>& tokens, std::size_t from,
           const YAML::Node& value) {
    YAML::Node cur;
    cur.reset(root);
    const SourceLocation where{"--set " + full_path, 0, 0};
    for (std::size_t t = from; t < tokens.size(); ++t) {
        const bool last = t + 1 == tokens.size();
        const PathToken& tok = tokens[t];
        if (tok.index >= 0) {
            if (!cur.IsSequence() || static_cast<std::size_t>(tok.index) >= cur.size())
                throw ConfigError(where, fmt::format("index [{}] does not exist", tok.index));
            if (last) {
                cur[static_cast<std::size_t>(tok.index)] = value;
                return;
            }
            YAML::Node next = cur[static_cast<std::size_t>(tok.index)];
            cur.reset(next);
        } else {
            if (!cur.IsMap() && !cur.IsNull())
                throw ConfigError(where, fmt::format("'{}' cannot be set: its parent is not a map", tok.key));
            if (last) {
                cur[tok.key] = value;
                return;
            }
            YAML::Node next = cur[tok.key];
            cur.reset(next);
        }
    }
}

// The text of an error without its location prefix, to re-raise it at the
// node that caused it.
std::string message_of(const ConfigError& e) {
    const std::string what = e.what();
    const std::string prefix = e.where().to_string() + ": ";
    return what.compare(0, prefix.size(), prefix) == 0 ? what.substr(prefix.size()) : what;
}

// A reference that is a relative path ("models/x.yaml", "./c.yaml") is read
// from the scenario file's folder, so a scenario runs the same from anywhere,
// unless it was given on the command line, where it is read from the current
// folder as a shell user expects; "~/" is the user's home folder ($HOME). A
// bare name ("llama3-8b") is looked up in the shipped data.
std::string resolve_reference(const std::string& scenario_path, std::string ref, bool command_line) {
    if (ref == "~" || ref.rfind("~/", 0) == 0) {
        const char* home = std::getenv("HOME");
        if (home && *home) ref = std::string(home) + ref.substr(1);
    }
    if (ref.find('/') == std::string::npos || ref.front() == '/' || command_line) return ref;
    const auto dir = std::filesystem::path(scenario_path).parent_path();
    return dir.empty() ? ref : (dir / ref).string();
}

// Whether the last override of `key` (the one that wins) came from the command line.
bool set_on_command_line(const std::vector<Override>& overrides, const std::string& key) {
    bool cli = false;
    for (const auto& o : overrides)
        if (o.path == key) cli = o.command_line;
    return cli;
}

bool file_exists(const std::string& p) {
    std::error_code ec;
    return std::filesystem::is_regular_file(p, ec);
}

// The overrides that target a sub-document ("cluster.links..." when the
// cluster is a referenced file), with the prefix token removed.
struct Routed {
    std::vector<std::pair<Override, std::vector<PathToken>>> root, cluster, model, gpu;
};

Routed route(const std::vector<Override>& overrides) {
    Routed r;
    for (const auto& o : overrides) {
        auto tokens = split_path(o.path);
        const std::string& head = tokens.front().key;
        const bool sub = tokens.size() > 1;
        if (sub && head == "cluster") r.cluster.emplace_back(o, tokens);
        else if (sub && head == "model") r.model.emplace_back(o, tokens);
        // "gpu=NAME" swaps the cluster's GPU; "gpu.FIELD=..." edits the GPU's file.
        else if (head == "gpu" && !sub) r.cluster.emplace_back(o, std::vector<PathToken>{{"cluster"}, tokens.front()});
        else if (head == "gpu") r.gpu.emplace_back(o, tokens);
        else r.root.emplace_back(o, tokens);
    }
    return r;
}

// Loads a referenced document (cluster/model/GPU file) or uses the inline map,
// then applies the overrides routed to it.
Node resolve_document(const Node& ref, const std::string& what, const std::string& resolved_path,
                      const std::vector<std::pair<Override, std::vector<PathToken>>>& overrides) {
    Node doc = ref;
    if (ref.is_scalar()) {
        if (!file_exists(resolved_path))
            ref.fail(fmt::format("{} '{}' not found (looked for {})", what, ref.as_string(), resolved_path));
        doc = load_file(resolved_path);
    } else if (!ref.is_map()) {
        ref.fail(fmt::format("expected a {} name, a path, or an inline map", what));
    }
    for (const auto& [o, tokens] : overrides) {
        if (!doc.is_map()) throw ConfigError({"--set " + o.path, 0, 0}, fmt::format("{} is not a map", what));
        apply(doc.yaml(), o.path, tokens, 1, o.value);
    }
    return doc;
}

int positive_or_auto(const Node& n, int max) {
    if (n.is_scalar() && n.as_string() == "auto") return 0;
    return static_cast<int>(n.as_int(1, max));
}

WorkloadSpec read_workload(const Node& node) {
    MapReader r(node);
    WorkloadSpec w;
    const std::string mode = r.required("mode").as_enum({"inference", "training", "serving"});
    w.mode = mode == "training" ? Mode::training : Mode::inference;
    w.precision = read_precision(r, true);
    apply_attention(w, r.optional("attention"), r.optional("flash_attention"));
    if (auto n = r.optional("fuse_elementwise")) w.fuse_elementwise = n->as_bool();
    if (auto n = r.optional("moe")) read_moe(*n, w);
    if (auto n = r.optional("dropout")) {
        if (w.mode == Mode::inference) n->fail("dropout applies to training only");
        w.dropout = read_dropout(*n);
    }
    if (mode == "serving") {
        w.serving = read_serving(r.required("serving"), node.file());
        w.batch = 1;
        w.prompt_tokens = w.serving->max_tokens_per_iteration;
        w.output_tokens = 1;
        w.decode_steps_simulated = 0;
    } else if (w.mode == Mode::inference) {
        read_inference_shape(r, w);
        if (auto n = r.optional("decode_steps_simulated"))
            w.decode_steps_simulated = static_cast<int>(n->as_int(0, 4096));
    } else {
        read_training_shape(r, w);
        if (auto n = r.optional("optimizer")) n->as_enum({"adam"});
        if (auto n = r.optional("host_time_per_batch")) w.host_time_per_batch = n->as_time();
    }
    r.finish();
    return w;
}

StrategySpec read_strategy(const Node& node, std::size_t index) {
    MapReader r(node);
    StrategySpec s;
    s.where = node.location();
    s.name = r.optional("name") ? r.required("name").as_name() : fmt::format("strategy-{}", index + 1);
    read_shared_parallelism(r, s);
    if (auto n = r.optional("pp")) s.pp = positive_or_auto(*n, 1 << 20);
    if (auto n = r.optional("dp")) s.dp = positive_or_auto(*n, 1 << 24);
    if (auto n = r.optional("microbatches")) s.microbatches = positive_or_auto(*n, 1 << 24);
    if (auto n = r.optional("placement")) {
        const std::string p = n->as_enum({"tp-first", "pp-first", "pp-last"});
        s.placement = p == "tp-first"   ? parallel::Placement::tp_first
                      : p == "pp-first" ? parallel::Placement::pp_first
                                        : parallel::Placement::pp_last;
    }
    if (auto n = r.optional("collective")) {
        // A strategy's collectives are all-reduces or their halves, so the
        // algorithms that implement all-reduce, or auto.
        std::vector<std::string> names{"auto"};
        for (auto& a : net::collective_algorithm_names(net::CollectiveOp::all_reduce)) names.push_back(std::move(a));
        s.collective = n->as_enum(names);
    }
    if (auto n = r.optional("partition")) {
        MapReader p(*n);
        s.partition = &parallel::partitioner(p.required("method").as_enum(parallel::partitioner_names()));
        if (auto c = p.optional("capacity")) {
            const std::string v = c->as_string();
            if (v == "l2") s.capacity = parallel::CapacityLevel::l2;
            else if (v == "hbm") s.capacity = parallel::CapacityLevel::hbm;
            else {
                s.capacity = parallel::CapacityLevel::bytes;
                std::string err;
                parse_quantity(v, Dimension::bytes, err);
                if (!err.empty()) c->fail("expected l2, hbm or a size like '40 MiB': " + err);
                s.capacity_bytes = c->as_bytes();
            }
        }
        p.finish();
    }
    if (s.schedule->uses_virtual_stages() && s.virtual_stages < 2)
        node.fail(fmt::format("schedule {} needs virtual_stages >= 2", s.schedule->name()));
    r.finish();
    return s;
}

}  // namespace

Override make_override(const std::string& path, const YAML::Node& value, bool command_line) {
    std::uint64_t budget = limits().yaml_nodes;
    return Override{path, strip_marks(value, budget), command_line};
}

Override parse_override(const std::string& text) {
    const std::size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0)
        throw ConfigError({"--set " + text, 0, 0}, "expected PATH=VALUE, e.g. workload.batch=64");
    const std::string path = text.substr(0, eq);
    const std::string value = text.substr(eq + 1);
    YAML::Node parsed;
    try {
        parsed = YAML::Load(value);
    } catch (const YAML::Exception& e) {
        throw ConfigError({"--set " + path, 0, 0}, "value is not valid YAML: " + e.msg);
    }
    split_path(path);  // reject malformed paths now
    return make_override(path, parsed.IsNull() ? YAML::Node(value) : parsed);
}

ScenarioSpec load_scenario(const std::string& path, const std::vector<Override>& overrides) {
    Node root = load_file(path);
    if (!root.is_map()) root.fail("a scenario is a map with name, cluster, model, workload and strategies");
    const Routed routed = route(overrides);
    for (const auto& [o, tokens] : routed.root) apply(root.yaml(), o.path, tokens, 0, o.value);

    MapReader r(root);
    ScenarioSpec s;
    s.file = path;
    s.name = r.required("name").as_name();
    r.optional("description");
    if (auto n = r.optional("software")) {
        s.software = read_software(*n);
        try {
            s.profile = software_profile(s.software.name, s.software.version, "");
        } catch (const ConfigError& e) {
            n->fail(message_of(e));
        }
    } else {
        s.profile = software_profile(kDefaultSoftware);
    }
    if (auto n = r.optional("collectives")) {
        // A name, never a path: only the libraries of topologies/collectives/.
        const std::string name = n->as_string();
        const auto names = collective_library_names();
        if (std::find(names.begin(), names.end(), name) == names.end())
            n->fail(fmt::format("'{}' is not a collective library of topologies/collectives/{} (known: {})", name,
                                did_you_mean(name, names), fmt::join(names, ", ")));
        s.collectives = &collective_library(name);
    } else {
        s.collectives = &collective_library(kDefaultCollectiveLibrary);
    }

    const Node cluster_ref = r.required("cluster");
    const Node cluster_doc = resolve_document(
        cluster_ref, "cluster",
        cluster_ref.is_scalar()
            ? cluster_path(resolve_reference(path, cluster_ref.as_string(), set_on_command_line(overrides, "cluster")))
            : "",
        routed.cluster);
    s.cluster = load_cluster(cluster_doc);

    const Node model_ref = r.required("model");
    std::string mpath;
    if (model_ref.is_scalar()) {
        try {
            mpath = model_path(resolve_reference(path, model_ref.as_string(), set_on_command_line(overrides, "model")));
        } catch (const ConfigError& e) {
            model_ref.fail(message_of(e));
        }
    }
    const Node model_doc = resolve_document(model_ref, "model", mpath, routed.model);
    const bool hf = mpath.size() > 5 && mpath.substr(mpath.size() - 5) == ".json";
    s.model = hf ? load_hf_config(model_doc) : load_model(model_doc);

    {
        std::string gpath;
        try {
            gpath = gpu_path(s.cluster.gpu);
        } catch (const ConfigError& e) {
            throw ConfigError(s.cluster.where, fmt::format("cluster '{}': {}", s.cluster.name, message_of(e)));
        }
        if (!file_exists(gpath))
            throw ConfigError(s.cluster.where, fmt::format("cluster '{}' names GPU '{}', which is not in {}",
                                                           s.cluster.name, s.cluster.gpu, default_gpu_dir()));
        Node gdoc = load_file(gpath);
        for (const auto& [o, tokens] : routed.gpu) apply(gdoc.yaml(), o.path, tokens, 1, o.value);
        s.gpu = load_gpu(gdoc);
    }

    const Node workload_node = r.required("workload");
    s.workload = read_workload(workload_node);
    apply_moe_dispatcher(s.workload, s.profile);
    check_recompute_modules(s.workload.recompute_modules, s.model, workload_node);
    check_expert_histogram(s.workload.moe, s.model);
    {
        MapReader wr(workload_node);
        // The stack decides what it fuses unless the scenario says.
        if (!wr.optional("fuse_elementwise")) s.workload.fuse_elementwise = s.profile.fuse_elementwise;
        for (const char* key : {"dtype", "weight_dtype", "kv_dtype"}) {
            const auto n = wr.optional(key);
            if (n && !s.gpu.supports(*hw::parse_dtype(n->as_string())))
                n->fail(
                    fmt::format("GPU {} does not support {} (cluster {})", s.gpu.name, n->as_string(), s.cluster.name));
        }
    }
    for (const hw::DType t : {s.workload.precision.compute, s.workload.precision.weights, s.workload.precision.kv}) {
        if (!s.gpu.supports(t))
            throw ConfigError(r.node().location(), fmt::format("workload: GPU {} does not support {} (cluster {})",
                                                               s.gpu.name, hw::to_string(t), s.cluster.name));
    }

    // At most kMaxGpus: the cluster loader checked the product.
    const int cluster_gpus = s.cluster.nodes > 0 ? s.cluster.nodes * s.cluster.gpus_per_node : 0;
    if (auto n = r.optional("gpus")) {
        s.gpus = static_cast<int>(n->as_int(1, kMaxGpus));
        if (cluster_gpus > 0 && s.gpus > cluster_gpus)
            n->fail(fmt::format("{} GPUs asked, but cluster {} has {}", s.gpus, s.cluster.name, cluster_gpus));
    } else {
        if (cluster_gpus == 0)
            root.fail(fmt::format("cluster {} sizes itself ('nodes: auto'): give 'gpus: N'", s.cluster.name));
        s.gpus = cluster_gpus;
    }

    const Node strategies = r.required("strategies");
    const auto list = strategies.elements();
    if (list.empty()) strategies.fail("give at least one strategy");
    for (std::size_t i = 0; i < list.size(); ++i) s.strategies.push_back(read_strategy(list[i], i));

    if (auto sweep = r.optional("sweep")) {
        MapReader sr(*sweep);
        for (const auto& kv : sweep->yaml()) {
            const std::string key = kv.first.Scalar();
            const Node values = sr.required(key);
            const auto elems = values.elements();
            if (elems.empty()) values.fail("a sweep field needs at least one value");
            std::vector<YAML::Node> v;
            for (const auto& e : elems) v.push_back(e.yaml());
            s.sweep.emplace_back(key, v);
        }
        sr.finish();
    }
    if (auto n = r.optional("search")) s.search = *n;
    r.finish();
    return s;
}

}  // namespace sim::config
