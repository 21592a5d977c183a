// Expert tensor parallelism etp = tp under Megatron-Core's alltoall
// dispatcher (docs/moe.md sections 1a and 3): with sequence parallelism and
// ep > 1 each TP rank routes its own T / tp tokens, exchanges them over the
// EP group and all-gathers them over the expert-TP group (the TP group),
// worked by hand. Other dispatchers keep the gather before the router. Mixtral 8x7B on 16 GPUs, tp 2 x pp 4 x dp 2,
// ep 2, pp-last (stage 0 is GPUs 0-3, rank i = r + 2 d).
#include "expert_fold_support.h"
#include "sim/parallel/strategy.h"
#include "sim/workload/operators.h"

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim;

namespace {
constexpr std::uint64_t kMiB = 1024 * 1024;

// tp 2, etp 2, ep 2 with the given software stack ("" keeps the scenario's).
config::ScenarioSpec tp2(const std::string& software, bool sp = true) {
    std::vector<config::Override> ov{
        config::parse_override(std::string("strategies=[{name: f, tp: 2, pp: 4, dp: 2, sp: ") +
                               (sp ? "true" : "false") + ", zero: 1, placement: pp-last, ep: 2, etp: 2}]")};
    ov.push_back(config::parse_override("workload.global_batch=8"));
    if (!software.empty()) ov.push_back(config::parse_override("software={name: " + software + "}"));
    return config::load_scenario(expert_fold::scenario_path(), ov);
}

std::vector<workload::Operator> forward(const config::ScenarioSpec& sc) {
    const auto o = parallel::operator_options(sc, parallel::resolve_degrees(sc, sc.strategies.front()));
    return workload::layer_forward(sc.model, 0, 0, workload::PassShape{1, 4096, 4096}, o);
}

const workload::Operator& named(const std::vector<workload::Operator>& ops, const std::string& name) {
    for (const auto& op : ops)
        if (op.kernel.name == name) return op;
    FAIL("no " << name);
    return ops.front();
}

// The first op that waits for an all-to-all: the dispatch into the experts
// (the expert GEMM, or the alltoall dispatcher's sort by local expert before it).
const workload::Operator& into_experts(const std::vector<workload::Operator>& ops) {
    for (const auto& op : ops)
        if (op.ep_a2a_bytes.value > 0) return op;
    FAIL("no all-to-all");
    return ops.front();
}
}  // namespace

TEST_CASE(
    "etp = tp = 2, ep 2, alltoall dispatcher: T / 2 routed, half the exchange, a gather of the EP rank's tokens") {
    const auto fwd = forward(tp2("megatron-bridge"));
    // A rank routes its shard: T_r = 4096 / 2 = 2048 (the router's m).
    CHECK(named(fwd, "router").kernel.m == 2048);
    // The EP rank's 4 experts get the copies of the etp x ep = 4 ranks:
    // 4 x 2048 x 2 / 8 = 2048 tokens an expert, f_e / 2 each: the same GEMM
    // as the gather before the router gave (m 2048, n 2 x 14336 / 2).
    const auto& up = named(fwd, "grouped_expert_up");
    CHECK(up.kernel.m == 2048);
    CHECK(up.kernel.n == 14336);
    CHECK(up.kernel.batch == 4);
    // The exchange: the rank's 2048 x 2 copies, 4096 x 4096 x 2 bytes =
    // 32 MiB; the all-gather over the expert-TP (= TP) group outputs the EP
    // rank's 8192 copies, 8192 x 4096 x 2 = 64 MiB; the combine mirrors both.
    CHECK(into_experts(fwd).ep_a2a_bytes.value == 32 * kMiB);
    CHECK(into_experts(fwd).etp_gather_bytes.value == 64 * kMiB + 8192 * 4);  // and the gate weights, 4 bytes a copy
    const auto& combine = named(fwd, "moe_combine");
    CHECK(combine.ep_a2a_bytes.value == 32 * kMiB);
    CHECK(combine.etp_scatter_bytes.value == 64 * kMiB);
    CHECK(combine.tp_sync == workload::TpSync::none);
}

TEST_CASE("etp = tp = 2, ep 2: another dispatcher keeps the gather before the router") {
    // The scenario's own stack (moe_dispatcher auto): each rank routes the
    // gathered T = 4096 and exchanges 4096 x 2 copies, 8192 x 4096 x 2 =
    // 64 MiB, with no expert-TP collective. (The alltoall dispatcher without
    // sequence parallelism, which Megatron-Core runs in inference only:
    // test_moe_allgather.cpp.)
    for (const auto& sc : {tp2(""), tp2("", false)}) {
        const auto fwd = forward(sc);
        CHECK(named(fwd, "router").kernel.m == 4096);
        const auto& up = named(fwd, "grouped_expert_up");
        CHECK(up.kernel.m == 2048);
        CHECK(into_experts(fwd).ep_a2a_bytes.value == 64 * kMiB);
        CHECK(into_experts(fwd).etp_gather_bytes.value == 0);
        CHECK(named(fwd, "moe_combine").etp_scatter_bytes.value == 0);
    }
}

TEST_CASE("the plan: 32 MiB all-to-alls over {0, 2} and {1, 3}, 64 MiB gathers over the TP pairs") {
    const auto pb = expert_fold::build(tp2("megatron-bridge"), false);
    const auto a2a = expert_fold::stage0_groups(pb.plan, net::CollectiveOp::all_to_all, 4);
    CHECK(a2a == std::set<std::vector<int>>{{0, 2}, {1, 3}});
    CHECK(expert_fold::stage0_bytes(pb.plan, net::CollectiveOp::all_to_all, 4, 2).count(32 * kMiB) == 1);
    CHECK(expert_fold::stage0_bytes(pb.plan, net::CollectiveOp::all_to_all, 4, 2).count(64 * kMiB) == 0);
    const auto gathers = expert_fold::stage0_bytes(pb.plan, net::CollectiveOp::all_gather, 4, 2);
    CHECK(gathers.count(64 * kMiB + 8192 * 4) == 1);
    CHECK(expert_fold::stage0_bytes(pb.plan, net::CollectiveOp::reduce_scatter, 4, 2).count(64 * kMiB) == 1);
}

TEST_SUITE_END();
