// Readers of the run-detail fields (see run_details.h).
#include "sim/config/run_details.h"

#include "sim/config/csv_reader.h"
#include "sim/config/expert_histogram.h"
#include "sim/core/limits.h"

#include <fmt/format.h>

#include <iterator>

namespace sim::config {

const std::vector<std::string> kSoftwareNames = {
    "megatron-lm", "megatron-core", "nemo",         "megatron-bridge", "llm-foundry", "flash-attention",
    "torchtitan",  "deepspeed",     "tensorrt-llm", "lmdeploy",        "vllm",        "hai-llm",
    "sglang",      "other"};

//                   name            field                    training inference stack  published
const std::array<OverlapKey, 6> kOverlapKeys = {{
    {"tp_comm", &Overlap::tp_comm, true, false, true, true},
    {"grad_reduce", &Overlap::grad_reduce, true, false, true, true},
    {"param_gather", &Overlap::param_gather, true, false, true, true},
    {"tp_backward", &Overlap::tp_backward, true, false, false, false},
    {"moe_a2a", &Overlap::moe_a2a, true, false, true, false},
    {"two_batch", &Overlap::two_batch, false, true, true, false},
}};

workload::AttentionImpl read_attention_impl(const Node& n) {
    const std::vector<std::string> names(std::begin(workload::kAttentionImplNames),
                                         std::end(workload::kAttentionImplNames));
    const std::string v = n.as_enum(names);
    for (std::size_t i = 0; i < names.size(); ++i)
        if (names[i] == v) return static_cast<workload::AttentionImpl>(i);
    return workload::AttentionImpl::flash2;  // unreachable: as_enum accepted v
}

workload::Dropout read_dropout(const Node& n) {
    MapReader r(n);
    workload::Dropout d;
    // A probability of 1 drops everything; no run trains that way.
    const auto prob = [](const Node& p) {
        const double v = p.as_number(0, 1);
        if (v >= 1) p.fail("a dropout probability must be below 1");
        return v;
    };
    if (auto p = r.optional("hidden")) d.hidden = prob(*p);
    if (auto p = r.optional("attention")) d.attention = prob(*p);
    r.finish();
    return d;
}

Overlap read_overlap(const Node& n) {
    MapReader r(n);
    Overlap o;
    for (const OverlapKey& k : kOverlapKeys)
        if (auto b = r.optional(k.name)) o.*k.field = b->as_bool();
    r.finish();
    return o;
}

SoftwareSpec read_software(const Node& n) {
    MapReader r(n);
    SoftwareSpec s;
    s.name = r.required("name").as_enum(kSoftwareNames);
    if (auto v = r.optional("version")) {
        if (!v->is_scalar()) v->fail("a version is a string, e.g. '24.07'");
        s.version = v->as_string();
        // Versions are tags ('24.07', 'v0.6.1'): printable, and safe to quote in a generated YAML file.
        for (unsigned char ch : s.version)
            if (ch < 0x20 || ch == 0x7f || ch == '\'' || ch == '"' || ch == '\\')
                v->fail("a version holds no quotes, backslashes or control characters");
    }
    r.finish();
    return s;
}

void apply_attention(WorkloadSpec& w, const std::optional<Node>& attention, const std::optional<Node>& flash) {
    if (flash) w.flash_attention = flash->as_bool();
    if (!attention) return;
    w.attention = read_attention_impl(*attention);
    const bool fused = *w.attention != workload::AttentionImpl::naive;
    if (flash && w.flash_attention != fused)
        attention->fail(fmt::format("attention {} contradicts flash_attention: {}", workload::to_string(*w.attention),
                                    w.flash_attention ? "true" : "false"));
    w.flash_attention = fused;
}

void read_stage_layers(MapReader& r, int& first, int& last) {
    if (auto n = r.optional("first_stage_layers")) first = static_cast<int>(n->as_int(1, 1 << 20));
    if (auto n = r.optional("last_stage_layers")) last = static_cast<int>(n->as_int(1, 1 << 20));
}

void read_training_shape(MapReader& r, WorkloadSpec& w) {
    w.seq_len = r.required("seq_len").as_int(1, 1 << 24);
    w.global_batch = r.required("global_batch").as_int(1, 1 << 30);
    if (auto n = r.optional("micro_batch")) w.micro_batch = n->as_int(1, 1 << 20);
    if (auto n = r.optional("recompute")) w.recompute = read_recompute(*n);
    if (auto n = r.optional("recompute_modules")) w.recompute_modules = read_recompute_modules(*n, w.recompute);
}

void read_inference_shape(MapReader& r, WorkloadSpec& w) {
    w.batch = r.required("batch").as_int(1, 1 << 24);
    w.prompt_tokens = r.required("prompt_tokens").as_int(1, 1 << 24);
    w.output_tokens = r.required("output_tokens").as_int(1, 1 << 24);
}

void read_moe(const Node& node, WorkloadSpec& w) {
    MapReader r(node);
    w.moe_where = node.location();
    if (auto n = r.optional("routing")) {
        std::string err, file;
        w.moe.kind = workload::parse_routing(n->as_string(), w.moe.zipf_s, err, &file);
        if (!err.empty()) n->fail(err);
        if (w.moe.kind == workload::MoeRouting::Kind::histogram) {
            // Beside the file that names it (a scenario or a dataset), as a serving trace.
            try {
                w.moe.histogram = std::make_shared<const workload::ExpertHistogram>(
                    read_expert_histogram(resolve_beside(node.file(), file)));
            } catch (const LimitError& e) {
                n->fail(e.what());
            } catch (const ConfigError& e) {
                if (e.where().line > 0) throw;
                n->fail(e.what());  // the file itself (absent, a directory, a device): at the key that names it
            }
        }
    }
    if (auto n = r.optional("capacity_factor")) w.moe.capacity_factor = n->as_number(0.01, 1024.0);
    if (auto n = r.optional("grouped_gemm")) w.moe.grouped_gemm = n->as_bool();
    if (auto n = r.optional("recompute_exchange")) w.moe.recompute_exchange = n->as_bool();
    // The router GEMM's dtype, the recipe's moe_router_dtype (Megatron-Core's
    // fp64 is not modelled, so it is refused with the other values).
    if (auto n = r.optional("router_dtype")) w.moe.router_fp32 = n->as_enum({"activations", "fp32"}) == "fp32";
    if (auto n = r.optional("dispatcher")) {
        // A run names the dispatcher its recipe sets (moe_token_dispatcher_type); auto is the profile's own.
        w.moe_dispatcher = n->as_enum({"alltoall", "allgather"});
        w.moe_dispatcher_where = n->location();
    }
    r.finish();
}

void apply_moe_dispatcher(const WorkloadSpec& w, SoftwareProfile& p) {
    if (w.moe_dispatcher.empty()) return;
    p.moe_dispatcher = w.moe_dispatcher;
    p.moe_dispatcher_from = Provenance{"source", "the run's workload.moe.dispatcher"};
    if (auto why = moe_dispatcher_conflict(p); !why.empty())
        throw ConfigError(w.moe_dispatcher_where, "workload.moe.dispatcher: " + why + " (software '" + p.name + "')");
}

workload::Precision read_precision(MapReader& r, bool weight_dtype) {
    const std::vector<std::string> dtypes = hw::dtype_names();
    const auto dtype = [&](const Node& n) { return *hw::parse_dtype(n.as_enum(dtypes)); };
    workload::Precision p;
    p.compute = dtype(r.required("dtype"));
    p.weights = p.compute == hw::DType::tf32 ? hw::DType::fp32 : p.compute;
    p.kv = p.weights;
    if (weight_dtype)
        if (auto n = r.optional("weight_dtype")) p.weights = dtype(*n);
    if (auto n = r.optional("kv_dtype")) p.kv = dtype(*n);
    return p;
}

workload::Recompute read_recompute(const Node& n) {
    const std::string v = n.as_enum({"none", "selective", "full"});
    return v == "none"        ? workload::Recompute::none
           : v == "selective" ? workload::Recompute::selective
                              : workload::Recompute::full;
}

workload::RecomputeModules read_recompute_modules(const Node& n, workload::Recompute recompute) {
    if (recompute != workload::Recompute::selective) n.fail("recompute_modules needs recompute: selective");
    if (!n.is_sequence() || n.size() == 0) n.fail("expected a list of modules: core_attn, mla_up_proj");
    workload::RecomputeModules m;
    m.core_attn = false;
    for (const Node& e : n.elements()) {
        const std::string v = e.as_enum({"core_attn", "mla_up_proj"});
        (v == "core_attn" ? m.core_attn : m.mla_up_proj) = true;
    }
    return m;
}

void check_recompute_modules(const workload::RecomputeModules& m, const workload::ModelSpec& model,
                             const Node& workload) {
    if (!m.mla_up_proj || model.is_mla()) return;
    MapReader r(workload);
    const auto n = r.optional("recompute_modules");
    (n ? *n : workload)
        .fail(fmt::format("recompute module mla_up_proj needs multi-head latent attention (model '{}' has none)",
                          model.name));
}

const parallel::IPipelineSchedule& read_schedule(const Node& n) {
    return parallel::pipeline_schedule(n.as_enum(parallel::pipeline_schedule_names()));
}

}  // namespace sim::config
