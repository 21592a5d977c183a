// Parallelism: partitioner, pipeline bubbles, TP collectives, strategy checks.
#include "sim/config/data_dir.h"
#include "sim/config/scenario.h"
#include "sim/core/error.h"
#include "sim/exec/executor.h"
#include "sim/hw/cost_model.h"
#include "sim/net/topology.h"
#include "sim/parallel/builder.h"
#include "sim/parallel/partitioner.h"
#include "sim/report/metrics.h"
#include "sim/report/runner.h"

#include "tests/parallel/scenario_support.h"

#include <array>

#include <doctest/doctest.h>

#include <map>
#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim;
using parasim_test::kData;
using parasim_test::kScenarios;
using parasim_test::scenario;
using parasim_test::strategy;

TEST_CASE("the partitioner splits [1,1,1,1,4,4] over 2 GPUs as [1,1,1,1,4] | [4]") {
    const std::vector<double> cost{1, 1, 1, 1, 4, 4};
    const std::vector<double> footprint(6, 1.0);
    const auto parts = parallel::min_max_partition(cost, footprint, 2, 5.0);
    REQUIRE(parts);
    CHECK(*parts == std::vector<parallel::LayerRange>{{0, 5}, {5, 6}});
    // A capacity of 4 layers per GPU forbids that split: the best is then [1,1,1,1] | [4,4].
    const auto tight = parallel::min_max_partition(cost, footprint, 2, 4.0);
    REQUIRE(tight);
    CHECK(*tight == std::vector<parallel::LayerRange>{{0, 4}, {4, 6}});
    // Nothing fits a capacity of 2 layers per GPU on 2 GPUs.
    CHECK_FALSE(parallel::min_max_partition(cost, footprint, 2, 2.0));
}

TEST_CASE("the partitioner balances the slowest stage and keeps every stage non-empty") {
    const std::vector<double> cost{5, 1, 1, 1, 1, 1, 5};
    const std::vector<double> footprint(7, 0.0);
    const auto parts = parallel::min_max_partition(cost, footprint, 3, 1.0);
    REQUIRE(parts);
    CHECK(parts->size() == 3);
    double worst = 0;
    for (const auto& [a, b] : *parts) {
        CHECK(b > a);
        double sum = 0;
        for (int i = a; i < b; ++i) sum += cost[static_cast<std::size_t>(i)];
        worst = std::max(worst, sum);
    }
    CHECK(worst == doctest::Approx(5.0));
    const auto one_each = parallel::min_max_partition(cost, footprint, 7, 1.0);
    REQUIRE(one_each);
    for (int i = 0; i < 7; ++i) CHECK((*one_each)[static_cast<std::size_t>(i)] == parallel::LayerRange{i, i + 1});
}

TEST_CASE("a 4-stage GPipe pipeline of equal stages has a bubble of (p-1)/(m+p-1), and 1F1B the same") {
    for (const int m : {4, 8}) {
        auto sc = scenario(kData + "pipeline-4stage-training.yaml", {"workload.global_batch=" + std::to_string(m)});
        const double expected = 3.0 / (m + 3.0);
        double bubble_gpipe = 0;
        double act_gpipe = 0, act_1f1b = 0;
        for (const char* name : {"gpipe", "1f1b"}) {
            const auto cm = hw::make_cost_model("roofline");
            const auto build = parallel::build_plan(sc, strategy(sc, name), *cm, {});
            REQUIRE_FALSE(build.memory.oom);
            const net::Topology topo(sc.cluster, sc.gpus);
            const auto ex = exec::execute(build.plan, sc.gpu, topo, *cm);
            // The bubble is the idle share of the pipeline's forward/backward
            // span, [0, end of the last backward kernel on any stage]; the
            // optimizer step that follows is outside the pipeline.
            auto fwd_bwd = [&](const exec::Interval& iv) {
                const auto phase = build.plan.tasks[iv.task].phase;
                return phase == parallel::Phase::forward || phase == parallel::Phase::backward;
            };
            const auto compute = static_cast<std::size_t>(parallel::StreamKind::compute);
            Time end{};
            for (const auto& g : ex.gpus)
                for (const auto& iv : g.intervals[compute])
                    if (fwd_bwd(iv)) end = std::max(end, iv.end);
            double bubble = 0;
            for (const auto& g : ex.gpus) {
                double busy = 0;
                for (const auto& iv : g.intervals[compute])
                    if (fwd_bwd(iv)) busy += (iv.end - iv.start).seconds();
                bubble += 1.0 - busy / end.seconds();
            }
            bubble /= static_cast<double>(ex.gpus.size());
            INFO("schedule " << name << ", m = " << m << ": bubble " << bubble << ", expected " << expected);
            CHECK(bubble == doctest::Approx(expected).epsilon(0.01));
            const double act = build.memory.breakdown.activations;
            if (std::string(name) == "gpipe") {
                bubble_gpipe = bubble;
                act_gpipe = act;
            } else {
                CHECK(bubble == doctest::Approx(bubble_gpipe).epsilon(0.01));
                act_1f1b = act;
            }
        }
        // 1F1B holds at most p micro-batches of activations on the first stage; GPipe all m.
        CHECK(act_1f1b == doctest::Approx(act_gpipe * std::min(m, 4) / m));
        if (m > 4) CHECK(act_1f1b < act_gpipe);
    }
}

