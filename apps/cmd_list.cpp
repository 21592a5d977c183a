// parasim list: what is available by name.
#include "apps/cli.h"
#include "sim/config/calibration_loader.h"
#include "sim/config/cluster_loader.h"
#include "sim/config/data_dir.h"
#include "sim/config/gpu_loader.h"
#include "sim/config/model_loader.h"
#include "sim/config/software_loader.h"
#include "sim/hw/cost_model.h"
#include "sim/net/collective/i_collective.h"
#include "sim/parallel/partition/i_partitioner.h"
#include "sim/parallel/schedule/i_schedule.h"
#include "sim/serve/router/i_router.h"
#include "sim/serve/scheduler/i_scheduler.h"
#include "sim/workload/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <string_view>

namespace parasim_cli {

namespace {
std::vector<std::string> yaml_stems(const std::string& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
        if (e.is_regular_file() && e.path().extension() == ".yaml") out.push_back(e.path().stem().string());
    std::sort(out.begin(), out.end());
    return out;
}

void print_entry(std::string_view name, std::string_view description) { fmt::print("{:<24} {}\n", name, description); }
}  // namespace

constexpr const char* kListUsage =
    "parasim list WHAT: what is available by name\n"
    "  parasim list gpus          GPUs in topologies/gpus/ with peak, bandwidth and memory\n"
    "  parasim list clusters      clusters in topologies/ with GPU count and fabric\n"
    "  parasim list models        models in models/ with parameters, layers and attention\n"
    "  parasim list schedules     registered pipeline schedules\n"
    "  parasim list partitioners  registered layer partitioners\n"
    "  parasim list schedulers    registered serving batch schedulers\n"
    "  parasim list routers       registered serving routers (which replica a request goes to)\n"
    "  parasim list collectives   registered collective algorithms\n"
    "  parasim list cost-models   registered kernel cost models\n"
    "  parasim list software      software-stack profiles in topologies/software/\n"
    "  parasim list collective-libraries  collective libraries in topologies/collectives/ (a scenario's "
    "`collectives`)\n";

int cmd_list(const Args& args) {
    const std::string what = args.empty() ? "" : args.front();
    if (what == "--help" || what == "-h") {
        fmt::print("{}", kListUsage);
        return 0;
    }
    const std::string data = sim::config::data_dir();
    if (what == "gpus") {
        sim::config::GpuCatalog catalog;
        for (const auto& n : catalog.names()) {
            const auto& g = catalog.get(n);
            fmt::print("{:<16} {:<9} {:>4} SMs  {:>7.1f} TFLOP/s fp16  {:>6.0f} GB/s  {}\n", n, g.architecture,
                       g.sm_count,
                       g.supports(sim::hw::DType::fp16) ? g.peak_of(sim::hw::DType::fp16).per_s / 1e12 : 0.0,
                       g.memory_bandwidth.bytes_per_s / 1e9, sim::format_bytes(g.memory_capacity.as_double()));
        }
        return 0;
    }
    if (what == "clusters") {
        fmt::print("{:<28} {:>6}  {:<16} {:<14} {}\n", "name", "GPUs", "GPU", "intra-node", "inter-node");
        for (const auto& n : yaml_stems(data + "/topologies")) {
            const auto c = sim::config::load_cluster_file(data + "/topologies/" + n + ".yaml");
            const std::string gpus = c.nodes > 0 ? fmt::format("{}", c.nodes * c.gpus_per_node) : "auto";
            fmt::print("{:<28} {:>6}  {:<16} {:<14} {}\n", n, gpus, c.gpu, sim::net::to_string(c.intra_node),
                       c.nodes == 1    ? std::string("-")
                       : c.planes == 1 ? std::string(sim::net::to_string(c.inter_node))
                                       : fmt::format("{}, {} planes", sim::net::to_string(c.inter_node), c.planes));
        }
        return 0;
    }
    if (what == "models") {
        fmt::print("{:<24} {:>10} {:>7}  {}\n", "name", "params", "layers", "attention");
        for (const auto& n : yaml_stems(data + "/models")) {
            const auto m = sim::config::load_model_file(data + "/models/" + n + ".yaml");
            const auto p = sim::workload::count_parameters(m);
            const std::string attention =
                m.is_mla()              ? fmt::format("MLA, {} heads, latent {}", m.heads, m.mla()->kv_lora_rank)
                : m.kv_heads == m.heads ? fmt::format("MHA, {} heads", m.heads)
                : m.kv_heads == 1       ? fmt::format("MQA, {} heads", m.heads)
                                        : fmt::format("GQA, {} heads / {} KV heads", m.heads, m.kv_heads);
            const std::string moe = m.experts > 0 ? fmt::format("; MoE {} experts, top {} ({:.1f} B active)", m.experts,
                                                                m.top_k, p.total_active / 1e9)
                                                  : "";
            fmt::print("{:<24} {:>8.2f} B {:>7}  {}{}\n", n, p.total / 1e9, m.layers, attention, moe);
        }
        return 0;
    }
    // The variant kinds print their registries, so a new implementation
    // shows up here without touching this file.
    if (what == "schedules") {
        for (const auto* sched : sim::parallel::pipeline_schedules()) print_entry(sched->name(), sched->description());
        return 0;
    }
    if (what == "partitioners") {
        for (const auto* p : sim::parallel::partitioners()) print_entry(p->name(), p->description());
        return 0;
    }
    if (what == "schedulers") {
        for (const auto* sch : sim::serve::serving_schedulers()) print_entry(sch->name(), sch->description());
        return 0;
    }
    if (what == "routers") {
        for (const auto* r : sim::serve::serving_routers()) print_entry(r->name(), r->description());
        return 0;
    }
    if (what == "collectives") {
        print_entry("auto",
                    "the best-ranked registered algorithm that can run the group (NCCL's rules; with "
                    "protocols, the fastest predicted)");
        for (const auto* algo : sim::net::collective_algorithms()) print_entry(algo->name(), algo->description());
        return 0;
    }
    if (what == "collective-libraries") {
        for (const auto& n : sim::config::collective_library_names())
            print_entry(n, sim::config::collective_library(n).description);
        return 0;
    }
    if (what == "cost-models") {
        for (const auto& m : sim::hw::list_cost_models()) print_entry(m.name, m.description);
        return 0;
    }
    // Profiles are data files, listed with the values the executor uses and
    // whether each was sourced or fitted.
    if (what == "software") {
        for (const auto& n : sim::config::software_profile_names()) {
            const auto p = sim::config::software_profile(n);
            const auto mark = [](const sim::config::Provenance& from) {
                return from.kind == "fitted_on" ? " (fitted)" : "";
            };
            std::string decode;
            if (p.decode_attention_issue > 0)
                decode = fmt::format("  decode attention {:.1f} instr/element/query head{}", p.decode_attention_issue,
                                     mark(p.decode_attention_issue_from));
            // The overlaps the stack can do (the profile's `overlaps:`; a run
            // chooses its own in the strategy's `overlap:`).
            const std::string overlaps =
                p.overlaps.empty() ? std::string("none") : fmt::format("{}", fmt::join(p.overlaps, ","));
            fmt::print(
                "{:<16} issue {:>5.1f} us/kernel{:<9}  queue {:>5}  kernel efficiency {:.2f}{:<9}  {}{}  overlaps {}  "
                "{}\n",
                n, p.kernel_issue.seconds() * 1e6, mark(p.kernel_issue_from), p.launch_queue_depth, p.kernel_efficiency,
                mark(p.kernel_efficiency_from), p.fuse_elementwise ? "fused" : "unfused", decode, overlaps,
                p.description);
            // The serving host times (docs/serving.md, "Host time of the serving
            // engine"), on a second line, only for a profile with a `serving:` block.
            const auto host = [&](const char* per, sim::Time t, const sim::config::Provenance& from) {
                if (from.kind.empty()) return fmt::format("none {}", per);
                const double us = t.seconds() * 1e6;
                return us >= 1000 ? fmt::format("{:g} ms {}{}", us / 1000, per, mark(from))
                                  : fmt::format("{:g} us {}{}", us, per, mark(from));
            };
            if (!p.serving_sequence_overhead_from.kind.empty() || !p.serving_request_overhead_from.kind.empty() ||
                !p.serving_token_overhead_from.kind.empty() || !p.serving_request_latency_from.kind.empty())
                fmt::print(
                    "{:<16} serving host time: {}, {}, {}, {}\n", "",
                    host("per sequence per iteration", p.serving_sequence_overhead, p.serving_sequence_overhead_from),
                    host("of intake work per request", p.serving_request_overhead, p.serving_request_overhead_from),
                    host("of latency per request", p.serving_request_latency, p.serving_request_latency_from),
                    host("per output token", p.serving_token_overhead, p.serving_token_overhead_from));
            if (!p.serving_kv_descriptor_post_from.kind.empty() || !p.serving_first_token_from.kind.empty())
                fmt::print(
                    "{:<16} disaggregated handover: {}, first token {}{}\n", "",
                    host("per KV descriptor posted", p.serving_kv_descriptor_post, p.serving_kv_descriptor_post_from),
                    p.serving_first_token_on_decode ? "from the decode engine's first step" : "when the cache lands",
                    mark(p.serving_first_token_from));
        }
        return 0;
    }
    throw UsageError(
        "list needs one of: gpus, clusters, models, schedules, partitioners, schedulers, routers, collectives, "
        "collective-libraries, cost-models, software");
}

}  // namespace parasim_cli
