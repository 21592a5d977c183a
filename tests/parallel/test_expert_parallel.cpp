// Expert parallelism in the plan: expert memory sharded over ep x edp, the
// all-to-alls as collectives over the EP group's GPUs, the experts'
// gradients reduced over the expert-data-parallel group, and a Zipf-skewed
// router making the iteration slower (docs/moe.md).
#include "sim/config/data_dir.h"
#include "sim/config/scenario.h"
#include "sim/exec/executor.h"
#include "sim/hw/cost_model.h"
#include "sim/parallel/builder.h"
#include "sim/parallel/strategy.h"
#include "sim/report/runner.h"

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim;

namespace {
const std::string kScenario = std::string(sim::config::data_dir()) + "/scenarios/moe-mixtral-8x7b-ep.yaml";

config::ScenarioSpec scenario(const std::vector<std::string>& sets) {
    std::vector<config::Override> ov;
    for (const auto& s : sets) ov.push_back(config::parse_override(s));
    auto sc = config::load_scenario(kScenario, ov);
    return sc;
}

parallel::PlanBuild build(const config::ScenarioSpec& sc, int strategy) {
    const auto cm = hw::make_cost_model("roofline");
    return parallel::build_plan(sc, sc.strategies.at(static_cast<std::size_t>(strategy)), *cm, {});
}

// Mixtral's experts in one pipeline stage of 16 layers: 16 x 8 x 3 x 4096 x 14336.
constexpr double kStageExpertParams = 16.0 * 8 * 3 * 4096 * 14336;
}  // namespace

TEST_CASE("expert memory: weights and gradients / ep, optimizer / (ep x dp / ep) under ZeRO-1") {
    // Strategy 2: pp 2, dp 8, ep 8, zero 1. Expert weights (bf16) 2 bytes x
    // params / 8; gradients the same; optimizer 12 bytes x params / 8, not
    // sharded further (dp / ep = 1 expert-data-parallel rank).
    const auto sc = scenario({});
    const auto b = build(sc, 1).memory.breakdown;
    CHECK(b.expert_weights == doctest::Approx(2.0 * kStageExpertParams / 8));
    CHECK(b.expert_gradients == doctest::Approx(2.0 * kStageExpertParams / 8));
    CHECK(b.expert_optimizer == doctest::Approx(12.0 * kStageExpertParams / 8));
    // ep 4: 2 experts a GPU, the optimizer state sharded over dp / ep = 2 more.
    const auto sc4 = scenario({"strategies[1].ep=4"});
    const auto b4 = build(sc4, 1).memory.breakdown;
    CHECK(b4.expert_weights == doctest::Approx(2.0 * kStageExpertParams / 4));
    CHECK(b4.expert_optimizer == doctest::Approx(12.0 * kStageExpertParams / 4 / 2));
    // The dense part is the same under both (sharded over dp = 8).
    CHECK(b.optimizer - b.expert_optimizer == doctest::Approx(b4.optimizer - b4.expert_optimizer));
}

TEST_CASE("the all-to-alls run over the 8 GPUs of the EP group; expert gradients over dp / ep ranks") {
    const auto sc = scenario({"strategies[1].ep=4"});
    const auto pb = build(sc, 1);
    const auto& plan = pb.plan;
    int a2a = 0;
    std::set<std::size_t> a2a_sizes, reduce_sizes;
    for (const auto& t : plan.tasks) {
        if (t.kind != parallel::TaskKind::collective) continue;
        const auto& g = plan.groups[t.group];
        if (t.op == net::CollectiveOp::all_to_all) {
            ++a2a;
            a2a_sizes.insert(g.gpus.size());
            // The routing a deduplicating all-to-all needs: Mixtral's top 2 of 8, no groups.
            CHECK(g.tokens == net::TokenRouting{2, 8, 0, 0});
            // 4096 tokens x top-2 x 4096 x 2 bytes (balanced: the straggler holds T x k).
            CHECK(t.bytes.value == 4096u * 2 * 4096 * 2);
        }
        if (t.op == net::CollectiveOp::reduce_scatter) reduce_sizes.insert(g.gpus.size());
    }
    // 32 micro-batches x 32 layers (both stages) x 6: dispatch and combine in
    // the forward, again in the recomputed forward (recompute: full), and in the backward.
    CHECK(a2a == 32 * 32 * 6);
    CHECK(a2a_sizes == std::set<std::size_t>{4});
    // Dense buckets over dp = 8, expert buckets over dp / ep = 2.
    CHECK(reduce_sizes == std::set<std::size_t>{2, 8});
}