TEST_CASE("TP=2 on one layer puts two all-reduces in each forward pass") {
    const auto sc = scenario(kData + "one-layer-tp2.yaml");
    const auto cm = hw::make_cost_model("roofline");
    const auto build = parallel::build_plan(sc, sc.strategies.front(), *cm, {});
    int prefill_all_reduce = 0, decode_step0_all_reduce = 0;
    for (const auto& t : build.plan.tasks) {
        if (t.kind != parallel::TaskKind::collective || t.op != net::CollectiveOp::all_reduce) continue;
        // Count the layer's all-reduces: those after its row-parallel GEMMs
        // (the vocabulary-parallel embedding and head have syncs of their own).
        bool after_row_parallel = false;
        for (std::uint32_t i = 0; i < t.dep_count; ++i) {
            const auto& dep = build.plan.tasks[build.plan.deps[t.dep_begin + i]];
            if (dep.kind != parallel::TaskKind::kernel) continue;
            const auto& name = build.plan.kernels[dep.kernel].name;
            after_row_parallel = after_row_parallel || name == "out_proj" || name == "mlp_down";
        }
        if (!after_row_parallel) continue;
        CHECK(build.plan.groups[t.group].gpus == std::vector<int>{0, 1});
        if (t.phase == parallel::Phase::prefill) {
            CHECK(t.bytes.value == 4u * 512u * 4096u * 2u);
            ++prefill_all_reduce;
        }
        if (t.phase == parallel::Phase::decode && t.step == 0) ++decode_step0_all_reduce;
    }
    CHECK(prefill_all_reduce == 2);
    CHECK(decode_step0_all_reduce == 2);
}

TEST_CASE("a strategy whose tp x pp x dp is not the GPU count is refused with the numbers named") {
    const auto sc =
        scenario(kScenarios + "partitioning-16xh100-feasible.yaml", {"strategies[0].pp=3", "strategies[0].dp=1"});
    const auto cm = hw::make_cost_model("roofline");
    CHECK_THROWS_WITH_AS(parallel::build_plan(sc, sc.strategies.front(), *cm, {}),
                         doctest::Contains("tp=8 x pp=3 x dp=1 = 24, but the scenario uses 16 GPUs"), ConfigError);
}

TEST_CASE("the published partitioning setting is out of memory, with the KV cache named") {
    const auto sc = scenario(kScenarios + "partitioning-16xh100.yaml");
    for (const auto& s : sc.strategies) {
        const auto run = report::run_strategy(sc, s, {});
        CHECK_FALSE(run.metrics.feasible);
        CHECK(run.metrics.memory.oom);
        CHECK(run.metrics.memory.breakdown.kv_cache > run.metrics.memory.capacity.as_double());
        CHECK(run.metrics.note.find("KV cache") != std::string::npos);
        CHECK_FALSE(run.metrics.tokens_per_s.has_value());
    }
}

