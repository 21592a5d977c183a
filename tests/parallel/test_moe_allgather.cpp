// Megatron-Core's allgather token dispatcher (moe_dispatcher allgather,
// docs/moe.md section 3l) and etp = tp without sequence parallelism under
// both of Megatron-Core's dispatchers (section 1a), worked by hand. Mixtral
// 8x7B (E 8, top 2, h 4096, f_e 14336) on 16 GPUs, tp 2 x pp 4 x dp 2, ep 2,
// etp 2, pp-last (stage 0 is GPUs 0-3, rank i = r + 2 d); T = 4096 tokens a
// micro-batch, balanced routing.
#include "expert_fold_support.h"
#include "sim/config/software_loader.h"
#include "sim/core/error.h"
#include "sim/parallel/strategy.h"
#include "sim/workload/operators.h"
#include "tests/test_util.h"

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim;

namespace {
constexpr std::uint64_t kMiB = 1024 * 1024;

// Training, tp 2, etp 2, ep 2, sp on, with the run's dispatcher ("" keeps the scenario's stack).
config::ScenarioSpec mixtral(const std::string& dispatcher, const std::string& software = "") {
    std::vector<std::string> more{"workload.global_batch=8"};
    if (!dispatcher.empty()) more.push_back("workload.moe.dispatcher=" + dispatcher);
    if (!software.empty()) more.push_back("software={name: " + software + "}");
    return expert_fold::mixtral(2, 4, 2, 2, 2, more);
}

// Inference (a 4096-token prompt a DP replica), the same layout without sequence parallelism.
config::ScenarioSpec prefill(const std::string& dispatcher, const std::string& software = "") {
    std::vector<config::Override> ov{
        config::parse_override("strategies=[{name: f, tp: 2, pp: 4, dp: 2, placement: pp-last, ep: 2, etp: 2}]"),
        config::parse_override("workload={mode: inference, dtype: bf16, batch: 2, prompt_tokens: 4096, output_tokens: "
                               "1, moe: {routing: balanced, grouped_gemm: true, dispatcher: " +
                               dispatcher + "}}")};
    if (!software.empty()) ov.push_back(config::parse_override("software={name: " + software + "}"));
    return config::load_scenario(expert_fold::scenario_path(), ov);
}

std::vector<workload::Operator> forward(const config::ScenarioSpec& sc) {
    const auto o = parallel::operator_options(sc, parallel::resolve_degrees(sc, sc.strategies.front()));
    return workload::layer_forward(sc.model, 0, 0, workload::PassShape{1, 4096, 4096}, o);
}
std::vector<workload::Operator> backward(const config::ScenarioSpec& sc) {
    const auto o = parallel::operator_options(sc, parallel::resolve_degrees(sc, sc.strategies.front()));
    return workload::layer_backward(sc.model, 0, 0, workload::PassShape{1, 4096, 4096}, o, workload::Recompute::none);
}

const workload::Operator& named(const std::vector<workload::Operator>& ops, const std::string& name) {
    for (const auto& op : ops)
        if (op.kernel.name == name) return op;
    FAIL("no " << name);
    return ops.front();
}

std::uint64_t all_to_all_bytes(const std::vector<workload::Operator>& ops) {
    std::uint64_t sum = 0;
    for (const auto& op : ops) sum += op.ep_a2a_bytes.value + op.ep_probs_a2a_bytes.value;
    return sum;
}
}  // namespace

