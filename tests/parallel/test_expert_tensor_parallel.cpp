// Expert tensor parallelism (etp, Megatron-Core's MoE parallel folding;
// docs/moe.md sections 1 and 1a): the EP and EDP groups formed from a
// stage's tp x dp ranks in Megatron-Core's order, the expert GEMMs split
// over etp instead of tp, the expert memory over etp x ep x edp, and the
// refusals. Hand-computed on Mixtral 8x7B (16 GPUs, two nodes of 8).
#include "expert_fold_support.h"
#include "sim/core/error.h"
#include "sim/parallel/strategy.h"
#include "sim/workload/operators.h"

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim;
using expert_fold::build;

namespace {
const std::string kScenario = expert_fold::scenario_path();

// Mixtral on 16 GPUs, tp 2 x dp 2 x pp 4 (stage s holds GPUs 4s .. 4s + 3,
// rank i = r + 2 d inside it), and the given ep and etp.
config::ScenarioSpec folded(int ep, int etp) { return expert_fold::mixtral(2, 4, 2, ep, etp); }

// The GPU sets of stage 0's (GPUs 0-3) collectives of kind `op`
// (reduce-scatters: the gradient ones, on the DP stream, not the
// sequence-parallel ones of the TP groups).
std::set<std::vector<int>> stage0_groups(const parallel::Plan& plan, net::CollectiveOp op) {
    return expert_fold::stage0_groups(
        plan, op, 4,
        op == net::CollectiveOp::reduce_scatter ? expert_fold::Streams::gradients : expert_fold::Streams::any);
}
}  // namespace

TEST_CASE("etp 1 under tp 2: the EP group spans the TP ranks (tp 2, dp 2, ep 4: one group of 4, edp 1)") {
    // Stage ranks i = r + 2 d = et + 1 x (e + 4 f): etp 1, so e = i, f = 0.
    // The EP group is the whole stage, GPUs 0-3; edp = 2 x 2 / (1 x 4) = 1,
    // so the experts' gradients are not reduced; the dense ones over dp 2.
    const auto pb = build(folded(4, 1), false);
    CHECK(stage0_groups(pb.plan, net::CollectiveOp::all_to_all) == std::set<std::vector<int>>{{0, 1, 2, 3}});
    CHECK(stage0_groups(pb.plan, net::CollectiveOp::reduce_scatter).count({0, 2}) == 1);  // dense, TP rank 0
    for (const auto& g : stage0_groups(pb.plan, net::CollectiveOp::reduce_scatter)) CHECK(g.size() == 2);
}

TEST_CASE("etp 1 under tp 2, ep 2: EP groups {0,1} {2,3} (a replica's TP ranks), EDP groups {0,2} {1,3}") {
    // i = e + 2 f: EP group f = 0 is ranks 0, 1 (replica 0's two TP ranks),
    // f = 1 is 2, 3; EDP group e = 0 is ranks 0, 2 and e = 1 is 1, 3.
    const auto pb = build(folded(2, 1), false);
    CHECK(stage0_groups(pb.plan, net::CollectiveOp::all_to_all) == std::set<std::vector<int>>{{0, 1}, {2, 3}});
    // Reduce-scatters: the dense part over each TP rank's DP group ({0, 2},
    // {1, 3}) and the experts over the EDP groups, the same GPU sets here.
    CHECK(stage0_groups(pb.plan, net::CollectiveOp::reduce_scatter) == std::set<std::vector<int>>{{0, 2}, {1, 3}});
    // With etp = tp = 2 (the default), ep 2 folds dp alone: EP group = the
    // two replicas of one TP rank, {0, 2} and {1, 3}.
    const auto dflt = build(folded(2, 2), false);
    CHECK(stage0_groups(dflt.plan, net::CollectiveOp::all_to_all) == std::set<std::vector<int>>{{0, 2}, {1, 3}});
    // Collapsed (one simulated GPU a stage) the EP group keeps its GPUs.
    CHECK(stage0_groups(build(folded(2, 1), true).plan, net::CollectiveOp::all_to_all) ==
          std::set<std::vector<int>>{{0, 1}});
}

TEST_CASE("expert GEMMs: whole experts on the rank's own tokens under etp 1, split by tp under etp = tp") {
    const auto sc1 = folded(2, 1), sc2 = folded(2, 2);
    const auto rs1 = parallel::resolve_degrees(sc1, sc1.strategies.front());
    const auto rs2 = parallel::resolve_degrees(sc2, sc2.strategies.front());
    const auto o1 = parallel::operator_options(sc1, rs1), o2 = parallel::operator_options(sc2, rs2);
    const workload::PassShape s{1, 4096, 4096};
    // The up projection of the grouped experts (SwiGLU: n = 2 f).
    const auto up = [&](const workload::OperatorOptions& o) {
        for (const auto& op : workload::layer_forward(sc1.model, 0, 0, s, o))
            if (op.kernel.name == "grouped_expert_up") return op;
        FAIL("no grouped_expert_up");
        return workload::Operator{};
    };
    // etp 1: a rank routes its 4096 / 2 = 2048 tokens; balanced, each of the
    // 8 experts gets 2 x 2048 x 2 / 8 = 1024 and a rank holds 4: m = 1024,
    // batch 4, n = 2 x 14336 (unsplit), k = 4096; 4 x 4096 x 2 bytes... the
    // all-to-all carries 2048 x 2 copies x 4096 x 2 bytes.
    const auto u1 = up(o1);
    CHECK(u1.kernel.m == 1024);
    CHECK(u1.kernel.batch == 4);
    CHECK(u1.kernel.n == 2 * 14336);
    CHECK(u1.kernel.k == 4096);
    // etp = tp = 2: every TP rank computes the gathered 4096 tokens, split
    // over tp: each expert gets 2 x 4096 x 2 / 8 = 2048, n = 14336.
    const auto u2 = up(o2);
    CHECK(u2.kernel.m == 2048);
    CHECK(u2.kernel.n == 14336);
    // The same FLOPs a GPU either way (half the tokens, whole experts).
    CHECK(u1.kernel.flops.value == doctest::Approx(u2.kernel.flops.value));
    std::set<std::uint64_t> a2a1;
    for (const auto& op : workload::layer_forward(sc1.model, 0, 0, s, o1))
        if (op.ep_a2a_bytes.value > 0) a2a1.insert(op.ep_a2a_bytes.value);
    CHECK(a2a1 == std::set<std::uint64_t>{2048u * 2 * 4096 * 2});
}

