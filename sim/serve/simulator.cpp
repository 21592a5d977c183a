// A serving run: checks what cannot run, sizes the KV pool, draws the
// requests and hands them to the event loop (serving_loop.h).
#include "sim/serve/simulator.h"

#include "sim/core/checked.h"
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
#include <memory>
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
    double layer_bytes = workload::layer_kv_bytes(sc.model, 1, 1, opt).as_double();
    // A stack that pads each token's MLA cache entry to an alignment holds
    // the padding in its pool (vLLM 0.7: 1152 -> 1280 bytes a layer for
    // DeepSeek's 576 BF16 values; docs/moe.md section 7b).
    if (const double align = static_cast<double>(sc.profile.mla_kv_cache_align_bytes); align > 0 && sc.model.mla())
        layer_bytes = std::ceil(layer_bytes / align) * align;
    p.bytes_per_token = static_cast<double>(sc.model.layers) * layer_bytes;
    p.block_size = sv.block_size;
    const std::int64_t regions_per_layer = sc.model.is_mla() ? 1 : 2;
    p.regions_per_block = sc.model.layers * regions_per_layer;
    // vLLM's profile takes what it holds outside PyTorch's allocator (NCCL,
    // the custom all-reduce's buffers) off the budget with the weights and
    // the activation peak (docs/moe.md section 7b).
    p.non_torch_bytes = sc.profile.non_torch_memory_bytes;
    const double left = p.budget_bytes - p.non_torch_bytes - p.memory.total();
    const double per_block = p.bytes_per_token * static_cast<double>(sv.block_size);
    p.blocks = left > 0 ? static_cast<std::int64_t>(std::floor(left / per_block)) : 0;
    // Pipeline parallelism: a GPU of stage s holds the K/V of its stage's
    // layers only, and every stage holds the same blocks (one block table;
    // vLLM takes the minimum of the workers' block counts), so the stage
    // with the fewest blocks binds.
    const auto& rs = build.strategy;
    for (int s = 0; rs.pp > 1 && s < rs.pp; ++s) {
        const auto range = rs.stage_layers[static_cast<std::size_t>(s)];
        const hw::MemoryBreakdown m = parallel::stage_memory(sc, rs, s, rs.virtual_stage_layers);
        const double token_bytes = static_cast<double>(range.second - range.first) * layer_bytes;
        const double stage_left = p.budget_bytes - p.non_torch_bytes - m.total();
        const std::int64_t blocks =
            stage_left > 0 ? static_cast<std::int64_t>(std::floor(stage_left / (token_bytes * sv.block_size))) : 0;
        if (s == 0 || blocks < p.blocks) {
            p.blocks = blocks;
            p.memory = m;
            p.memory.kv_cache = 0;
            p.bytes_per_token = token_bytes;
            p.regions_per_block = (range.second - range.first) * regions_per_layer;
            p.binding_stage = s;
        }
    }
    if (p.blocks < 1)
        throw ConfigError(
            build.spec.where,
            fmt::format("strategy '{}': no memory left for the KV cache: weights and workspace take "
                        "{:.3g} GB (and {:.3g} GB outside the allocator) of the {:.3g} GB the engine may use "
                        "(gpu_memory_utilization {})",
                        build.spec.name, p.memory.total() / 1e9, p.non_torch_bytes / 1e9, p.budget_bytes / 1e9,
                        sv.gpu_memory_utilization));
    return p;
}

namespace {

// One replica of tp x pp GPUs: the scenario and strategy it is planned on,
// its plan (for the iteration plans), and its KV pool. With data-parallel
// attention (dp > 1) the plan is the whole engine's, dp GPUs of one
// attention rank each and the experts over all of them; the pool is one
// rank's (each rank holds its own requests' cache).
struct ReplicaModel {
    config::ScenarioSpec scenario;
    config::StrategySpec spec;
    parallel::PlanBuild base;
    KvPool pool;

