// overlap.two_batch in decode (docs/moe.md section 8a, "The decode order"):
// SGLang's five stages a MoE layer, half A two stages ahead, each exchange
// issued at its `_a` operation and waited for at its `_b`. The same decode
// halves built in the prefill order (the alternation at the all-to-alls,
// which decode ran before) and in the decode order, every kernel K and every
// exchange A, give step times counted by hand from which kernels sit
// between an exchange's issue and its wait.
#include "sim/config/scenario.h"
#include "sim/core/error.h"
#include "sim/exec/executor.h"
#include "sim/net/topology.h"
#include "sim/parallel/builder.h"
#include "sim/parallel/emit_two_batch.h"
#include "sim/parallel/emitter.h"
#include "sim/parallel/strategy.h"

#include "tests/parallel/overlap_toy.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;

namespace {

// Mixtral with 2 layers (both MoE) on 8 H100 of one node, dp 8 = ep 8, no
// software profile: no SMs held, every exchange at its rate alone.
// `shared`: DeepSeek's one shared expert a layer added.
config::ScenarioSpec toy(bool shared = false) {
    const auto path =
        std::filesystem::temp_directory_path() / ("parasim-tbo-decode-" + std::to_string(::getpid()) + ".yaml");
    std::ofstream(path)
        << "name: tbo-decode-toy\ncluster: dgx-h100-x2\ngpus: 8\nmodel: mixtral-8x7b\n"
           "workload:\n  mode: inference\n  dtype: bf16\n  batch: 32\n  prompt_tokens: 128\n"
           "  output_tokens: 1\n  decode_steps_simulated: 0\n"
           "  moe: {routing: balanced, grouped_gemm: true}\n"
           "strategies:\n  - name: ep\n    pp: 1\n    dp: 8\n    ep: 8\n    overlap: {two_batch: true}\n";
    std::vector<config::Override> o{config::parse_override("model.layers=2")};
    if (shared) o.push_back(config::parse_override("model.moe.shared_experts=1"));
    auto sc = config::load_scenario(path.string(), o);
    std::filesystem::remove(path);
    return sc;
}

struct Step {
    std::uint64_t makespan = 0;
    std::vector<std::uint64_t> a2a;  // the exchanges' durations, in plan order
    std::size_t kernels = 0;
};

// A decode step of two halves of 2 sequences (context 300) through both MoE
// layers, built by emit_two_halves in `order`'s stage order, every kernel `k`.
Step two_halves(const config::ScenarioSpec& sc, parallel::Phase order, Time k) {
    const parasim_test::ConstantCost cm(k);
    const auto base = parallel::build_plan(sc, sc.strategies.at(0), cm, {});
    const auto& rs = base.strategy;
    parallel::Plan plan;
    const parallel::BuildOptions options{base.collapsed};
    auto opt = parallel::operator_options(sc, rs);
    opt.inference = true;
    parallel::Emitter em{sc,
                         rs,
                         options,
                         opt,
                         plan,
                         parallel::PerIndex<parallel::LayerRange>(rs.virtual_stage_layers),
                         {},
                         {},
                         base.spec.collective,
                         base.spec.placement,
                         {}};
    em.setup();
    std::vector<std::vector<workload::Operator>> a, b;
    for (int l = 0; l < 2; ++l) {
        a.push_back(workload::layer_forward(sc.model, l, 0, {2, 1, 300}, opt));
        b.push_back(workload::layer_forward(sc.model, l, rs.microbatches, {2, 1, 300}, opt));
    }
    const std::size_t width = em.members.front().size();
    std::vector<std::vector<std::uint32_t>> entry(width);
    std::vector<std::uint32_t> last(width, parallel::kNone);
    parallel::emit_two_halves(em, order, 0, -1, a, b, entry, last);
    const net::Topology topo(sc.cluster, sc.gpus);
    exec::ExecOptions eo;
    eo.comm_sms = 0;
    eo.collectives = sc.collectives;
    const auto r = exec::execute(plan, sc.gpu, topo, cm, eo);
    Step s;
    s.makespan = r.makespan.count_ps();
    for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
        const auto& t = plan.tasks[i];
        if (t.kind == parallel::TaskKind::collective) s.a2a.push_back((r.task_end[i] - r.task_start[i]).count_ps());
        if (t.kind == parallel::TaskKind::kernel) ++s.kernels;
    }
    return s;
}

}  // namespace