TEST_CASE(
    "expert memory over etp x ep x edp, ZeRO-1: weights and gradients over ep x etp, the optimizer also over edp") {
    // P: Mixtral's experts in one pipeline stage of 32 / pp layers,
    // (32 / pp) x 8 x 3 x 4096 x 14336; dp 2 throughout.
    struct Row {
        int tp, pp, ep, etp;
        double shards, edp;  // ep x etp, and tp x 2 / (ep x etp)
    };
    const Row rows[] = {
        {2, 4, 2, 1, 2, 2},  // 4 whole experts a GPU
        {2, 4, 2, 2, 4, 1},  // etp = tp: 4 experts split in 2
        {2, 4, 4, 1, 4, 1},  // 2 whole experts
        {4, 2, 2, 2, 4, 2},  // 1 < etp < tp: 4 experts split in 2, over 2 EDP ranks
        {4, 2, 4, 2, 8, 1},  // 2 experts split in 2
    };
    for (const Row& r : rows) {
        const int tp = r.tp, ep = r.ep, etp = r.etp;
        INFO("tp " << tp << ", ep " << ep << ", etp " << etp);
        const double params = 32.0 / r.pp * 8 * 3 * 4096 * 14336;
        const auto b = build(expert_fold::mixtral(r.tp, r.pp, 2, r.ep, r.etp), true).memory.breakdown;
        CHECK(b.expert_weights == doctest::Approx(2.0 * params / r.shards));
        CHECK(b.expert_gradients == doctest::Approx(2.0 * params / r.shards));
        CHECK(b.expert_optimizer == doctest::Approx(12.0 * params / r.shards / r.edp));
    }
    // The dense part does not depend on how the experts fold.
    const auto b1 = build(folded(2, 1), true).memory.breakdown, b2 = build(folded(2, 2), true).memory.breakdown;
    CHECK(b1.weights - b1.expert_weights == doctest::Approx(b2.weights - b2.expert_weights));
}

TEST_CASE("etp refusals: must divide tp, etp x ep must divide tp x dp x cp, no sp") {
    const auto why = [](const std::string& strategy) {
        const auto sc = config::load_scenario(kScenario, {config::parse_override("strategies=[" + strategy + "]")});
        return parallel::try_resolve_degrees(sc, sc.strategies.front()).why_not;
    };
    const std::string base = "{name: f, pp: 2, sp: true, ";
    CHECK(why(base + "tp: 2, dp: 4, ep: 2, etp: 1}").empty());
    CHECK(why(base + "tp: 4, dp: 2, ep: 2, etp: 3}") == "etp=3 does not divide tp=4");
    // 1 < etp < tp is Megatron-Core's too (test_expert_tp_partial.cpp); 2 x 4 does not divide 4 x 1 x 1.
    CHECK(why(base + "tp: 4, dp: 2, ep: 2, etp: 2}").empty());
    CHECK(why("{name: f, pp: 4, sp: true, tp: 4, dp: 1, ep: 4, etp: 2}") ==
          "etp x ep = 2 x 4 does not divide tp x dp x cp = 4 x 1 x 1 (the experts fold onto the ranks of a "
          "pipeline stage, as in Megatron-Core)");
    CHECK(why("{name: f, pp: 2, tp: 4, dp: 2, ep: 2, etp: 2}").find("needs sp: true") != std::string::npos);
    // 1 x 8 does not divide 2 x 2 x 1 (pp 4).
    CHECK(why("{name: f, pp: 4, sp: true, tp: 2, dp: 2, ep: 8, etp: 1}") ==
          "etp x ep = 1 x 8 does not divide tp x dp x cp = 2 x 2 x 1 (the experts fold onto the ranks of a "
          "pipeline stage, as in Megatron-Core)");
    CHECK(why("{name: f, pp: 2, tp: 2, dp: 4, ep: 2, etp: 1}").find("needs sp: true") != std::string::npos);
    // Without etp, ep 8 under tp 2 x dp 4 is refused as before (etp = tp).
    CHECK(why(base + "tp: 2, dp: 4, ep: 8}").find("does not divide dp x cp") != std::string::npos);
    // run refuses at the strategy's line (exit 2 in the CLI).
    const auto sc = config::load_scenario(
        kScenario, {config::parse_override("strategies=[{name: f, pp: 2, sp: true, tp: 4, dp: 2, ep: 2, etp: 3}]")});
    try {
        parallel::resolve_degrees(sc, sc.strategies.front());
        FAIL("accepted etp 3 under tp 4");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("etp=3 does not divide tp=4") != std::string::npos);
    }
}

TEST_SUITE_END();