TEST_CASE("NVLink bandwidth matters to TP=8 and much less to a pipeline with one GPU per stage") {
    auto time_of = [](const std::string& name, const std::vector<std::string>& sets) {
        auto sc = scenario(kScenarios + "partitioning-16xh100-feasible.yaml", sets);
        const auto run = report::run_strategy(sc, strategy(sc, name), {});
        REQUIRE(run.metrics.feasible);
        return *run.metrics.inv_tps_ms;  // whole-run time per token
    };
    const double tp_fast = time_of("tp8-pp2", {});
    const double tp_slow = time_of("tp8-pp2", {"cluster.links.nvlink.bandwidth=45GB/s"});
    const double pp_fast = time_of("layerwise", {});
    const double pp_slow = time_of("layerwise", {"cluster.links.nvlink.bandwidth=45GB/s"});
    const double tp_change = tp_slow / tp_fast - 1, pp_change = pp_slow / pp_fast - 1;
    INFO("TP=8 slows by " << tp_change * 100 << "%, the pipeline by " << pp_change * 100 << "%");
    CHECK(tp_change > 0.05);
    CHECK(pp_change < tp_change / 5);
}

TEST_CASE("symmetry collapsing agrees with simulating every replica on a 64-GPU training case") {
    auto sc = scenario(kData + "pipeline-4stage-training.yaml",
                       {"cluster=dgx-h100-pod", "gpus=64", "strategies[1].tp=2", "strategies[1].dp=8",
                        "workload.global_batch=64", "strategies[1].microbatches=auto"});
    const auto& s = strategy(sc, "1f1b");
    report::RunOptions collapsed, full;
    full.collapse = false;
    const auto a = report::run_strategy(sc, s, collapsed);
    const auto b = report::run_strategy(sc, s, full);
    REQUIRE(a.metrics.feasible);
    REQUIRE(b.metrics.feasible);
    CHECK(*a.metrics.iteration_ms == doctest::Approx(*b.metrics.iteration_ms).epsilon(0.01));
}

TEST_CASE("an uncollapsed plan shares one kernel descriptor among the members running it") {
    auto sc = scenario(kData + "pipeline-4stage-training.yaml",
                       {"cluster=dgx-h100-pod", "gpus=64", "strategies[1].tp=2", "strategies[1].dp=8",
                        "workload.global_batch=64", "strategies[1].microbatches=auto"});
    const auto& s = strategy(sc, "1f1b");
    const auto cm = hw::make_cost_model("roofline");
    parallel::BuildOptions full;
    full.collapse = false;
    const auto plan = parallel::build_plan(sc, s, *cm, full).plan;
    std::size_t kernel_tasks = 0;
    std::vector<int> users(plan.kernels.size(), 0);
    for (const auto& t : plan.tasks)
        if (t.kind == parallel::TaskKind::kernel) {
            ++kernel_tasks;
            ++users[t.kernel];
        }
    // Each stage has tp x dp = 16 members: every descriptor serves all of them.
    CHECK(plan.kernels.size() * 16 == kernel_tasks);
    for (const int u : users) CHECK(u == 16);
}

TEST_CASE("rank placement: TP groups inside a node (tp-first) beat TP groups across nodes (pp-first)") {
    auto sc = scenario(kScenarios + "partitioning-16xh100-feasible.yaml");
    auto tp_first = strategy(sc, "tp8-pp2");
    auto pp_first = tp_first;
    pp_first.placement = parallel::Placement::pp_first;
    const auto cm = hw::make_cost_model("roofline");
    const auto plan = parallel::build_plan(sc, pp_first, *cm, {});
    // Under pp-first the first TP group is GPUs 0, 2, 4, ..., 14: both nodes.
    bool spans_nodes = false;
    for (const auto& g : plan.plan.groups)
        if (g.gpus.size() == 8 && g.gpus.front() == 0) spans_nodes = g.gpus.back() == 14;
    CHECK(spans_nodes);
    const auto a = report::run_strategy(sc, tp_first, {});
    const auto b = report::run_strategy(sc, pp_first, {});
    // TP all-reduces across the NICs instead of NVLink: clearly slower. The margin
    // follows the network efficiency (docs/network-model.md §6): 1.42x at NCCL's
    // path rate (0.9576 of a NIC), over 1.5x when flows between nodes ran at 0.76.
    CHECK(*b.metrics.ttft_ms > *a.metrics.ttft_ms * 1.3);
}