TEST_CASE("FP8 dispatch needs both the fp8 dtype and a stack that dispatches in FP8") {
    const auto fp8 = [](const std::vector<std::string>& sets, const std::string& stack = "") {
        auto sc = scenario(sets);
        if (!stack.empty()) sc.profile = config::software_profile(stack);
        const auto rs = parallel::resolve_degrees(sc, sc.strategies.at(1));
        return parallel::operator_options(sc, rs).fp8_dispatch;
    };
    CHECK_FALSE(fp8({}));
    CHECK_FALSE(fp8({"workload.dtype=fp8"}));
    CHECK_FALSE(fp8({}, "hai-llm"));
    CHECK(fp8({"workload.dtype=fp8"}, "hai-llm"));
}

TEST_CASE("a stack whose dispatcher is a plain all-to-all hands no token routing to the EP groups") {
    // Megatron-Core's alltoall dispatcher (software profile moe_dispatcher:
    // alltoall, docs/moe.md section 3a) sends every routed copy point to
    // point: the EP group carries no routing, so auto cannot take deepep
    // (tests/net/test_deepep.cpp: never for a plain all-to-all). The bytes
    // are the same 4096 x 2 x 4096 x 2 either way.
    const auto routing_of = [](const std::string& dispatcher) {
        auto sc = scenario({"strategies[1].placement=tp-first"});  // the EP group spans both nodes
        sc.profile.moe_dispatcher = dispatcher;
        std::set<std::pair<int, std::size_t>> out;
        const auto pb = build(sc, 1);
        for (const auto& t : pb.plan.tasks)
            if (t.kind == parallel::TaskKind::collective && t.op == net::CollectiveOp::all_to_all)
                out.insert({pb.plan.groups[t.group].tokens.top_k, t.bytes.value});
        return out;
    };
    const std::size_t bytes = 4096u * 2 * 4096 * 2;
    CHECK(routing_of("auto") == std::set<std::pair<int, std::size_t>>{{2, bytes}});
    // Under the alltoall dispatcher the gate weights have an all-to-all of
    // their own (section 3g): 4096 x 2 x 4 bytes.
    CHECK(routing_of("alltoall") == std::set<std::pair<int, std::size_t>>{{0, bytes}, {0, 4096u * 2 * 4}});
}

TEST_CASE(
    "alltoall dispatcher: the gate weights' all-to-all after each exchange into the experts, dropless the counts'"
    " all-gather before each permutation, over the EP group") {
    // docs/moe.md section 3g. Strategy 1: pp 2, dp 8, ep 8 (one node an EP
    // group), 32 micro-batches, 16 MoE layers a stage, recompute: full (the
    // recomputed forward repeats the exchange). A rank routes 4096 x 2 token
    // copies: the gate weights' all-to-all carries 4096 x 2 x 4 = 32 768
    // bytes a rank, in the forward, the recomputed forward and the dispatch
    // backward (3 a layer and micro-batch); the counts' all-gather returns
    // 8 ranks x 8 experts x 8 bytes = 512 bytes, in the forward and the
    // recomputed forward (2). Each of the 2 simulated stages holds one EP
    // group: 2 x 32 x 16 x 3 and 2 x 32 x 16 x 2.
    const auto count = [](const std::string& dispatcher, const std::vector<std::string>& sets) {
        auto sc = scenario(sets);
        sc.profile.moe_dispatcher = dispatcher;
        const auto pb = build(sc, 1);
        std::pair<int, int> n{0, 0};
        for (const auto& t : pb.plan.tasks) {
            if (t.kind != parallel::TaskKind::collective) continue;
            const std::size_t ranks = pb.plan.groups[t.group].gpus.size();
            if (t.op == net::CollectiveOp::all_to_all && t.bytes.value == 32'768u && ranks == 8) ++n.first;
            if (t.op == net::CollectiveOp::all_gather && t.bytes.value == 512u && ranks == 8) ++n.second;
        }
        return n;
    };
    CHECK(count("alltoall", {}) == std::pair<int, int>{2 * 32 * 16 * 3, 2 * 32 * 16 * 2});
    // A capacity factor (drop and pad: the splits are known): no all-gather.
    CHECK(count("alltoall", {"workload.moe.capacity_factor=1.0"}) == std::pair<int, int>{2 * 32 * 16 * 3, 0});
    CHECK(count("auto", {}) == std::pair<int, int>{0, 0});
}

TEST_CASE("placement pp-last keeps an EP group of 8 in one node; tp-first spreads it over both with pp 2") {
    // Strategy 1: pp 2, dp 8, ep 8 on 2 nodes of 8. tp-first: GPU = d x 2 + s,
    // so stage 0's EP group is GPUs 0, 2, ..., 14 (both nodes). pp-last (the
    // scenario's): GPU = s x 8 + d, so it is GPUs 0-7 and stage 1's is 8-15
    // (docs/parallelism.md).
    const auto groups_of = [](const config::ScenarioSpec& sc) {
        std::set<std::vector<int>> out;
        const auto pb = build(sc, 1);
        for (const auto& t : pb.plan.tasks)
            if (t.kind == parallel::TaskKind::collective && t.op == net::CollectiveOp::all_to_all)
                out.insert(pb.plan.groups[t.group].gpus);
        return out;
    };
    CHECK(groups_of(scenario({"strategies[1].placement=tp-first"})) ==
          std::set<std::vector<int>>{{0, 2, 4, 6, 8, 10, 12, 14}, {1, 3, 5, 7, 9, 11, 13, 15}});
    CHECK(groups_of(scenario({})) ==
          std::set<std::vector<int>>{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}});
}