    ReplicaModel(const config::ScenarioSpec& sc, const config::StrategySpec& strategy, int tp, int pp,
                 const hw::CostModel& cm, int dp = 1)
        : scenario(sc), spec(strategy) {
        scenario.gpus = tp * pp * dp;
        // The plan's memory check sizes one sequence a rank; the KV pool is
        // sized afterwards from what is left.
        scenario.workload.batch = std::max<std::int64_t>(scenario.workload.batch, dp);
        spec.tp = tp;
        spec.pp = pp;
        spec.dp = dp;
        try {
            base = parallel::build_plan(scenario, spec, cm, parallel::BuildOptions{});
        } catch (const LimitError& e) {
            throw ConfigError(strategy.where, fmt::format("strategy '{}': {}", strategy.name, e.what()));
        }
        if (base.memory.oom)
            throw ConfigError(strategy.where,
                              fmt::format("strategy '{}' (tp {}): {}", strategy.name, tp, base.memory.explanation));
        if (base.strategy.pp != pp || base.strategy.virtual_stage_layers.size() != static_cast<std::size_t>(pp))
            throw ConfigError(strategy.where, fmt::format("strategy '{}': serving runs one layer range per pipeline "
                                                          "stage (virtual_stages 1)",
                                                          strategy.name));
        pool = size_kv_pool(scenario, base);
    }
};

}  // namespace