TEST_CASE("context parallelism: tp x cp x pp x dp must be the GPU count, and inference refuses cp") {
    const auto cm = hw::make_cost_model("roofline");
    const auto sc = scenario(kData + "cp-training.yaml", {"strategies[0].dp=2", "strategies[0].pp=1"});
    CHECK_THROWS_WITH_AS(parallel::build_plan(sc, strategy(sc, "cp2"), *cm, {}),
                         doctest::Contains("tp=1 x cp=2 x pp=1 x dp=2 = 4, but the scenario uses 2 GPUs"), ConfigError);
    const auto odd = scenario(kData + "cp-training.yaml", {"workload.seq_len=8190"});
    CHECK_THROWS_WITH_AS(parallel::build_plan(odd, strategy(odd, "cp2"), *cm, {}),
                         doctest::Contains("seq_len=8190 does not split into 2 x cp = 4 equal chunks"), ConfigError);
    const auto inf = scenario(kData + "one-layer-tp2.yaml", {"strategies[0].tp=1", "strategies[0].cp=2"});
    CHECK_THROWS_WITH_AS(parallel::build_plan(inf, inf.strategies.front(), *cm, {}),
                         doctest::Contains("one-layer-tp2.yaml:25:5:"), ConfigError);
    CHECK_THROWS_WITH_AS(parallel::build_plan(inf, inf.strategies.front(), *cm, {}),
                         doctest::Contains("context parallelism (cp=2) is modelled for training only"), ConfigError);
}

TEST_CASE("context parallelism: placement, groups over dp x cp, the K/V ring, memory") {
    const auto cm = hw::make_cost_model("roofline");
    // 8 GPUs: tp 2 x cp 2 x dp 2, ZeRO-1.
    const auto sc = scenario(kData + "cp-training.yaml",
                             {"gpus=8", "strategies[0].tp=2", "strategies[0].dp=2", "strategies[0].zero=1"});
    const auto build = parallel::build_plan(sc, strategy(sc, "cp2"), *cm, {});
    REQUIRE_FALSE(build.memory.oom);
    // tp-first: GPU = d x 4 + c x 2 + r. Collapsed: replica 0, TP rank 0, both CP ranks.
    CHECK(build.plan.simulated_gpus == std::vector<int>{0, 2});
    bool tp_c1 = false, dp_r0 = false;
    for (const auto& g : build.plan.groups) {
        tp_c1 = tp_c1 || g.gpus == std::vector<int>{2, 3};
        dp_r0 = dp_r0 || g.gpus == std::vector<int>{0, 2, 4, 6};  // gradients over dp x cp
    }
    CHECK(tp_c1);
    CHECK(dp_r0);
    // The ring: per layer and micro-batch, cp-1 = 1 forward step and 1 backward step per rank.
    // Ring chunk: 2 x 4096 tokens x (8 / 2) KV heads x 128 x 2 bytes.
    const std::uint64_t chunk = 2ull * 4096 * 4 * 128 * 2;
    int fwd = 0, bwd = 0;
    for (const auto& t : build.plan.tasks) {
        if (t.kind != parallel::TaskKind::transfer) continue;
        const int from = build.plan.simulated_gpus[t.gpu];
        CHECK(static_cast<int>(t.peer) == (from == 0 ? 2 : 0));
        if (t.phase == parallel::Phase::forward) {
            CHECK(t.bytes.value == chunk);
            ++fwd;
        } else {
            CHECK(t.bytes.value == 2 * chunk);
            ++bwd;
        }
    }
    const int microbatches = 4 / 2;      // global 4 over dp 2
    CHECK(fwd == 2 * 2 * microbatches);  // 2 layers x 2 ranks x micro-batches
    CHECK(bwd == fwd);
    // Memory: activations 1/cp of the dp-only strategy's; ZeRO-1 shards the optimizer over dp x cp = 4.
    const auto dp_only = scenario(kData + "cp-training.yaml", {"gpus=8", "strategies[1].tp=2", "strategies[1].dp=4",
                                                               "strategies[1].zero=1", "workload.global_batch=8"});
    const auto b2 = parallel::build_plan(dp_only, strategy(dp_only, "dp2"), *cm, {});
    CHECK(build.memory.breakdown.activations == doctest::Approx(b2.memory.breakdown.activations / 2));
    CHECK(build.memory.breakdown.optimizer == doctest::Approx(b2.memory.breakdown.optimizer));
    CHECK(build.memory.breakdown.weights == doctest::Approx(b2.memory.breakdown.weights));
    // pp-first: GPU = (c x tp + r) x pp + stage; tp 2 x cp 2 x pp 2 simulates (stage, cp) =
    // (0,0) (0,1) (1,0) (1,1) as GPUs 0, 4, 1, 5.
    auto pp_first = strategy(sc, "cp2");
    pp_first.placement = parallel::Placement::pp_first;
    pp_first.pp = 2;
    pp_first.dp = 1;
    const auto pf = parallel::build_plan(sc, pp_first, *cm, {});
    CHECK(pf.plan.simulated_gpus == std::vector<int>{0, 4, 1, 5});
}

