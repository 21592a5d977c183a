// What the expert-tensor-parallel tests share (test_expert_tensor_parallel.cpp,
// test_expert_tp_partial.cpp): Mixtral 8x7B on 16 GPUs (two nodes of 8) under
// a folded strategy in Megatron's rank order, its plan, and the GPU sets and
// sizes of one pipeline stage's collectives.
#pragma once

#include "sim/config/data_dir.h"
#include "sim/config/scenario.h"
#include "sim/hw/cost_model.h"
#include "sim/parallel/builder.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace expert_fold {

inline std::string scenario_path() {
    return std::string(sim::config::data_dir()) + "/scenarios/moe-mixtral-8x7b-ep.yaml";
}

// Mixtral on 16 GPUs, tp x dp x pp with sequence parallelism and ZeRO-1,
// pp-last (stage s holds GPUs s x tp x dp onwards, rank i = r + tp x d inside
// it), and the given ep and etp; `more` overrides further fields
// ("workload.global_batch=8"), `strategy` adds to the strategy (", overlap: {...}").
inline sim::config::ScenarioSpec mixtral(int tp, int pp, int dp, int ep, int etp,
                                         const std::vector<std::string>& more = {}, const std::string& strategy = "") {
    std::vector<sim::config::Override> ov{sim::config::parse_override(
        "strategies=[{name: f, tp: " + std::to_string(tp) + ", pp: " + std::to_string(pp) +
        ", dp: " + std::to_string(dp) + ", sp: true, zero: 1, placement: pp-last, ep: " + std::to_string(ep) +
        ", etp: " + std::to_string(etp) + strategy + "}]")};
    for (const auto& m : more) ov.push_back(sim::config::parse_override(m));
    return sim::config::load_scenario(scenario_path(), ov);
}

inline sim::parallel::PlanBuild build(const sim::config::ScenarioSpec& sc, bool collapse) {
    const auto cm = sim::hw::make_cost_model("roofline");
    sim::parallel::BuildOptions bo;
    bo.collapse = collapse;
    return sim::parallel::build_plan(sc, sc.strategies.front(), *cm, bo);
}

// Which streams' collectives: every stream, the gradients' (dp_comm) or the others.
enum class Streams { any, gradients, others };

// The GPU sets of the groups of stage 0's (GPUs below `stage_gpus`) collectives of kind `op`.
inline std::set<std::vector<int>> stage0_groups(const sim::parallel::Plan& plan, sim::net::CollectiveOp op,
                                                int stage_gpus, Streams streams = Streams::any) {
    std::set<std::vector<int>> out;
    for (const auto& t : plan.tasks) {
        if (t.kind != sim::parallel::TaskKind::collective || t.op != op) continue;
        const bool dp = t.stream == sim::parallel::StreamKind::dp_comm;
        if ((streams == Streams::gradients && !dp) || (streams == Streams::others && dp)) continue;
        const auto& g = plan.groups[t.group].gpus;
        if (g.front() < stage_gpus) out.insert(g);
    }
    return out;
}

// The byte counts of the same collectives (not the gradients') over groups of `size` GPUs.
inline std::set<std::uint64_t> stage0_bytes(const sim::parallel::Plan& plan, sim::net::CollectiveOp op, int stage_gpus,
                                            std::size_t size) {
    std::set<std::uint64_t> out;
    for (const auto& t : plan.tasks) {
        if (t.kind != sim::parallel::TaskKind::collective || t.op != op ||
            t.stream == sim::parallel::StreamKind::dp_comm)
            continue;
        const auto& g = plan.groups[t.group].gpus;
        if (g.front() < stage_gpus && g.size() == size) out.insert(t.bytes.value);
    }
    return out;
}

}  // namespace expert_fold
