// Expert tensor parallelism between 1 and tp (docs/moe.md sections 1 and
// 1a): tp 4 with etp 2, Megatron-Core's folding i = et + etp x (e + ep x f)
// worked by hand. The EP, expert-TP and EDP groups, the routed tokens and
// the expert GEMM shapes, the bytes of the all-to-all, the expert-TP
// all-gather and reduce-scatter, and inference (the memory: in
// test_expert_tensor_parallel.cpp). Mixtral 8x7B on
// 16 GPUs (two nodes of 8): tp 4 x dp 2 x pp 2, sequence parallel, pp-last
// (stage s holds GPUs 8s .. 8s + 7, rank i = r + 4 d inside it).
#include "expert_fold_support.h"
#include "sim/parallel/strategy.h"
#include "sim/workload/operators.h"

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim;
using expert_fold::build;
using expert_fold::Streams;

namespace {
// tp 4 x dp 2 x pp 2; 8 sequences a step (4 micro-batches a replica) keep the uncollapsed plans small.
config::ScenarioSpec tp4(int ep, int etp) {
    return expert_fold::mixtral(4, 2, 2, ep, etp, {"workload.global_batch=8"});
}

// Stage 0 is GPUs 0-7.
std::set<std::vector<int>> stage0(const parallel::Plan& plan, net::CollectiveOp op, bool gradients = false) {
    return expert_fold::stage0_groups(plan, op, 8, gradients ? Streams::gradients : Streams::others);
}
std::set<std::uint64_t> stage0_bytes(const parallel::Plan& plan, net::CollectiveOp op, std::size_t size) {
    return expert_fold::stage0_bytes(plan, op, 8, size);
}

workload::OperatorOptions options(const config::ScenarioSpec& sc) {
    return parallel::operator_options(sc, parallel::resolve_degrees(sc, sc.strategies.front()));
}

const workload::Operator& named(const std::vector<workload::Operator>& ops, const std::string& name) {
    for (const auto& op : ops)
        if (op.kernel.name == name) return op;
    FAIL("no " << name);
    return ops.front();
}

constexpr std::uint64_t kMiB = 1024 * 1024;
}  // namespace