TEST_CASE("context parallelism: a fast link costs about half a sequence per GPU, a slow one more") {
    auto iteration = [](const std::vector<std::string>& sets, const std::string& name) {
        auto sc = scenario(kData + "cp-training.yaml", sets);
        const auto run = report::run_strategy(sc, strategy(sc, name), {});
        REQUIRE(run.metrics.feasible);
        return *run.metrics.iteration_ms;
    };
    const std::vector<std::string> fast{"cluster.links.nvlink.bandwidth=100000GB/s",
                                        "cluster.links.nvlink.latency=1ns"};
    const double cp2 = iteration(fast, "cp2");
    // One GPU with half the sequence: the same token-linear work per GPU; the
    // cp rank's attention is twice that of half a sequence (s^2/4 against s^2/8 pairs).
    const double half = iteration({"gpus=1", "workload.seq_len=4096", "strategies[1].dp=1"}, "dp2");
    INFO("cp=2: " << cp2 << " ms, one GPU with half the sequence: " << half << " ms");
    CHECK(cp2 > half);
    CHECK(cp2 < half * 1.15);
    auto slow = fast;
    slow[0] = "cluster.links.nvlink.bandwidth=5GB/s";
    CHECK(iteration(slow, "cp2") > cp2 * 1.05);
}

TEST_CASE("uneven pipeline split: first and last ranks hold the given layers, short chunks at the ends") {
    const auto cm = hw::make_cost_model("roofline");
    // 8 layers over 4 stages, 1 on the first and the last: 1 | 3 | 3 | 1.
    const auto sc = scenario(kData + "pipeline-4stage-training.yaml",
                             {"strategies[1].first_stage_layers=1", "strategies[1].last_stage_layers=1"});
    const auto b = parallel::build_plan(sc, strategy(sc, "1f1b"), *cm, {});
    CHECK(b.strategy.stage_layers == std::vector<parallel::LayerRange>{{0, 1}, {1, 4}, {4, 7}, {7, 8}});
    // The middle stages now do 3 layers' work instead of 2: the pipeline is slower than the even split.
    auto iteration = [&](const config::ScenarioSpec& s) {
        const auto run = report::run_strategy(s, strategy(s, "1f1b"), {});
        REQUIRE(run.metrics.feasible);
        return *run.metrics.iteration_ms;
    };
    const auto even = scenario(kData + "pipeline-4stage-training.yaml");
    CHECK(iteration(sc) > 1.2 * iteration(even));
    // Interleaved, as Megatron-Core builds Llama 3 405B (one layer in the
    // first and the last chunk): 14 layers, pp 4 x 2 chunks, 3 on each end rank.
    const auto il =
        scenario(kData + "pipeline-4stage-training.yaml",
                 {"model.layers=14", "strategies[1].schedule=interleaved-1f1b", "strategies[1].virtual_stages=2",
                  "strategies[1].first_stage_layers=3", "strategies[1].last_stage_layers=3"});
    const auto bi = parallel::build_plan(il, strategy(il, "1f1b"), *cm, {});
    CHECK(bi.strategy.virtual_stage_layers ==
          std::vector<parallel::LayerRange>{{0, 1}, {1, 3}, {3, 5}, {5, 7}, {7, 9}, {9, 11}, {11, 13}, {13, 14}});
    // Too many layers on the ends, or a chunk left empty, is refused with the numbers.
    const auto over = scenario(kData + "pipeline-4stage-training.yaml",
                               {"strategies[1].first_stage_layers=5", "strategies[1].last_stage_layers=4"});
    CHECK_THROWS_WITH_AS(parallel::build_plan(over, strategy(over, "1f1b"), *cm, {}),
                         doctest::Contains("leave -1 of the model's 8 layers"), ConfigError);
    const auto thin = scenario(kData + "pipeline-4stage-training.yaml",
                               {"strategies[1].schedule=interleaved-1f1b", "strategies[1].virtual_stages=2",
                                "strategies[1].first_stage_layers=1"});
    CHECK_THROWS_WITH_AS(parallel::build_plan(thin, strategy(thin, "1f1b"), *cm, {}),
                         doctest::Contains("pipeline rank 0 holds 1 layers, fewer than its 2 virtual stages"),
                         ConfigError);
}

