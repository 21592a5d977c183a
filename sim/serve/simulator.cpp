// A serving run: checks what cannot run, sizes the KV pool, draws the
// requests and hands them to the event loop (serving_loop.h).
#include "sim/serve/simulator.h"

#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/parallel/strategy.h"
#include "sim/serve/iteration_cost.h"
#include "sim/serve/kv_blocks.h"
#include "sim/serve/scheduler/i_scheduler.h"
#include "sim/serve/serving_loop.h"
#include "sim/workload/footprint.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

namespace sim::serve {

KvPool size_kv_pool(const config::ScenarioSpec& sc, const parallel::PlanBuild& build) {
    const auto& sv = *sc.workload.serving;
    KvPool p;
    p.memory = build.memory.breakdown;
    p.memory.kv_cache = 0;
    p.budget_bytes = sc.gpu.memory_capacity.as_double() * sv.gpu_memory_utilization;
    auto opt = parallel::operator_options(sc, build.strategy);
    opt.inference = true;
    p.bytes_per_token =
        static_cast<double>(sc.model.layers) * workload::layer_kv_bytes(sc.model, 1, 1, opt).as_double();
    p.block_size = sv.block_size;
    const double left = p.budget_bytes - p.memory.total();
    const double per_block = p.bytes_per_token * static_cast<double>(sv.block_size);
    p.blocks = left > 0 ? static_cast<std::int64_t>(std::floor(left / per_block)) : 0;
    if (p.blocks < 1)
        throw ConfigError(
            build.spec.where,
            fmt::format("strategy '{}': no memory left for the KV cache: weights and workspace take "
                        "{:.3g} GB of the {:.3g} GB the engine may use (gpu_memory_utilization {})",
                        build.spec.name, p.memory.total() / 1e9, p.budget_bytes / 1e9, sv.gpu_memory_utilization));
    return p;
}

namespace {

// One replica of `tp` GPUs: the scenario and strategy it is planned on, its
// plan (for the iteration plans), and its KV pool.
struct ReplicaModel {
    config::ScenarioSpec scenario;
    config::StrategySpec spec;
    parallel::PlanBuild base;
    KvPool pool;

