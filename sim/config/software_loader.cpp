// Software profile files -> SoftwareProfile (see software_loader.h). Each
// value is a map {value, source | fitted_on}: the evidence is part of the
// schema, so a number without it cannot be loaded. A file may start from
// another profile of its folder (`extends:`) and state only what differs.
#include "sim/config/software_loader.h"
#include "sim/config/data_dir.h"

#include "sim/config/provenance.h"
#include "sim/config/scenario.h"
#include "sim/net/collective/i_collective.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>

namespace sim::config {

namespace {

namespace fs = std::filesystem;

// The overlaps a profile's `overlaps` may list (scenario.h, kOverlapKeys).
const std::vector<std::string> kOverlapNames = [] {
    std::vector<std::string> names;
    for (const OverlapKey& k : kOverlapKeys)
        if (k.listed_by_stack) names.emplace_back(k.name);
    return names;
}();
const std::vector<std::string> kGradReduceDtypes = {"weights", "fp32", "fp32_if_bf16"};
const std::vector<std::string> kGradSyncs = {"last_microbatch", "every_microbatch"};
const std::vector<std::string> kGradPrereduce = {"nan_check", "scale"};
const std::vector<std::string> kMoeDispatchers = {"auto", "alltoall", "allgather"};
const std::vector<std::string> kMoePermutes = {"fused", "unfused"};
const std::vector<std::string> kMoeSharedExperts = {"tp", "whole"};
const std::vector<std::string> kCrossEntropies = {"fused", "fp32_unfused"};
const std::vector<std::string> kTpCommMethods = {"ring_exchange", "pipeline"};
// Where a disaggregated request's first token comes from (serving.first_token).
const std::vector<std::string> kFirstTokens = {"transfer", "decode_step"};
const std::vector<std::string> kMlaDecodeWeights = {"per_head", "absorbed"};
const std::vector<std::string> kMlaQkv = {"fused", "concat"};
const std::vector<std::string> kMlaPrefillWorkspace = {"layer", "eager"};
const std::vector<std::string> kMlaRope = {"fused", "unfused"};
const std::vector<std::string> kPipelineSends = {"async", "blocking"};
const std::vector<std::string> kFp8GroupedGemms = {"cutlass", "deepgemm"};
// Files in one chain of `extends:` (a release file over its stack's general
// file is 2); a longer chain is more likely a generated hostile input than data.
constexpr std::size_t kMaxExtendsDepth = 8;

bool version_is_file_safe(const std::string& v) {
    if (v.empty() || v.size() > 64 || v.front() == '.') return false;
    return std::all_of(v.begin(), v.end(), [](unsigned char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '-' ||
               c == '_';
    });
}

// Reads one file's map over the values of its base (`extends:`), loaded
// first from the same folder. `chain` holds the stems of the files being
// read, outermost first: a base already in it is a cycle.
SoftwareProfile load_profile(const Node& root, const std::string& expected_name, const std::string& dir,
                             std::vector<std::string>& chain) {
    MapReader r(root);
    const Node name = r.required("name");
    std::string version;
    if (auto v = r.optional("version")) {
        version = v->as_string();
        if (!version_is_file_safe(version)) v->fail("a version is letters, digits, '.', '-' or '_'");
    }
    const std::string stem = version.empty() ? name.as_string() : name.as_string() + "-" + version;
    if (!expected_name.empty() && stem != expected_name)
        name.fail(fmt::format("name '{}' differs from the file name '{}'", stem, expected_name));
    // The base's values first; this file's keys replace them one by one, each
    // with its own evidence. Name, version and description are the file's own.
    SoftwareProfile p;
    const bool has_base = r.has("extends");
    if (has_base) {
        const Node e = *r.optional("extends");
        const std::string base = e.as_string();
        // A base is a profile of the same folder, named as `software_profile`
        // names it: never a path, so a profile cannot reach outside its folder.
        if (!version_is_file_safe(base))
            e.fail(
                fmt::format("'{}' is not a profile name: a base is a file of the same folder, named without "
                            "'.yaml' (letters, digits, '.', '-' or '_')",
                            base));
        chain.push_back(stem);
        if (std::find(chain.begin(), chain.end(), base) != chain.end())
            e.fail(fmt::format("profiles extend one another in a cycle: {} -> {}", fmt::join(chain, " -> "), base));
        if (chain.size() >= kMaxExtendsDepth)
            e.fail(fmt::format("more than {} profiles extend one another ({} -> {})", kMaxExtendsDepth,
                               fmt::join(chain, " -> "), base));
        if (dir.empty()) e.fail("a profile read from text has no folder to find its base in");
        const fs::path path = fs::path(dir) / (base + ".yaml");
        if (!exists_quietly(path))
            e.fail(fmt::format("no software profile '{}' in the profile's folder (known: {})", base,
                               fmt::join(yaml_file_names(dir), ", ")));
        p = load_profile(load_file(path.string()), base, dir, chain);
        chain.pop_back();
    }
    p.name = name.as_string();
    p.version = version;
    if (p.name != kDefaultSoftware &&
        std::find(kSoftwareNames.begin(), kSoftwareNames.end(), p.name) == kSoftwareNames.end())
        name.fail(fmt::format("'{}' is not a software stack parasim knows (nor '{}')", p.name, kDefaultSoftware));
    p.description = r.required("description").as_string();
    // Without a base every key without a default is required; with one, each
    // key this file leaves out keeps the base's value and its evidence.
    // (optional() also lists the key as valid for finish()'s "did you mean".)
    const auto states = [has_base](MapReader& m, const char* key) { return m.optional(key).has_value() || !has_base; };
    if (auto h = has_base ? r.optional("host") : std::optional<Node>(r.required("host"))) {
        MapReader host(*h);
        if (states(host, "kernel_issue")) {
            // A per-kernel host cost above 10 ms is no framework's: a unit slip.
            const Node issue = sourced(host, "kernel_issue", p.kernel_issue_from);
            p.kernel_issue = issue.as_time();
            if (p.kernel_issue > Time::from_seconds_ceil(0.01))
                issue.fail("a per-kernel host cost above 10 ms is not plausible");
        }
        if (states(host, "launch_queue_depth"))
            p.launch_queue_depth =
                static_cast<int>(sourced(host, "launch_queue_depth", p.launch_queue_depth_from).as_int(1, 1 << 20));
        host.finish();
    }
    if (states(r, "kernel_efficiency")) {
        const Node e = sourced(r, "kernel_efficiency", p.kernel_efficiency_from);
        p.kernel_efficiency = e.as_number(0, 2);
        if (p.kernel_efficiency < 0.1) e.fail("a kernel efficiency below 0.1 is not plausible");
    }
    if (states(r, "fuse_elementwise"))
        p.fuse_elementwise = sourced(r, "fuse_elementwise", p.fuse_elementwise_from).as_bool();
    if (r.has("moe_fp8_dispatch"))
        p.moe_fp8_dispatch = sourced(r, "moe_fp8_dispatch", p.moe_fp8_dispatch_from).as_bool();
    if (r.has("moe_permute"))
        p.moe_permute_unfused = sourced(r, "moe_permute", p.moe_permute_from).as_enum(kMoePermutes) == "unfused";
    if (r.has("moe_shared_experts"))
        p.moe_shared_experts_whole =
            sourced(r, "moe_shared_experts", p.moe_shared_experts_from).as_enum(kMoeSharedExperts) == "whole";
    if (r.has("decode_attention_issue")) {
        // Lane instructions per K/V element and query head: a handful for a
        // dot product and a weighted sum; above 1000 is a unit slip.
        p.decode_attention_issue =
            sourced(r, "decode_attention_issue", p.decode_attention_issue_from).as_number(0, 1000);
    }
    if (r.has("grad_reduce_dtype"))
        p.grad_reduce_dtype = sourced(r, "grad_reduce_dtype", p.grad_reduce_dtype_from).as_enum(kGradReduceDtypes);
    if (r.has("grad_sync"))
        p.grad_sync_every_microbatch =
            sourced(r, "grad_sync", p.grad_sync_from).as_enum(kGradSyncs) == "every_microbatch";
    if (r.has("grad_shard_passes"))
        p.grad_shard_passes = static_cast<int>(sourced(r, "grad_shard_passes", p.grad_shard_passes_from).as_int(0, 8));
    if (r.has("grad_prereduce")) {
        const Node list = sourced(r, "grad_prereduce", p.grad_prereduce_from);
        p.grad_prereduce_nan_check = p.grad_prereduce_scale = false;
        for (const Node& e : list.elements()) {
            bool& on = e.as_enum(kGradPrereduce) == "nan_check" ? p.grad_prereduce_nan_check : p.grad_prereduce_scale;
            if (on) e.fail("listed twice");
            on = true;
        }
    }
    if (r.has("delay_grad_reduce"))
        p.delay_grad_reduce = sourced(r, "delay_grad_reduce", p.delay_grad_reduce_from).as_bool();
    if (r.has("optimizer_bytes_per_param")) {
        // An FP32 Adam touches at most a few dozen 4-byte values per
        // parameter; above 1000 is a unit slip.
        p.optimizer_bytes_per_param =
            sourced(r, "optimizer_bytes_per_param", p.optimizer_bytes_per_param_from).as_number(0, 1000);
    }
    if (r.has("cross_entropy"))
        p.cross_entropy_fp32_unfused =
            sourced(r, "cross_entropy", p.cross_entropy_from).as_enum(kCrossEntropies) == "fp32_unfused";
    if (r.has("tp_comm_row_fprop"))
        p.tp_comm_row_fprop_pipeline =
            sourced(r, "tp_comm_row_fprop", p.tp_comm_row_fprop_from).as_enum(kTpCommMethods) == "pipeline";
    if (r.has("tp_comm_pipeline_splits")) {
        // Transformer Engine splits a GEMM into at most a few dozen chunks
        // (4 by default); more than 64 is a slip.
        p.tp_comm_pipeline_splits =
            static_cast<int>(sourced(r, "tp_comm_pipeline_splits", p.tp_comm_pipeline_splits_from).as_int(1, 64));
    }
    if (r.has("tp_comm_pipeline_sms")) {
        // Userbuffers runs its kernels on at most 32 SMs (NVTE_MAX_SMS).
        p.tp_comm_pipeline_sms =
            static_cast<int>(sourced(r, "tp_comm_pipeline_sms", p.tp_comm_pipeline_sms_from).as_int(1, 32));
    }
    if (r.has("moe_a2a_sms")) {
        // DeepEP's normal kernels run on 20 SMs by default; more than 64
        // would take half an H100's SMs from the compute: a slip.
        p.moe_a2a_sms = static_cast<int>(sourced(r, "moe_a2a_sms", p.moe_a2a_sms_from).as_int(0, 64));
    }
    if (r.has("moe_a2a_beside_compute")) {
        const Node f = sourced(r, "moe_a2a_beside_compute", p.moe_a2a_beside_compute_from);
        p.moe_a2a_beside_compute = f.as_number(0, 1);
        // An exchange at a tenth of its rate beside compute is no
        // measurement parasim has seen: a slip (a slowdown factor typed
        // instead of its inverse, a percentage).
        if (p.moe_a2a_beside_compute < 0.1) f.fail("an exchange below 0.1 of its rate beside compute is not plausible");
    }
    if (r.has("moe_a2a_decode")) {
        std::vector<std::string> names = net::collective_algorithm_names(net::CollectiveOp::all_to_all);
        names.insert(names.begin(), "auto");
        p.moe_a2a_decode = sourced(r, "moe_a2a_decode", p.moe_a2a_decode_from).as_enum(names);
        p.moe_fp8_dispatch_decode = p.moe_a2a_decode == "deepep-ll";
    }
    // After the exchange keys it contradicts (moe_dispatcher_conflict).
    if (r.has("moe_dispatcher")) {
        const Node n = sourced(r, "moe_dispatcher", p.moe_dispatcher_from);
        p.moe_dispatcher = n.as_enum(kMoeDispatchers);
        if (auto why = moe_dispatcher_conflict(p); !why.empty()) n.fail(why);
    }
    if (r.has("mla_decode_weights"))
        p.mla_absorbed_weights =
            sourced(r, "mla_decode_weights", p.mla_decode_weights_from).as_enum(kMlaDecodeWeights) == "absorbed";
    if (r.has("mla_qkv")) p.mla_qkv_concat = sourced(r, "mla_qkv", p.mla_qkv_from).as_enum(kMlaQkv) == "concat";
    if (r.has("mla_prefill_workspace"))
        p.mla_prefill_eager =
            sourced(r, "mla_prefill_workspace", p.mla_prefill_workspace_from).as_enum(kMlaPrefillWorkspace) == "eager";
    if (r.has("mla_rope")) p.mla_rope_unfused = sourced(r, "mla_rope", p.mla_rope_from).as_enum(kMlaRope) == "unfused";
    if (r.has("pipeline_sends"))
        p.pipeline_sends_blocking =
            sourced(r, "pipeline_sends", p.pipeline_sends_from).as_enum(kPipelineSends) == "blocking";
    if (r.has("fused_moe_chunk_tokens")) {
        // A chunk of more than 2^24 tokens is no engine's batch: a unit slip.
        p.fused_moe_chunk_tokens =
            sourced(r, "fused_moe_chunk_tokens", p.fused_moe_chunk_tokens_from).as_int(0, std::int64_t{1} << 24);
    }
    if (r.has("prefill_max_tokens")) {
        // More than 2^24 tokens in one context pass is no engine's buffer: a slip.
        p.prefill_max_tokens =
            sourced(r, "prefill_max_tokens", p.prefill_max_tokens_from).as_int(0, std::int64_t{1} << 24);
    }
    if (auto ds = r.optional("decode_step")) {
        MapReader d(*ds);
        // Bounds: more than 64 extra kernels or 16 host waits a step, a wait
        // above 1 ms or a copy above 1 GB a sequence is no engine's: a slip.
        if (d.optional("kernels"))
            p.decode_step_kernels = static_cast<int>(sourced(d, "kernels", p.decode_step_kernels_from).as_int(0, 64));
        if (d.optional("host_syncs"))
            p.decode_step_host_syncs =
                static_cast<int>(sourced(d, "host_syncs", p.decode_step_host_syncs_from).as_int(0, 16));
        if (d.optional("sync_latency")) {
            const Node n = sourced(d, "sync_latency", p.decode_step_sync_latency_from);
            p.decode_step_sync_latency = n.as_time();
            if (p.decode_step_sync_latency > Time::from_seconds_ceil(1e-3))
                n.fail("a host synchronisation above 1 ms is not plausible");
        }
        if (d.optional("copy_per_sequence")) {
            const Node n = sourced(d, "copy_per_sequence", p.decode_step_copy_bytes_from);
            p.decode_step_copy_bytes = n.as_bytes().as_double();
            if (p.decode_step_copy_bytes > 1e9) n.fail("a device-to-host copy above 1 GB a sequence is not plausible");
        }
        d.finish();
    }
    if (r.has("fp8_gemm_ceiling")) {
        const Node c = sourced(r, "fp8_gemm_ceiling", p.fp8_gemm_ceiling_from);
        p.fp8_gemm_ceiling = c.as_number(0, 1);
        if (p.fp8_gemm_ceiling > 0 && p.fp8_gemm_ceiling < 0.01)
            c.fail("an FP8 GEMM ceiling below 1% of peak is not plausible");
    }
    if (r.has("fp8_grouped_gemm"))
        p.fp8_grouped_gemm_dense =
            sourced(r, "fp8_grouped_gemm", p.fp8_grouped_gemm_from).as_enum(kFp8GroupedGemms) == "deepgemm";
    if (r.has("fp8_input_quant_group")) {
        // A quantization group is a slice of one row: at most a hidden size.
        p.fp8_input_quant_group =
            sourced(r, "fp8_input_quant_group", p.fp8_input_quant_group_from).as_int(0, std::int64_t{1} << 20);
    }
    if (r.has("grouped_topk_kernels")) {
        // A routing step of more than 64 kernels is no stack's: a slip.
        p.grouped_topk_kernels =
            static_cast<int>(sourced(r, "grouped_topk_kernels", p.grouped_topk_kernels_from).as_int(1, 64));
    }
    // A router of more than 256 kernels a pass is no stack's: a slip.
    if (r.has("moe_router_kernels"))
        p.moe_router_kernels =
            static_cast<int>(sourced(r, "moe_router_kernels", p.moe_router_kernels_from).as_int(1, 256));
    if (r.has("moe_router_bwd_kernels"))
        p.moe_router_bwd_kernels =
            static_cast<int>(sourced(r, "moe_router_bwd_kernels", p.moe_router_bwd_kernels_from).as_int(1, 256));
    if (r.has("shared_expert_combine_kernels")) {
        // More than 8 passes over a layer's output is no stack's: a slip.
        p.shared_expert_combine_kernels = static_cast<int>(
            sourced(r, "shared_expert_combine_kernels", p.shared_expert_combine_kernels_from).as_int(0, 8));
    }
    if (r.has("mla_kv_cache_align_bytes")) {
        // An alignment is a power of two no larger than a cache block's page.
        const Node a = sourced(r, "mla_kv_cache_align_bytes", p.mla_kv_cache_align_bytes_from);
        p.mla_kv_cache_align_bytes = a.as_int(0, 4096);
        if ((p.mla_kv_cache_align_bytes & (p.mla_kv_cache_align_bytes - 1)) != 0)
            a.fail("an alignment must be a power of two (or 0: entries packed)");
    }
    if (r.has("non_torch_memory")) {
        // More than 64 GB a GPU outside the allocator is no stack's: a unit slip.
        const Node n = sourced(r, "non_torch_memory", p.non_torch_memory_from);
        p.non_torch_memory_bytes = n.as_bytes().as_double();
        if (p.non_torch_memory_bytes < 0 || p.non_torch_memory_bytes > 64e9)
            n.fail("memory outside the allocator must be between 0 and 64 GB a GPU");
    }
    if (auto mb = r.optional("memory_bound")) {
        MapReader m(*mb);
        // A share of the streaming rate is at most 1; below 0.01 is a slip.
        const auto share = [&m](const char* key, double& out, Provenance& from) {
            if (!m.optional(key)) return;  // optional() also lists the key as valid for "did you mean"
            const Node n = sourced(m, key, from);
            out = n.as_number(0, 1);
            if (out < 0.01) n.fail("a share of the streaming rate below 0.01 is not plausible");
        };
        share("norm", p.memory_bound.norm, p.memory_bound_norm_from);
        share("norm_bwd", p.memory_bound.norm_bwd, p.memory_bound_norm_bwd_from);
        share("activation", p.memory_bound.activation, p.memory_bound_activation_from);
        share("activation_bwd", p.memory_bound.activation_bwd, p.memory_bound_activation_bwd_from);
        m.finish();
    }
    if (auto serving = r.optional("serving")) {
        MapReader sv(*serving);
        // Host times per sequence, request or token above 1 s are a unit slip.
        const auto host_time = [&sv](const char* key, Time& out, Provenance& from) {
            if (!sv.optional(key)) return;  // optional() also lists the key as valid for "did you mean"
            const Node n = sourced(sv, key, from);
            out = n.as_time();
            if (out > Time::from_seconds_ceil(1.0)) n.fail("a serving host time above 1 s is not plausible");
        };
        host_time("sequence_overhead", p.serving_sequence_overhead, p.serving_sequence_overhead_from);
        host_time("request_overhead", p.serving_request_overhead, p.serving_request_overhead_from);
        host_time("token_overhead", p.serving_token_overhead, p.serving_token_overhead_from);
        host_time("request_latency", p.serving_request_latency, p.serving_request_latency_from);
        if (sv.optional("kv_descriptor_post")) {
            const Node n = sourced(sv, "kv_descriptor_post", p.serving_kv_descriptor_post_from);
            p.serving_kv_descriptor_post = n.as_time();
            if (p.serving_kv_descriptor_post > Time::from_seconds_ceil(1e-3))
                n.fail("posting one transfer descriptor for more than 1 ms is not plausible");
        }
        if (sv.optional("first_token"))
            p.serving_first_token_on_decode =
                sourced(sv, "first_token", p.serving_first_token_from).as_enum(kFirstTokens) == "decode_step";
        sv.finish();
    }
    if (states(r, "overlaps")) {
        const Node list = sourced(r, "overlaps", p.overlaps_from);
        p.overlaps.clear();  // a list is replaced whole, not appended to the base's
        for (const Node& e : list.elements()) {
            const std::string o = e.as_enum(kOverlapNames);
            if (std::find(p.overlaps.begin(), p.overlaps.end(), o) != p.overlaps.end()) e.fail("listed twice");
            p.overlaps.push_back(o);
        }
    }
    r.finish();
    return p;
}

}  // namespace

std::string moe_dispatcher_conflict(const SoftwareProfile& p) {
    if (p.moe_dispatcher != "allgather") return {};
    if (p.moe_a2a_decode != "auto")
        return fmt::format(
            "allgather has no all-to-all for moe_a2a_decode {} to run (Megatron-Core's "
            "MoEAllGatherTokenDispatcher all-gathers the tokens over the etp x ep ranks; DeepEP runs behind the flex "
            "dispatcher)",
            p.moe_a2a_decode);
    if (p.moe_fp8_dispatch)
        return "allgather gathers the tokens in the activations' type: moe_fp8_dispatch is DeepEP's "
               "FP8 all-to-all";
    return {};
}

SoftwareProfile load_software_profile(const Node& root, const std::string& expected_name, const std::string& dir) {
    std::vector<std::string> chain;
    return load_profile(root, expected_name, dir, chain);
}

double gradient_reduce_bytes(const SoftwareProfile& p, double weight_bytes, bool weights_bf16) {
    if (weight_bytes >= 4 || p.grad_reduce_dtype == "fp32") return 4;
    if (p.grad_reduce_dtype == "fp32_if_bf16" && weights_bf16) return 4;
    return 2;
}

SoftwareProfile load_software_file(const std::string& path) {
    const fs::path file(path);
    return load_software_profile(load_file(path), file.stem().string(), file.parent_path().string());
}

std::string default_software_dir() { return std::string(sim::config::data_dir()) + "/topologies/software"; }

std::vector<std::string> software_profile_names(const std::string& dir_in) {
    const std::string dir = dir_in.empty() ? default_software_dir() : dir_in;
    return yaml_file_names(dir);
}

SoftwareProfile software_profile(const std::string& name_in, const std::string& dir_in) {
    const std::string dir = dir_in.empty() ? default_software_dir() : dir_in;
    const std::string name = name_in.empty() ? kDefaultSoftware : name_in;
    const fs::path path = fs::path(dir) / (name + ".yaml");
    if (!exists_quietly(path))
        throw ConfigError(SourceLocation{path.string()}, fmt::format("no software profile '{}' (known: {})", name,
                                                                     fmt::join(software_profile_names(dir), ", ")));
    return load_software_file(path.string());
}

SoftwareProfile software_profile(const std::string& name, const std::string& version_in, const std::string& dir_in) {
    std::string version = version_in;
    if (!version.empty() && (version.front() == 'v' || version.front() == 'V')) version.erase(0, 1);
    if (!name.empty() && version_is_file_safe(version)) {
        const std::string dir = dir_in.empty() ? default_software_dir() : dir_in;
        // Longest prefix first: 0.6.1, 0.6, 0; a pre-release tag on the last
        // component is the release it leads to (0.6a: 0.6a, then 0.6).
        const auto has = [&](const std::string& v) {
            return !v.empty() && exists_quietly(fs::path(dir) / (name + "-" + v + ".yaml"));
        };
        for (std::string v = version; !v.empty();) {
            if (has(v)) return software_profile(name + "-" + v, dir);
            std::string bare = v;
            while (!bare.empty() && !std::isdigit(static_cast<unsigned char>(bare.back()))) bare.pop_back();
            if (bare != v && has(bare)) return software_profile(name + "-" + bare, dir);
            const auto dot = v.rfind('.');
            v = dot == std::string::npos ? std::string{} : v.substr(0, dot);
        }
    }
    return software_profile(name, dir_in);
}

}  // namespace sim::config