namespace {
struct Executed {
    parallel::PlanBuild build;
    exec::ExecResult ex;
};
Executed execute_strategy(const config::ScenarioSpec& sc, const config::StrategySpec& st) {
    const auto cm = hw::make_cost_model("roofline");
    Executed e{parallel::build_plan(sc, st, *cm, {}), {}};
    REQUIRE_FALSE(e.build.memory.oom);
    const net::Topology topo(sc.cluster, sc.gpus);
    e.ex = exec::execute(e.build.plan, sc.gpu, topo, *cm);
    return e;
}
}  // namespace

TEST_CASE("overlap.grad_reduce: gradient buckets during the backward, or all after it") {
    auto sc = scenario(kData + "cp-training.yaml");
    auto st = strategy(sc, "dp2");
    const auto on = execute_strategy(sc, st);
    st.overlap.grad_reduce = false;
    const auto off = execute_strategy(sc, st);
    // Per run: the end of the last backward kernel, and the earliest start of a gradient bucket.
    auto spans = [](const Executed& e) {
        Time last_bwd{}, first_bucket = Time::max();
        for (std::size_t i = 0; i < e.build.plan.tasks.size(); ++i) {
            const auto& t = e.build.plan.tasks[i];
            if (t.phase != parallel::Phase::backward) continue;
            if (t.kind == parallel::TaskKind::kernel) last_bwd = std::max(last_bwd, e.ex.task_end[i]);
            if (t.kind == parallel::TaskKind::collective && t.stream == parallel::StreamKind::dp_comm)
                first_bucket = std::min(first_bucket, e.ex.task_start[i]);
        }
        return std::make_pair(last_bwd, first_bucket);
    };
    const auto [on_bwd, on_bucket] = spans(on);
    const auto [off_bwd, off_bucket] = spans(off);
    CHECK(on_bucket < on_bwd);     // overlapped: a bucket starts while the backward still runs
    CHECK(off_bucket >= off_bwd);  // not: every bucket waits for the whole backward
    CHECK(off.ex.makespan > on.ex.makespan);
}

TEST_CASE("overlap.param_gather: the distributed optimizer's all-gather runs during the forward, not after the step") {
    auto sc = scenario(kData + "cp-training.yaml", {"strategies[1].zero=1"});
    auto st = strategy(sc, "dp2");
    const auto after = execute_strategy(sc, st);
    st.overlap.param_gather = true;
    const auto during = execute_strategy(sc, st);
    auto gathers = [](const Executed& e, parallel::Phase ph) {
        int n = 0;
        for (const auto& t : e.build.plan.tasks)
            n += t.kind == parallel::TaskKind::collective && t.op == net::CollectiveOp::all_gather && t.phase == ph;
        return n;
    };
    CHECK(gathers(after, parallel::Phase::optimizer) == 1);
    CHECK(gathers(after, parallel::Phase::forward) == 0);
    CHECK(gathers(during, parallel::Phase::optimizer) == 0);
    CHECK(gathers(during, parallel::Phase::forward) == 2 + 2);  // 2 layers + embedding + head buckets
    CHECK(during.ex.makespan < after.ex.makespan);
}