TEST_CASE("inference under ep 8: experts / 8 in memory, two all-to-alls a layer per pass, none without EP") {
    const auto sc =
        scenario({"workload={mode: inference, dtype: bf16, batch: 16, prompt_tokens: 256, output_tokens: 8}",
                  "strategies=[{name: ep8, pp: 2, dp: 8, ep: 8}, {name: dp8, pp: 2, dp: 8}]"});
    const auto ep = build(sc, 0), dp = build(sc, 1);
    // A stage holds 16 layers: 16 x 8 x 3 x 4096 x 14336 x 2 bytes / 8 experts a GPU.
    CHECK(ep.memory.breakdown.expert_weights == doctest::Approx(2.0 * kStageExpertParams / 8));
    CHECK(dp.memory.breakdown.expert_weights == doctest::Approx(2.0 * kStageExpertParams));
    const auto count = [](const parallel::Plan& plan) {
        int n = 0;
        for (const auto& t : plan.tasks)
            n += t.kind == parallel::TaskKind::collective && t.op == net::CollectiveOp::all_to_all;
        return n;
    };
    // Each pass (prefill, simulated decode steps) of each micro-batch runs
    // dispatch and combine in each of the 32 layers.
    CHECK(count(ep.plan) > 0);
    CHECK(count(ep.plan) % (2 * 32) == 0);
    CHECK(count(dp.plan) == 0);
}

TEST_CASE("a Zipf-skewed router makes the hot expert's GPU the straggler" * doctest::test_suite("e2e")) {
    const auto balanced =
        scenario({"strategies=[{name: ep8, pp: 2, dp: 8, ep: 8, zero: 1}]", "workload.global_batch=32"});
    const auto skewed = scenario({"strategies=[{name: ep8, pp: 2, dp: 8, ep: 8, zero: 1}]", "workload.global_batch=32",
                                  "workload.moe.routing=zipf(1.0)"});
    const auto a = report::run_strategy(balanced, balanced.strategies.front(), {});
    const auto b = report::run_strategy(skewed, skewed.strategies.front(), {});
    // zipf(1) over 8 experts gives expert 0 1 / H(8) = 36.8% of the copies:
    // 2.94x the balanced 12.5%. The experts are most of the compute, so the
    // iteration slows by well over 1.5x but less than 2.94x.
    REQUIRE(a.metrics.iteration_ms);
    REQUIRE(b.metrics.iteration_ms);
    const double ratio = *b.metrics.iteration_ms / *a.metrics.iteration_ms;
    CHECK(ratio > 1.5);
    CHECK(ratio < 2.94);
}

TEST_SUITE_END();