TEST_CASE("tp 4, etp 2, ep 2: EP groups {0,2} {1,3}, expert-TP groups {0,1} {2,3}, EDP groups {0,4} {1,5}") {
    // i = r + 4 d = et + 2 (e + 2 f): rank 0 (et 0, e 0, f 0), 1 (1, 0, 0),
    // 2 (0, 1, 0), 3 (1, 1, 0), 4 (0, 0, 1) ... 7 (1, 1, 1). EP group: the
    // same (et, f); expert-TP group: the same (e, f); EDP: the same (et, e).
    const auto pb = build(tp4(2, 2), false);
    CHECK(stage0(pb.plan, net::CollectiveOp::all_to_all) == std::set<std::vector<int>>{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
    // All-gathers: the dense layers' sequence-parallel ones over the TP
    // groups, and the experts' over the expert-TP groups (the same for the
    // reduce-scatters).
    const std::set<std::vector<int>> tp_and_etp{{0, 1, 2, 3}, {4, 5, 6, 7}, {0, 1}, {2, 3}, {4, 5}, {6, 7}};
    CHECK(stage0(pb.plan, net::CollectiveOp::all_gather) == tp_and_etp);
    CHECK(stage0(pb.plan, net::CollectiveOp::reduce_scatter) == tp_and_etp);
    // Gradients: the dense part over each TP rank's DP group {r, r + 4}, the
    // experts over the EDP groups (et + 2 e, + 4): the same GPU sets here.
    CHECK(stage0(pb.plan, net::CollectiveOp::reduce_scatter, true) ==
          std::set<std::vector<int>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
}

TEST_CASE("tp 4, etp 2, ep 4: one EP group a TP-rank parity across both replicas, edp 1") {
    // i = et + 2 e (f = 0, etp x ep = 8 = the stage): EP groups {0, 2, 4, 6}
    // and {1, 3, 5, 7}, each spanning TP ranks of both replicas; the
    // expert-TP groups stay {0, 1} ... {6, 7}; edp = 4 x 2 / (2 x 4) = 1,
    // so the experts' gradients are not reduced (only the dense part's).
    const auto pb = build(tp4(4, 2), false);
    CHECK(stage0(pb.plan, net::CollectiveOp::all_to_all) == std::set<std::vector<int>>{{0, 2, 4, 6}, {1, 3, 5, 7}});
    CHECK(stage0(pb.plan, net::CollectiveOp::all_gather).count({2, 3}) == 1);
    CHECK(stage0(pb.plan, net::CollectiveOp::reduce_scatter, true) ==
          std::set<std::vector<int>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
    // Collapsed (one simulated GPU a stage) the groups keep their GPUs.
    const auto c = build(tp4(4, 2), true);
    CHECK(stage0(c.plan, net::CollectiveOp::all_to_all) == std::set<std::vector<int>>{{0, 2, 4, 6}});
    CHECK(stage0(c.plan, net::CollectiveOp::all_gather).count({0, 1}) == 1);
}

TEST_CASE("tp 4, etp 2, ep 2: T / 4 tokens routed, f_e / 2 GEMMs, the exchange and the expert-TP collectives") {
    const workload::PassShape s{1, 4096, 4096};
    const auto sc = tp4(2, 2);
    const auto o = options(sc);
    const auto fwd = workload::layer_forward(sc.model, 0, 0, s, o);
    // A rank routes its shard, T_r = 4096 / 4 = 1024 tokens (the router's GEMM: m = 1024).
    CHECK(named(fwd, "router").kernel.m == 1024);
    // The EP rank's experts receive from the etp x ep = 4 ranks of its EP
    // and expert-TP groups: 4 x 1024 x 2 copies / 8 experts = 1024 tokens an
    // expert, 4 local experts, each split over etp 2: n = 2 x 14336 / 2.
    const auto& up = named(fwd, "grouped_expert_up");
    CHECK(up.kernel.m == 1024);
    CHECK(up.kernel.batch == 4);
    CHECK(up.kernel.n == 14336);
    CHECK(up.kernel.k == 4096);
    // The same FLOPs a GPU as etp 1 (m 512, n 28672) and etp = tp = 4 (m 2048, n 7168).
    const auto up1 = named(workload::layer_forward(sc.model, 0, 0, s, options(tp4(2, 1))), "grouped_expert_up");
    const auto up4 = named(workload::layer_forward(sc.model, 0, 0, s, options(tp4(2, 4))), "grouped_expert_up");
    CHECK(up1.kernel.m == 512);
    CHECK(up1.kernel.n == 28672);
    CHECK(up4.kernel.m == 2048);
    CHECK(up4.kernel.n == 7168);
    CHECK(up.kernel.flops.value == doctest::Approx(up1.kernel.flops.value));
    CHECK(up.kernel.flops.value == doctest::Approx(up4.kernel.flops.value));
    // Forward: the dispatch all-to-all carries the rank's 1024 x 2 copies
    // (16 MiB at 4096 x 2 bytes), then the all-gather over the expert-TP
    // group outputs the 4 x 1024 tokens of the EP rank (32 MiB); the
    // combine's reduce-scatter takes the same 32 MiB before the all-to-all back.
    CHECK(up.ep_a2a_bytes.value == 16 * kMiB);
    CHECK(up.etp_gather_bytes.value == 32 * kMiB);
    const auto& combine = named(fwd, "moe_combine");
    CHECK(combine.ep_a2a_bytes.value == 16 * kMiB);
    CHECK(combine.etp_scatter_bytes.value == 32 * kMiB);
    // No TP collective on the routed path: the combined output is the rank's shard.
    CHECK(combine.tp_sync == workload::TpSync::none);
    // Backward: the mirror images (all-gather of the output gradients into
    // the experts, reduce-scatter of their input gradients out of them).
    const auto bwd = workload::layer_backward(sc.model, 0, 0, s, o, workload::Recompute::none);
    std::uint64_t gathers = 0, scatters = 0;
    for (const auto& op : bwd) {
        gathers += op.etp_gather_bytes.value;
        scatters += op.etp_scatter_bytes.value;
    }
    CHECK(gathers == 32 * kMiB);
    CHECK(scatters == 32 * kMiB);
    CHECK(named(bwd, "moe_dispatch_bwd").etp_scatter_bytes.value == 32 * kMiB);
    // etp 1 and etp = tp have no expert-TP collective.
    for (const int etp : {1, 4})
        for (const auto& op : workload::layer_forward(sc.model, 0, 0, s, options(tp4(2, etp)))) {
            CHECK(op.etp_gather_bytes.value == 0);
            CHECK(op.etp_scatter_bytes.value == 0);
        }
}

TEST_CASE("the plan issues them: 16 MiB all-to-alls over pairs, 32 MiB gathers and scatters over expert-TP pairs") {
    const auto pb = build(tp4(2, 2), false);
    // A micro-batch is one 4096-token sequence, as above; the EP groups and
    // the expert-TP groups both have 2 GPUs.
    CHECK(stage0_bytes(pb.plan, net::CollectiveOp::all_to_all, 2) == std::set<std::uint64_t>{16 * kMiB});
    CHECK(stage0_bytes(pb.plan, net::CollectiveOp::all_gather, 2) == std::set<std::uint64_t>{32 * kMiB});
    CHECK(stage0_bytes(pb.plan, net::CollectiveOp::reduce_scatter, 2) == std::set<std::uint64_t>{32 * kMiB});
}

TEST_CASE("the expert-TP gather and scatter run on the exchange's stream: ep-comm under overlap.moe_a2a") {
    // On tp_comm they would hold the other micro-batch's TP collectives of a
    // pair behind the all-to-all they wait for (docs/moe.md section 3e).
    const auto streams_of_pairs = [](const parallel::Plan& plan) {
        std::set<parallel::StreamKind> out;
        for (const auto& t : plan.tasks)
            if (t.kind == parallel::TaskKind::collective && plan.groups[t.group].gpus.size() == 2 &&
                (t.op == net::CollectiveOp::all_gather || t.op == net::CollectiveOp::reduce_scatter) &&
                t.stream != parallel::StreamKind::dp_comm)
                out.insert(t.stream);
        return out;
    };
    CHECK(streams_of_pairs(build(tp4(2, 2), true).plan) ==
          std::set<parallel::StreamKind>{parallel::StreamKind::tp_comm});
    const auto ov = expert_fold::mixtral(4, 2, 2, 2, 2, {"workload.global_batch=8"},
                                         ", schedule: interleaved-1f1b, virtual_stages: 2, overlap: {moe_a2a: true}");
    CHECK(streams_of_pairs(build(ov, true).plan) == std::set<parallel::StreamKind>{parallel::StreamKind::ep_comm});
}

TEST_CASE("inference under tp 4, etp 2: the same groups and collectives, no backward") {
    std::vector<config::Override> ov{
        config::parse_override("strategies=[{name: f, tp: 4, pp: 2, dp: 2, sp: true, placement: pp-last, ep: 2, "
                               "etp: 2}]"),
        config::parse_override("workload={mode: inference, dtype: bf16, batch: 4, prompt_tokens: 1024"
                               ", output_tokens: 4, moe: {routing: balanced, grouped_gemm: true}}")};
    const auto sc = config::load_scenario(expert_fold::scenario_path(), ov);
    const auto pb = build(sc, false);
    CHECK(stage0(pb.plan, net::CollectiveOp::all_to_all) == std::set<std::vector<int>>{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
    CHECK(stage0(pb.plan, net::CollectiveOp::all_gather).count({0, 1}) == 1);
    CHECK(stage0(pb.plan, net::CollectiveOp::reduce_scatter).count({6, 7}) == 1);
    // Prefill of one 1024-token prompt: T_r = 256, 4 x 256 x 2 / 8 = 256
    // tokens an expert, 4 local experts: the gather outputs 1024 x 4096 x 2.
    CHECK(stage0_bytes(pb.plan, net::CollectiveOp::all_gather, 2).count(8 * kMiB) == 1);
}

TEST_SUITE_END();