namespace {
// FLOPs of every kernel a strategy's plan runs.
double compute_flops(const Executed& e) {
    double f = 0;
    for (const auto& t : e.build.plan.tasks)
        if (t.kind == parallel::TaskKind::kernel) f += e.build.plan.kernels[t.kernel].flops.value;
    return f;
}
}  // namespace

TEST_CASE("overlap.tp_comm: a ring exchange of tp chunks pipelined with the GEMM's token chunks, same work") {
    auto sc = scenario(kData + "cp-training.yaml", {"gpus=4", "strategies[1].tp=2", "strategies[1].sp=true"});
    auto st = strategy(sc, "dp2");
    const auto plain = execute_strategy(sc, st);
    st.overlap.tp_comm = true;
    const auto ring = execute_strategy(sc, st);
    CHECK(compute_flops(ring) == doctest::Approx(compute_flops(plain)));
    // Forward of micro-batch 0, per layer (tp = 2, SP): the QKV and MLP-up
    // GEMMs gather their input, out-projection and MLP-down reduce-scatter
    // theirs; each becomes 2 chunks and 1 ring copy of one shard (T x h x 2
    // bytes / tp) to the next TP rank; only the embedding keeps its collective.
    const std::uint64_t shard = 8192ull * 4096 * 2 / 2;
    int chunks = 0, copies = 0, collectives = 0;
    for (const auto& t : ring.build.plan.tasks) {
        if (t.phase != parallel::Phase::forward || t.microbatch != 0) continue;
        if (t.kind == parallel::TaskKind::kernel) {
            const auto& name = ring.build.plan.kernels[t.kernel].name;
            chunks +=
                name == "out_proj_chunk" || name == "mlp_down_chunk" || name == "qkv_chunk" || name == "mlp_up_chunk";
        }
        if (t.kind == parallel::TaskKind::transfer && t.stream == parallel::StreamKind::p2p) {
            CHECK(t.bytes.value == shard);
            CHECK(static_cast<int>(t.peer) == 1);  // TP rank 0's ring neighbour
            ++copies;
        }
        collectives += t.kind == parallel::TaskKind::collective && t.stream == parallel::StreamKind::tp_comm &&
                       t.bytes.value == 2 * shard;
    }
    CHECK(chunks == 2 * 4 * 2);  // 2 layers x 4 GEMMs x 2 chunks
    CHECK(copies == 2 * 4 + 1);  // + the LM head GEMM's gather
    CHECK(collectives == 1);     // the embedding's reduce-scatter (a gather kernel, not a GEMM)
    CHECK(ring.ex.makespan < plain.ex.makespan);
    // Megatron allows it with sequence parallelism only.
    st.sp = false;
    const auto cm = hw::make_cost_model("roofline");
    CHECK_THROWS_WITH_AS(parallel::build_plan(sc, st, *cm, {}), doctest::Contains("overlap.tp_comm"), ConfigError);
}