TEST_CASE("allgather dispatcher, sp: each rank routes T / 2, gathers 4 ranks' tokens, reduce-scatters their output") {
    const auto fwd = forward(mixtral("allgather"));
    // A rank routes its shard: 4096 / 2 = 2048 tokens (the router's m).
    CHECK(named(fwd, "router").kernel.m == 2048);
    CHECK(named(fwd, "router").tp_sync == workload::TpSync::none);  // no TP gather before it
    // The tp_ep group: etp x ep = 4 ranks, 4 x 2048 = 8192 gathered rows.
    // The routing map (1 byte) and gate weights (2) of every expert:
    // 8192 x 8 x 3 = 196 608 bytes; the tokens 8192 x 4096 x 2 = 64 MiB.
    const auto& permute = named(fwd, "moe_ag_permute");
    CHECK(permute.tpep_meta_gather_bytes.value == 196608);
    CHECK(permute.tpep_gather_bytes.value == 64 * kMiB);
    CHECK(permute.kernel.host_sync);  // tokens_per_expert.cpu()
    // An EP rank's 4 experts take 2 x 8192 x 2 / 8 = 4096 ... of the 8192
    // distinct rows' 16 384 copies, half: 2048 each, L = 8192 selected.
    // The selection reads L rows and the local map and weights (8192 x 4
    // x 3), writes L rows and their weights (8192 x 2).
    CHECK(permute.kernel.bytes_read.value == 64 * kMiB + 8192 * 4 * 3);
    CHECK(permute.kernel.bytes_written.value == 64 * kMiB + 8192 * 2);
    // The expert GEMMs: m 2048 a expert, n 2 x 14336 / etp 2, k 4096; down n 4096, k 7168.
    const auto& up = named(fwd, "grouped_expert_up");
    CHECK(up.kernel.m == 2048);
    CHECK(up.kernel.n == 14336);
    CHECK(up.kernel.k == 4096);
    CHECK(up.kernel.batch == 4);
    const auto& down = named(fwd, "grouped_expert_down");
    CHECK(down.kernel.n == 4096);
    CHECK(down.kernel.k == 7168);
    // The unpermutation writes every gathered row (64 MiB), which the
    // reduce-scatter over the 4 ranks takes; no all-to-all at all.
    const auto& unpermute = named(fwd, "moe_ag_unpermute");
    CHECK(unpermute.kernel.bytes_written.value == 64 * kMiB);
    CHECK(unpermute.tpep_scatter_bytes.value == 64 * kMiB);
    CHECK(unpermute.tp_sync == workload::TpSync::none);
    CHECK(all_to_all_bytes(fwd) == 0);
    // Backward: the output gradient's 64 MiB gathered, the tokens' and gate
    // weights' gradients 8192 x (4096 + 8) x 2 reduce-scattered.
    const auto bwd = backward(mixtral("allgather"));
    CHECK(named(bwd, "moe_ag_unpermute_bwd").tpep_gather_bytes.value == 64 * kMiB);
    CHECK(named(bwd, "moe_ag_permute_bwd").tpep_scatter_bytes.value == 8192ULL * (4096 + 8) * 2);
    CHECK(named(bwd, "router_dgrad").kernel.m == 2048);
    CHECK(all_to_all_bytes(bwd) == 0);
}

TEST_CASE("allgather dispatcher, the plan: gathers and reduce-scatters over stage 0's 4 GPUs, no all-to-all") {
    const auto pb = expert_fold::build(mixtral("allgather"), false);
    CHECK(expert_fold::stage0_groups(pb.plan, net::CollectiveOp::all_to_all, 4).empty());
    // Stage 0's ranks i = r + 2 d are (et, e) = (i % 2, i / 2), all f = 0: one group {0, 1, 2, 3}.
    std::set<std::vector<int>> fours;  // the TP pairs gather too (sequence parallelism)
    for (const auto& g : expert_fold::stage0_groups(pb.plan, net::CollectiveOp::all_gather, 4))
        if (g.size() == 4) fours.insert(g);
    CHECK(fours == std::set<std::vector<int>>{{0, 1, 2, 3}});
    const auto gathers = expert_fold::stage0_bytes(pb.plan, net::CollectiveOp::all_gather, 4, 4);
    CHECK(gathers == std::set<std::uint64_t>{196608, 64 * kMiB});
    const auto scatters = expert_fold::stage0_bytes(pb.plan, net::CollectiveOp::reduce_scatter, 4, 4);
    CHECK(scatters == std::set<std::uint64_t>{64 * kMiB, 8192ULL * (4096 + 8) * 2});
}

TEST_CASE("allgather dispatcher without sp (prefill): 2 copies of each token, each expert shard computes both") {
    const auto fwd = forward(prefill("allgather"));
    // Every TP rank routes all 4096 tokens; the 4 ranks gather 16 384 rows,
    // each token twice (its TP pair): 16 384 x 4096 x 2 = 128 MiB.
    CHECK(named(fwd, "router").kernel.m == 4096);
    const auto& permute = named(fwd, "moe_ag_permute");
    CHECK(permute.tpep_gather_bytes.value == 128 * kMiB);
    CHECK(permute.tpep_meta_gather_bytes.value == 16384 * 8 * 3);
    // 2048 distinct copies an expert, twice: m 4096 (one copy would be 2048).
    CHECK(named(fwd, "grouped_expert_up").kernel.m == 4096);
    CHECK(named(fwd, "moe_ag_unpermute").tpep_scatter_bytes.value == 128 * kMiB);
    CHECK(named(fwd, "moe_ag_unpermute").tp_sync == workload::TpSync::none);  // no TP all-reduce after
    // Random routing (section 2) sees the 8192 distinct tokens, not 16 384:
    // mean 8192 x 2 / 2 = 8192 copies an EP rank, v = 2 x 1/2 x 1/2 x 6/7 =
    // 0.4286, L_hot = 8192 + sqrt(8192 v) x sqrt(2) x 0.5642 = 8239.3, so
    // 8240 = 4 x 2060, twice: m 4120 (16 384 independent tokens would give
    // 16 450.9, m 4113).
    auto random = prefill("allgather");
    random.workload.moe.kind = workload::MoeRouting::Kind::random;
    CHECK(named(forward(random), "grouped_expert_up").kernel.m == 4120);
}