    ReplicaModel(const config::ScenarioSpec& sc, const config::StrategySpec& strategy, int tp, const hw::CostModel& cm)
        : scenario(sc), spec(strategy) {
        scenario.gpus = tp;
        spec.tp = tp;
        spec.dp = 1;
        try {
            base = parallel::build_plan(scenario, spec, cm, parallel::BuildOptions{});
        } catch (const LimitError& e) {
            throw ConfigError(strategy.where, fmt::format("strategy '{}': {}", strategy.name, e.what()));
        }
        if (base.memory.oom)
            throw ConfigError(strategy.where,
                              fmt::format("strategy '{}' (tp {}): {}", strategy.name, tp, base.memory.explanation));
        if (base.strategy.pp != 1)
            throw ConfigError(strategy.where, fmt::format("strategy '{}': serving needs pp 1, not {}", strategy.name,
                                                          base.strategy.pp));
        pool = size_kv_pool(scenario, base);
    }
};

}  // namespace

ServeResult simulate_serving(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                             const ServeOptions& options) {
    if (!sc.workload.serving) throw InternalError("simulate_serving: the scenario has no serving block");
    const auto& sv = *sc.workload.serving;
    if (!sc.workload.flash_attention)
        throw ConfigError(sv.where, "serving needs a fused attention kernel (attention: naive is not supported)");
    // Replicas: groups of tp consecutive GPUs (disaggregated: prefill
    // replicas of the strategy's tp, then decode replicas of decode_tp). A
    // replica's plan is built on a scenario of its tp GPUs (its iteration
    // involves its own GPUs only, and every aligned group of a homogeneous
    // cluster is alike).
    const int tp = spec.tp;
    const int prefill = static_cast<int>(sv.prefill_replicas);
    const int dtp = sv.decode_tp > 0 ? static_cast<int>(sv.decode_tp) : tp;
    if (spec.pp > 1 || (prefill == 0 && sc.gpus % tp != 0))
        throw ConfigError(spec.where, fmt::format("strategy '{}': serving runs gpus / tp replicas of tp GPUs; pp {} "
                                                  "is not supported yet and tp {} must divide the {} GPUs",
                                                  spec.name, spec.pp, tp, sc.gpus));
    const std::int64_t left = static_cast<std::int64_t>(sc.gpus) - static_cast<std::int64_t>(prefill) * tp;
    if (prefill > 0 && left < dtp)
        throw ConfigError(sv.disaggregation_where,
                          fmt::format("{} prefill replicas leave no decode replica: strategy '{}' has tp {} on {} GPUs "
                                      "and decode replicas need {}",
                                      prefill, spec.name, tp, sc.gpus, dtp));
    if (prefill > 0 && left % dtp != 0)
        throw ConfigError(sv.disaggregation_where,
                          fmt::format("the {} GPUs left after {} prefill replicas of tp {} are not a multiple of "
                                      "decode_tp {}",
                                      left, prefill, tp, dtp));
    const int replicas = prefill > 0 ? prefill + static_cast<int>(left / dtp) : sc.gpus / tp;
    if (spec.dp > 0 && spec.dp != replicas)
        throw ConfigError(
            spec.where, fmt::format("strategy '{}': dp {} contradicts the {} replicas", spec.name, spec.dp, replicas));
    if (prefill > 0 && !sv.scheduler->iteration_level())
        throw ConfigError(
            sv.disaggregation_where,
            fmt::format("disaggregation needs an iteration-level scheduler; {} is not one", sv.scheduler->name()));
    if (prefill > 0 && sv.shared_prefix_tokens > 0)
        throw ConfigError(sv.prefix_where, "prefix caching is not supported with disaggregation yet");
    const auto cm = hw::make_cost_model(options.cost_model);
    const ReplicaModel main_model(sc, spec, tp, *cm);
    std::optional<ReplicaModel> decode_model;
    if (dtp != tp) decode_model.emplace(sc, spec, dtp, *cm);
    ServeResult res;
    res.strategy = spec.name;
    res.gpus = sc.gpus;
    res.router = std::string(sv.router->name());
    res.tp = tp;
    res.replicas = replicas;
    res.prefill_replicas = prefill;
    res.pool = main_model.pool;
    if (decode_model) {
        res.decode_tp = dtp;
        res.decode_pool = decode_model->pool;
    }

    const auto requests = make_requests(sv, sc.model.max_seq);
    // A request must fit every pool it may run on.
    const BlockManager pool(decode_model ? std::min(res.pool.blocks, res.decode_pool.blocks) : res.pool.blocks,
                            res.pool.block_size);
    if (sv.shared_prefix_tokens / res.pool.block_size >= pool.total())
        throw ConfigError(sv.prefix_where,
                          fmt::format("a shared prefix of {} tokens fills the KV pool of strategy "
                                      "'{}' ({} blocks of {})",
                                      sv.shared_prefix_tokens, spec.name, pool.total(), res.pool.block_size));
    res.records.resize(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) {
        const auto& r = requests[i];
        res.records[i].request = r;
        res.clamped += r.clamped ? 1 : 0;
        const std::int64_t need = pool.blocks_for(r.prompt + r.output);
        if (need > pool.total())
            throw ConfigError(sv.where, fmt::format("request {} ({} + {} tokens) needs {} KV blocks; the pool of "
                                                    "strategy '{}' holds {}",
                                                    i, r.prompt, r.output, need, spec.name, pool.total()));
        if (!sv.scheduler->chunks_prefill() && r.prompt > sv.max_tokens_per_iteration)
            throw ConfigError(sv.where, fmt::format("request {} has a {}-token prompt, more than "
                                                    "max_tokens_per_iteration {} (scheduler {} does not chunk)",
                                                    i, r.prompt, sv.max_tokens_per_iteration, sv.scheduler->name()));
    }

    IterationCost cost(main_model.scenario, main_model.base, *cm);
    std::optional<IterationCost> decode_cost;
    if (decode_model) decode_cost.emplace(decode_model->scenario, decode_model->base, *cm);
    const net::LinkClassSpec* pcie = sc.cluster.link(net::LinkClass::pcie);
    if (sv.swap_preemption && !pcie)
        throw ConfigError(sv.where, fmt::format("preemption: swap needs the cluster's PCIe link to host memory; "
                                                "cluster '{}' has none",
                                                sc.cluster.name));
    LoopSetup setup{sc, cost, tp, replicas, prefill, options.max_timeline, pcie};
    if (decode_cost) {
        setup.decode_cost = &*decode_cost;
        setup.decode_tp = dtp;
        setup.decode_pool = &res.decode_pool;
    }
    run_serving_loop(setup, requests, res);
    res.cache_hits = cost.hits() + (decode_cost ? decode_cost->hits() : 0);
    res.cache_misses = cost.misses() + (decode_cost ? decode_cost->misses() : 0);
    return res;
}

}  // namespace sim::serve