TEST_CASE("overlap.tp_comm, pipeline: the row-parallel GEMMs in 4 output-feature chunks, each reduce-scattered") {
    // Transformer Engine's default for proj_fprop and fc2_fprop (software
    // profile tp_comm_row_fprop: pipeline): num_splits = 4 chunks whatever
    // tp is, every chunk over all 8192 tokens and 4096 / 4 = 1024 of the
    // 4096 output features; each chunk's output slice, 8192 x 1024 x 2
    // bytes, reduce-scattered over the TP group by kernels holding 16 SMs.
    auto sc = scenario(kData + "cp-training.yaml", {"gpus=4", "strategies[1].tp=2", "strategies[1].sp=true"});
    auto st = strategy(sc, "dp2");
    st.overlap.tp_comm = true;
    const auto ring = execute_strategy(sc, st);
    sc.profile.tp_comm_row_fprop_pipeline = true;
    sc.profile.tp_comm_pipeline_splits = 4;
    sc.profile.tp_comm_pipeline_sms = 16;
    const auto piped = execute_strategy(sc, st);
    CHECK(compute_flops(piped) == doctest::Approx(compute_flops(ring)));
    const std::uint64_t slice = 8192ull * 1024 * 2;
    int row_chunks = 0, column_chunks = 0, scatters = 0, copies = 0;
    for (const auto& t : piped.build.plan.tasks) {
        if (t.phase != parallel::Phase::forward || t.microbatch != 0) continue;
        if (t.kind == parallel::TaskKind::kernel) {
            const auto& k = piped.build.plan.kernels[t.kernel];
            if (k.name == "out_proj_chunk" || k.name == "mlp_down_chunk") {
                CHECK(k.m == 8192);
                CHECK(k.n == 1024);
                ++row_chunks;
            }
            column_chunks += k.name == "qkv_chunk" || k.name == "mlp_up_chunk";
        }
        if (t.kind == parallel::TaskKind::collective && t.op == net::CollectiveOp::reduce_scatter &&
            piped.build.plan.groups[t.group].sms == 16) {
            CHECK(t.bytes.value == slice);
            CHECK(piped.build.plan.groups[t.group].gpus.size() == 2);
            ++scatters;
        }
        copies += t.kind == parallel::TaskKind::transfer && t.stream == parallel::StreamKind::p2p;
    }
    CHECK(row_chunks == 2 * 2 * 4);     // 2 layers x 2 GEMMs x 4 chunks
    CHECK(scatters == 2 * 2 * 4);       // one reduce-scatter per chunk
    CHECK(column_chunks == 2 * 2 * 2);  // the gathers keep the ring exchange: tp = 2 token chunks
    CHECK(copies == 2 * 2 + 1);         // one ring copy per gathered GEMM, + the LM head's gather
}

TEST_CASE("overlap.tp_backward: the input gradient's TP collective runs beside the weight-gradient GEMM") {
    for (const bool sp : {false, true}) {
        CAPTURE(sp);
        auto sc = scenario(kData + "cp-training.yaml", {"gpus=4", "strategies[1].tp=2"});
        auto st = strategy(sc, "dp2");
        st.sp = sp;
        st.overlap.tp_backward = false;
        const auto serial = execute_strategy(sc, st);
        st.overlap.tp_backward = true;
        const auto async = execute_strategy(sc, st);
        // On GPU 0 in the backward: how long its TP collectives and its
        // compute kernels run at the same time.
        auto together = [](const Executed& e) {
            std::vector<std::pair<Time, Time>> comm, compute;
            for (std::size_t i = 0; i < e.build.plan.tasks.size(); ++i) {
                const auto& t = e.build.plan.tasks[i];
                if (t.phase != parallel::Phase::backward || t.gpu != 0) continue;
                if (t.kind == parallel::TaskKind::collective && t.stream == parallel::StreamKind::tp_comm)
                    comm.emplace_back(e.ex.task_start[i], e.ex.task_end[i]);
                if (t.kind == parallel::TaskKind::kernel) compute.emplace_back(e.ex.task_start[i], e.ex.task_end[i]);
            }
            Time both{};
            for (const auto& c : comm)
                for (const auto& k : compute) {
                    const Time a = std::max(c.first, k.first), b = std::min(c.second, k.second);
                    if (a < b) both += b - a;
                }
            return both;
        };
        CHECK(together(serial) == Time{});  // every GEMM waited for its collective
        CHECK(together(async) > Time{});
        CHECK(async.ex.makespan < serial.ex.makespan);
        // The same collectives, only issued earlier (plus one zero-byte join per layer chain end).
        auto collectives = [](const Executed& e) {
            int n = 0;
            for (const auto& t : e.build.plan.tasks) n += t.kind == parallel::TaskKind::collective;
            return n;
        };
        CHECK(collectives(async) == collectives(serial));
    }
}

TEST_SUITE_END();