// A Mixtral decode layer: norm1 qkv | attention out_proj residual_add_norm2
// router router_topk | moe_dispatch (send) | (receive) up swiglu down (send)
// | (receive) moe_combine, then residual_add2 opens the next stage 0. With
// half A two stages ahead (A0 A1, A2 B0, A3 B1, ..., A10 B8, B9 B10) the
// kernels between each exchange's send and its receive are:
//   A's dispatch: B's stage 0 (layer 0: 2 kernels; layer 1: 3)
//   A's combine:  B's stage 1 (5 kernels)
//   B's dispatch: A's next stage 0 (layer 0: 3 kernels; layer 1: A's last
//                 stage, residual_add2 alone: 1)
//   B's combine:  A's next stage 1 (layer 0: 5; layer 1: nothing, A is done)
// so an exchange of A exposes max(0, A - w K) over its w kernels, one after
// another (each is received before the next is sent). In the alternation
// (segments: 8 kernels to the dispatch, 3 experts, 10 to the next
// dispatch, 3, then moe_combine and residual_add2) the only window under
// 3 kernels is B's last combine's: A's last segment, 2 kernels.
TEST_CASE("two_batch decode: SGLang's five stages, A two ahead, expose what the alternation hid") {
    const auto sc = toy();
    using parallel::Phase;
    // Kernels longer than an exchange: the alternation hides all 8; the
    // decode order exposes B's last combine, which nothing covers.
    const Time big = parasim_test::kToyKernel;
    const auto old_big = two_halves(sc, Phase::prefill, big), new_big = two_halves(sc, Phase::decode, big);
    REQUIRE(new_big.a2a.size() == 8);
    const std::uint64_t a = new_big.a2a.front();
    for (const auto d : new_big.a2a) REQUIRE(d == a);  // equal halves, dispatch and combine alike (BF16)
    const std::uint64_t k = big.count_ps();
    REQUIRE(a < k);
    CHECK(old_big.kernels == new_big.kernels);  // the same operators, reordered
    const std::uint64_t n = new_big.kernels;
    CHECK(old_big.makespan == n * k);
    CHECK(new_big.makespan == n * k + a);
    // K = 2 A / 5 (2 K < A < 3 K). Alternation: B's last combine beside 2
    // kernels, A - 2 K. Decode order: A's first dispatch beside 2 kernels
    // (A - 2 K), B's last dispatch beside 1 (A - K), B's last combine beside
    // none (A); every other window holds 3 kernels or more.
    const std::uint64_t k2 = 2 * a / 5;
    REQUIRE(2 * k2 < a);
    REQUIRE(a < 3 * k2);
    const auto old_small = two_halves(sc, Phase::prefill, Time::ps(k2));
    const auto new_small = two_halves(sc, Phase::decode, Time::ps(k2));
    REQUIRE(new_small.a2a == new_big.a2a);  // the exchanges do not depend on the kernels' time
    REQUIRE(old_small.a2a == new_big.a2a);
    CHECK(old_small.makespan == n * k2 + (a - 2 * k2));
    CHECK(new_small.makespan == n * k2 + (a - 2 * k2) + (a - k2) + a);
}

// DeepSeek's decode strategy runs the shared experts after dispatch_a
// (op_dispatch_a, op_shared_experts in one stage), so they fly with the
// dispatch, though parasim's layer computes them before it (docs/moe.md
// section 3). With one shared expert (3 kernels after moe_dispatch) each
// dispatch has 3 more kernels beside it: at K = 2 A / 5 only B's last
// combine, beside nothing, is exposed. The alternation keeps them before
// the dispatch; its one exposed exchange is still B's last combine beside
// A's last segment (moe_combine, residual_add2).
TEST_CASE("two_batch decode: the shared experts run beside their half's dispatch") {
    const auto sc = toy(true);
    using parallel::Phase;
    const auto probe = two_halves(sc, Phase::decode, parasim_test::kToyKernel);
    REQUIRE(probe.a2a.size() == 8);
    const std::uint64_t a = probe.a2a.front();
    const std::uint64_t k = 2 * a / 5;
    REQUIRE(2 * k < a);
    REQUIRE(a < 3 * k);
    const auto old_order = two_halves(sc, Phase::prefill, Time::ps(k));
    const auto new_order = two_halves(sc, Phase::decode, Time::ps(k));
    REQUIRE(new_order.a2a == probe.a2a);
    REQUIRE(old_order.kernels == new_order.kernels);
    const std::uint64_t n = new_order.kernels;
    CHECK(old_order.makespan == n * k + (a - 2 * k));
    CHECK(new_order.makespan == n * k + a);
}

TEST_SUITE_END();