TEST_CASE("alltoall dispatcher, etp = tp = 2 without sp (prefill): the exchange, then a gather of 2 copies") {
    // Each TP rank routes all 4096 tokens and exchanges its 8192 copies
    // (64 MiB, as before); the expert-TP (= TP) pair then gathers the
    // other's identical copies: 16 384 rows, 128 MiB and 16 384 gate
    // weights; each expert shard computes 4096 tokens where one copy is 2048.
    const auto fwd = forward(prefill("alltoall", "megatron-bridge"));
    CHECK(named(fwd, "router").kernel.m == 4096);
    CHECK(named(fwd, "grouped_expert_up").kernel.m == 4096);
    CHECK(named(fwd, "grouped_expert_up").kernel.n == 14336);
    const workload::Operator* into = nullptr;
    for (const auto& op : fwd)
        if (op.ep_a2a_bytes.value > 0 && into == nullptr) into = &op;
    REQUIRE(into != nullptr);
    CHECK(into->ep_a2a_bytes.value == 64 * kMiB);
    CHECK(into->etp_gather_bytes.value == 128 * kMiB + 16384 * 4);
    CHECK(named(fwd, "moe_combine").etp_scatter_bytes.value == 128 * kMiB);
    CHECK(named(fwd, "moe_combine").tp_sync == workload::TpSync::none);
}

TEST_CASE("Megatron-Core's dispatchers refuse training with tp > 1 without sp; the allgather refuses the overlaps") {
    for (const std::string d : {"alltoall", "allgather"}) {
        auto sc = mixtral(d);
        sc.strategies.front().sp = false;
        CHECK_THROWS_WITH_AS(parallel::resolve_degrees(sc, sc.strategies.front()),
                             doctest::Contains("without sp: Megatron-Core's MoE layer refuses"), ConfigError);
    }
    auto sc = expert_fold::mixtral(2, 4, 2, 2, 2, {"workload.global_batch=8", "workload.moe.dispatcher=allgather"},
                                   ", overlap: {moe_a2a: true}, schedule: interleaved-1f1b, virtual_stages: 2");
    CHECK_THROWS_WITH_AS(parallel::resolve_degrees(sc, sc.strategies.front()),
                         doctest::Contains("overlap.moe_a2a overlaps the expert-parallel all-to-alls"), ConfigError);
}

TEST_CASE("moe_dispatcher allgather: a profile key, and a run's key; refused beside DeepEP's keys at file:line:col") {
    const std::string good =
        "name: megatron-lm\ndescription: \"test\"\nhost:\n"
        "  kernel_issue: {value: 7 us, source: \"a profile\"}\n"
        "  launch_queue_depth: {value: 64, source: \"a test\"}\n"
        "kernel_efficiency: {value: 0.9, fitted_on: \"points a, b\"}\n"
        "fuse_elementwise: {value: false, source: \"code\"}\n"
        "overlaps: {value: [grad_reduce, tp_comm], source: \"docs\"}\n";
    const auto load = [](const std::string& t) {
        return config::load_software_profile(config::load_string(t, "software/megatron-lm.yaml"), "megatron-lm");
    };
    const std::string allgather = "moe_dispatcher: {value: allgather, source: x}\n";
    CHECK(load(good + allgather).moe_dispatcher == "allgather");
    const auto error_of = [&](const std::string& t) {
        return parasim_test::config_error_of([&](const std::string& x) { load(x); }, t);
    };
    CHECK(error_of(good + "moe_a2a_decode: {value: deepep-ll, source: x}\n" + allgather)
              .find("software/megatron-lm.yaml:10:25: moe_dispatcher.value: allgather has no all-to-all") == 0);
    CHECK(error_of(good + "moe_fp8_dispatch: {value: true, source: x}\n" + allgather)
              .find("moe_fp8_dispatch is DeepEP's") != std::string::npos);
    // The run's key replaces the profile's; an unknown one is refused.
    CHECK(mixtral("allgather").profile.moe_dispatcher == "allgather");
    CHECK_THROWS_WITH_AS(mixtral("alltogether"), doctest::Contains("'alltogether' is not one of"), ConfigError);
    // Beside a stack that decodes with DeepEP's kernels: at the run's key.
    CHECK_THROWS_WITH_AS(mixtral("allgather", "sglang"),
                         doctest::Contains("workload.moe.dispatcher: allgather has no all-to-all"), ConfigError);
}

TEST_SUITE_END();
