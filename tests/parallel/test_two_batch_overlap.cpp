// overlap.two_batch (docs/moe.md section 8a): SGLang's two-batch overlap in
// an inference pass. The pass's sequences split in two halves by SGLang's
// rule; the halves' MoE layers alternate at the all-to-alls, each half's
// exchange on the ep_comm stream beside the other half's kernels. With every
// kernel taking the same time K, longer than an all-to-all, and no SMs lent,
// the pass takes exactly its kernels' time: every all-to-all is hidden.
#include "sim/config/scenario.h"
#include "sim/core/error.h"
#include "sim/exec/executor.h"
#include "sim/hw/cost_model.h"
#include "sim/net/topology.h"
#include "sim/parallel/builder.h"
#include "sim/parallel/emit_two_batch.h"
#include "sim/parallel/emitter.h"
#include "sim/parallel/strategy.h"

#include "tests/parallel/overlap_toy.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;

namespace {

constexpr Time kKernel = parasim_test::kToyKernel;  // 1 ms, every kernel
using parasim_test::a2a_durations;
using parasim_test::ConstantCost;
using Run = parasim_test::ToyRun;

// Mixtral with 2 layers (both MoE) on 8 H100 of one node, dp 8 = ep 8 (the
// EP group is the node), 4 sequences of 128 tokens a replica, prefill only.
// `overlap` and `software` are YAML text for the strategy and the scenario.
config::ScenarioSpec toy(const std::string& overlap, const std::string& software = "", int ep = 8) {
    // A name of this process's own: ctest runs the cases of this file in parallel processes.
    const auto path =
        std::filesystem::temp_directory_path() / ("parasim-two-batch-toy-" + std::to_string(::getpid()) + ".yaml");
    std::ofstream(path) << "name: two-batch-toy\ncluster: dgx-h100-x2\ngpus: 8\nmodel: mixtral-8x7b\n"
                        << software
                        << "workload:\n  mode: inference\n  dtype: bf16\n  batch: 32\n  prompt_tokens: 128\n"
                           "  output_tokens: 1\n  decode_steps_simulated: 0\n"
                           "  moe: {routing: balanced, grouped_gemm: true}\n"
                           "strategies:\n  - name: ep\n    pp: 1\n    dp: 8\n    ep: "
                        << ep << "\n    overlap: " << overlap << "\n";
    auto sc = config::load_scenario(path.string(), {config::parse_override("model.layers=2")});
    std::filesystem::remove(path);
    return sc;
}

// No SMs lent: the all-to-alls slow no kernel.
Run run(const config::ScenarioSpec& sc) { return parasim_test::run_toy(sc, 0, 0); }

std::size_t on_stream(const Run& r, parallel::StreamKind k) {
    return r.build.plan.streams[0][parallel::stream_index(k)].size();
}

}  // namespace

TEST_CASE("two_batch: SGLang's split of a pass's sequences") {
    using parallel::Phase;
    // Prefill (_split_array_by_half_sum over equal prompts): the first k
    // with k x tokens >= floor(n x tokens / 2), at most n - 1.
    CHECK(parallel::two_batch_first_half(Phase::prefill, 4, 128) == 2);
    CHECK(parallel::two_batch_first_half(Phase::prefill, 3, 2) == 2);  // 1 x 2 < 3 <= 2 x 2
    CHECK(parallel::two_batch_first_half(Phase::prefill, 3, 1) == 1);  // floor(3 / 2) = 1 <= 1 x 1
    CHECK(parallel::two_batch_first_half(Phase::prefill, 2, 4096) == 1);
    CHECK(parallel::two_batch_first_half(Phase::prefill, 1, 4096) == 0);  // one sequence: no split
    // Decode: num_tokens // 2.
    CHECK(parallel::two_batch_first_half(Phase::decode, 5, 1) == 2);
    CHECK(parallel::two_batch_first_half(Phase::decode, 1, 1) == 0);
}