namespace {

ServeResult simulate(const config::ScenarioSpec& sc, const config::StrategySpec& spec, const ServeOptions& options) {
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
    const int pp = std::max(spec.pp, 1);
    const int prefill = static_cast<int>(sv.prefill_replicas);
    // Data-parallel attention: engines of `engine_dp` attention ranks (the
    // strategy's dp, or every GPU), one rank of tp GPUs; the other rules
    // (pp 1, ep = tp x dp) are the strategy's (parallel::try_resolve_degrees).
    const int engine_dp = !spec.attention_dp ? 1 : spec.dp > 0 ? spec.dp : sc.gpus / std::max(tp, 1);
    // Disaggregated, the decode pool is replicas of decode_tp GPUs or, with
    // decode_dp, lockstep engines of decode_dp ranks of one GPU each.
    const int ddp = static_cast<int>(sv.decode_dp);
    const int dtp = ddp > 0 ? 1 : sv.decode_tp > 0 ? static_cast<int>(sv.decode_tp) : tp;
    if (spec.attention_dp) {
        if (sc.gpus % (std::int64_t{engine_dp} * tp) != 0 && prefill == 0)
            throw ConfigError(spec.where,
                              fmt::format("strategy '{}': attention_dp engines of dp {} x tp {} GPUs do not "
                                          "divide the {} GPUs",
                                          spec.name, engine_dp, tp, sc.gpus));
        if (prefill > 0 && spec.dp <= 0)
            throw ConfigError(spec.where, fmt::format("strategy '{}': disaggregated with attention_dp, the prefill "
                                                      "engines' dp must be given (a number, not auto)",
                                                      spec.name));
        if (prefill > 0 && tp > 1)
            throw ConfigError(spec.where,
                              fmt::format("strategy '{}': disaggregated with attention_dp and tp {} (attention "
                                          "TP inside a rank) is not modelled: the KV flows go rank to rank, "
                                          "one GPU each",
                                          spec.name, tp));
    }
    if (ddp > 0 && sc.model.experts == 0)
        throw ConfigError(sv.disaggregation_where,
                          fmt::format("decode_dp: model '{}' is dense; data-parallel attention engines meet only in "
                                      "the MoE layers' all-to-alls",
                                      sc.model.name));
    if (pp == 1 && prefill == 0 && sc.gpus % tp != 0)
        throw ConfigError(spec.where, fmt::format("strategy '{}': serving runs gpus / tp replicas of tp GPUs; pp {} "
                                                  "is not supported yet and tp {} must divide the {} GPUs",
                                                  spec.name, spec.pp, tp, sc.gpus));
    if (pp > 1) {
        // Pipeline parallelism (docs/serving.md, "Pipeline parallelism"):
        // replicas of tp x pp GPUs, colocated, iteration-level scheduling.
        const auto group = checked_mul(static_cast<std::int64_t>(tp), static_cast<std::int64_t>(pp));
        if (!group || *group > sc.gpus || sc.gpus % *group != 0)
            throw ConfigError(spec.where, fmt::format("strategy '{}': serving runs gpus / (tp x pp) replicas; tp {} "
                                                      "x pp {} does not divide the {} GPUs",
                                                      spec.name, tp, pp, sc.gpus));
        if (prefill > 0) throw ConfigError(sv.disaggregation_where, "disaggregation with pp > 1 is not supported yet");
        if (sv.swap_preemption) throw ConfigError(sv.where, "preemption: swap with pp > 1 is not supported yet");
        if (sv.async_scheduling) throw ConfigError(sv.async_where, "async_scheduling with pp > 1 is not supported yet");
        if (!sv.scheduler->iteration_level())
            throw ConfigError(sv.where, fmt::format("pp > 1 needs an iteration-level scheduler (pp batches in "
                                                    "flight); {} is not one",
                                                    sv.scheduler->name()));
    }
    // GPUs of one prefill replica (an engine under attention_dp) and of one
    // decode replica or engine; the loop's replicas are the ranks of an
    // engine, one GPU each.
    const std::int64_t prefill_group = spec.attention_dp ? engine_dp : tp;
    const std::int64_t decode_group = ddp > 0 ? ddp : dtp;
    const auto prefill_gpus = checked_mul(static_cast<std::int64_t>(prefill), prefill_group);
    if (!prefill_gpus || *prefill_gpus > sc.gpus)
        throw ConfigError(sv.disaggregation_where,
                          fmt::format("{} prefill replicas of {} GPUs (strategy '{}') need more than the {} GPUs",
                                      prefill, prefill_group, spec.name, sc.gpus));
    const std::int64_t left = static_cast<std::int64_t>(sc.gpus) - *prefill_gpus;
    if (prefill > 0 && left < decode_group)
        throw ConfigError(sv.disaggregation_where,
                          fmt::format("{} prefill replicas leave no decode replica: strategy '{}' takes {} GPUs a "
                                      "replica of the {} GPUs and decode replicas need {}",
                                      prefill, spec.name, prefill_group, sc.gpus, decode_group));
    if (prefill > 0 && left % decode_group != 0)
        throw ConfigError(sv.disaggregation_where,
                          fmt::format("the {} GPUs left after {} prefill replicas of {} GPUs are not a multiple of "
                                      "the decode replicas' {} ({})",
                                      left, prefill, prefill_group, decode_group, ddp > 0 ? "decode_dp" : "decode_tp"));
    if (prefill == 0 && ddp > 0)
        throw InternalError("decode_dp without prefill_replicas");  // the reader requires prefill_replicas
    const int prefill_units = static_cast<int>(spec.attention_dp ? *prefill_gpus : prefill);
    const int replicas =
        prefill > 0 ? prefill_units + static_cast<int>(ddp > 0 ? left : left / dtp) : sc.gpus / (tp * pp);
    if (spec.dp > 0 && spec.dp != replicas && !spec.attention_dp)
        throw ConfigError(
            spec.where, fmt::format("strategy '{}': dp {} contradicts the {} replicas", spec.name, spec.dp, replicas));
    if (prefill > 0 && !sv.scheduler->iteration_level())
        throw ConfigError(
            sv.disaggregation_where,
            fmt::format("disaggregation needs an iteration-level scheduler; {} is not one", sv.scheduler->name()));
    if (prefill > 0 && sv.shared_prefix_tokens > 0)
        throw ConfigError(sv.prefix_where, "prefix caching is not supported with disaggregation yet");
    if (sv.prefilled && pp > 1) throw ConfigError(sv.prefilled_where, "prefilled with pp > 1 is not supported yet");
    if (sv.prefilled && !sv.scheduler->iteration_level())
        throw ConfigError(sv.prefilled_where, fmt::format("prefilled requests join a running batch: they need an "
                                                          "iteration-level scheduler; {} is not one",
                                                          sv.scheduler->name()));
    const auto cm = hw::make_cost_model(options.cost_model);
    const ReplicaModel main_model(sc, spec, tp, pp, *cm, engine_dp);
    std::optional<ReplicaModel> decode_model;
    if (prefill > 0 && (ddp > 0 || dtp != tp || spec.attention_dp)) {
        // The decode pool's own layout: engines of ddp ranks (tp 1, dp = ep =
        // ddp, attention_dp), or tensor-parallel replicas of dtp GPUs with the
        // experts under their TP.
        config::StrategySpec dspec = spec;
        dspec.attention_dp = ddp > 0;
        dspec.ep = ddp > 0 ? ddp : 1;
        // What cannot be formed here comes from decode_dp / decode_tp, not
        // from the strategy as written (its ep is the prefill pool's): the
        // message points at the disaggregation and says which pool.
        try {
            decode_model.emplace(sc, dspec, dtp, 1, *cm, ddp > 0 ? ddp : 1);
        } catch (const ConfigError& e) {
            const std::string what = e.what(), prefix = e.where().to_string() + ": ";
            throw ConfigError(
                sv.disaggregation_where,
                fmt::format("the decode pool ({}) cannot be formed: {}",
                            ddp > 0 ? fmt::format("engines of decode_dp {}: tp 1, dp = ep = {}", ddp, ddp)
                                    : fmt::format("replicas of decode_tp {}", dtp),
                            what.compare(0, prefix.size(), prefix) == 0 ? what.substr(prefix.size()) : what));
        }
    }
    ServeResult res;
    res.strategy = spec.name;
    res.gpus = sc.gpus;
    res.router = std::string(sv.router->name());
    res.tp = tp;
    res.pp = pp;
    res.replicas = replicas;
    res.prefill_replicas = prefill > 0 ? prefill_units : 0;
    res.pool = main_model.pool;
    if (decode_model) {
        res.decode_tp = dtp;
        res.decode_dp = ddp;
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
        if (!sv.prefilled && !sv.scheduler->chunks_prefill() && r.prompt > sv.max_tokens_per_iteration)
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
    LoopSetup setup{sc, cost, tp, replicas, res.prefill_replicas, options.max_timeline, pcie};
    setup.lockstep = engine_dp;
    setup.decode_lockstep = ddp > 0 ? ddp : 1;
    setup.prefilled = sv.prefilled;
    res.attention_dp = spec.attention_dp ? engine_dp : 0;
    // pp > 1: each stage's part of an iteration is timed alone (its own
    // cache); the activations cross between stages as flows in the loop.
    std::vector<std::unique_ptr<IterationCost>> stage_costs;
    if (pp > 1) {
        setup.pp = pp;
        setup.placement = main_model.spec.placement;
        auto opt = parallel::operator_options(main_model.scenario, main_model.base.strategy);
        opt.inference = true;
        const double boundary =
            workload::boundary_activation_bytes(sc.model, workload::PassShape{1, 1, 2}, opt).as_double();
        setup.boundary_bytes_per_token = opt.sequence_parallel ? boundary : boundary / tp;
        for (int s = 0; s < pp; ++s) {
            stage_costs.push_back(std::make_unique<IterationCost>(main_model.scenario, main_model.base, *cm, s));
            setup.stage_costs.push_back(stage_costs.back().get());
        }
    }
    if (decode_cost) {
        setup.decode_cost = &*decode_cost;
        setup.decode_tp = dtp;
        setup.decode_pool = &res.decode_pool;
    }
    run_serving_loop(setup, requests, res);
    res.cache_hits = cost.hits() + (decode_cost ? decode_cost->hits() : 0);
    res.cache_misses = cost.misses() + (decode_cost ? decode_cost->misses() : 0);
    for (const auto& c : stage_costs) {
        res.cache_hits += c->hits();
        res.cache_misses += c->misses();
    }
    return res;
}

}  // namespace

ServeResult simulate_serving(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                             const ServeOptions& options) {
    try {
        return simulate(sc, spec, options);
    } catch (const ModelError& e) {
        // What the inputs make impossible to simulate (a limit, a duration
        // past the clock's 213 days): point at the strategy, as `run` does.
        throw ConfigError(spec.where, fmt::format("strategy '{}': {}", spec.name, e.what()));
    }
}

}  // namespace sim::serve