TEST_CASE("two_batch: two halves of a prefill hide all 8 of their all-to-alls behind each other's kernels") {
    const auto off = run(toy("{two_batch: false}"));
    const auto on = run(toy("{two_batch: true}"));
    // Whole pass: each of 2 layers x (dispatch + combine) = 4 all-to-alls
    // of duration A0 is exposed (its kernels wait, nothing else runs).
    const auto d_off = a2a_durations(off), d_on = a2a_durations(on);
    REQUIRE(d_off.size() == 1);
    const std::uint64_t a0 = *d_off.begin();
    const std::uint64_t k = kKernel.count_ps();
    const std::size_t n_off = on_stream(off, parallel::StreamKind::compute);
    CHECK(off.result.makespan.count_ps() == n_off * k + 4 * a0);
    // Split 2 + 2 sequences: 8 all-to-alls of one duration A < K (two equal
    // halves), all on ep_comm, each beside at least one kernel of the
    // other half: the pass takes its kernels' time alone. Its kernels: the
    // embedding and the head once, each MoE layer's once per half.
    REQUIRE(d_on.size() == 1);
    REQUIRE(*d_on.begin() < k);
    CHECK(on_stream(on, parallel::StreamKind::ep_comm) == 8);
    CHECK(on_stream(on, parallel::StreamKind::tp_comm) == 0);
    CHECK(on_stream(off, parallel::StreamKind::ep_comm) == 0);
    const std::size_t n_on = on_stream(on, parallel::StreamKind::compute);
    CHECK(on.result.makespan.count_ps() == n_on * k);
    // The extra kernels are one half's MoE layers: a layer's kernels, twice.
    const auto& sc = toy("{two_batch: true}");
    const auto opt = parallel::operator_options(sc, on.build.strategy);
    const std::size_t layer = workload::layer_forward(sc.model, 0, 0, {2, 128, 128}, opt).size();
    CHECK(n_on - n_off == 2 * layer);
}

TEST_CASE("two_batch: the EP groups hold the stack's SM count (SGLang: DeepEP's 20)") {
    const auto base = toy("{two_batch: true}");
    const auto plain = parallel::build_plan(base, base.strategies.at(0), ConstantCost{}, {});
    const auto sc = toy("{two_batch: true}", "software: {name: sglang}\n");
    CHECK(sc.profile.moe_a2a_sms == 20);
    const auto sg = parallel::build_plan(sc, sc.strategies.at(0), ConstantCost{}, {});
    const auto sms_of_a2a = [](const parallel::PlanBuild& b) {
        std::set<int> out;
        for (const auto& t : b.plan.tasks)
            if (t.kind == parallel::TaskKind::collective && t.op == net::CollectiveOp::all_to_all)
                out.insert(b.plan.groups[t.group].sms);
        return out;
    };
    CHECK(sms_of_a2a(plain) == std::set<int>{0});  // 0: the collective library's comm_sms
    CHECK(sms_of_a2a(sg) == std::set<int>{20});
    // And run at the stack's rate beside compute (docs/moe.md section 8a).
    const auto rate_of_a2a = [](const parallel::PlanBuild& b) {
        std::set<double> out;
        for (const auto& t : b.plan.tasks)
            if (t.kind == parallel::TaskKind::collective && t.op == net::CollectiveOp::all_to_all)
                out.insert(b.plan.groups[t.group].beside_compute_rate);
        return out;
    };
    CHECK(rate_of_a2a(plain) == std::set<double>{1.0});
    CHECK(rate_of_a2a(sg) == std::set<double>{0.816});
}

TEST_CASE("two_batch: refused without expert parallelism, with a stack that does not list it, and in training") {
    const auto no_ep = toy("{two_batch: true}", "", 1);
    CHECK_THROWS_WITH_AS(parallel::resolve_degrees(no_ep, no_ep.strategies.at(0)),
                         doctest::Contains("needs an MoE model and ep > 1"), ConfigError);
    const auto vllm = toy("{two_batch: true}", "software: {name: vllm}\n");
    CHECK_THROWS_WITH_AS(parallel::resolve_degrees(vllm, vllm.strategies.at(0)),
                         doctest::Contains("software 'vllm' does not list two_batch"), ConfigError);
    auto training = toy("{two_batch: true}");
    training.workload.mode = config::Mode::training;
    CHECK_THROWS_WITH_AS(parallel::resolve_degrees(training, training.strategies.at(0)),
                         doctest::Contains("inference overlap"), ConfigError);
}

TEST_SUITE_END();
