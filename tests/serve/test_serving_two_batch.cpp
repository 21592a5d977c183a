// overlap.two_batch in serving (docs/serving.md, "Two-batch overlap";
// docs/moe.md section 8a): a serving iteration is split in two halves by
// SGLang's rule and built as `run`'s inference pass builds its halves, so
// with every kernel taking the same time an iteration costs what `run`'s
// pass of the same batch costs (its kernels' time, every all-to-all hidden);
// the split of a ragged batch is checked by hand; a decode iteration runs
// SGLang's decode order (tests/parallel/test_two_batch_decode_order.cpp);
// serving engines other than data-parallel attention's are refused at the
// strategy.
#include "sim/config/scenario.h"
#include "sim/core/error.h"
#include "sim/exec/executor.h"
#include "sim/net/topology.h"
#include "sim/parallel/builder.h"
#include "sim/parallel/emitter.h"
#include "sim/parallel/strategy.h"
#include "sim/serve/simulator.h"

#include "tests/parallel/overlap_toy.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

TEST_SUITE_BEGIN("unit");

using namespace sim;

namespace {

// Mixtral with 2 layers (both MoE) on 8 H100 of one node, dp 8 = ep 8, 4
// prompts of 128 tokens a replica (the toy of
// tests/parallel/test_two_batch_overlap.cpp), prefill only.
config::ScenarioSpec toy(bool two_batch) {
    const auto path =
        std::filesystem::temp_directory_path() / ("parasim-serving-two-batch-" + std::to_string(::getpid()) + ".yaml");
    std::ofstream(path) << "name: tbo-serving-toy\ncluster: dgx-h100-x2\ngpus: 8\nmodel: mixtral-8x7b\n"
                           "workload:\n  mode: inference\n  dtype: bf16\n  batch: 32\n  prompt_tokens: 128\n"
                           "  output_tokens: 1\n  decode_steps_simulated: 0\n"
                           "  moe: {routing: balanced, grouped_gemm: true}\n"
                           "strategies:\n  - name: ep\n    pp: 1\n    dp: 8\n    ep: 8\n    overlap: {two_batch: "
                        << (two_batch ? "true" : "false") << "}\n";
    auto sc = config::load_scenario(path.string(), {config::parse_override("model.layers=2")});
    std::filesystem::remove(path);
    return sc;
}

// One serving iteration of `batch` under the scenario's strategy, every
// kernel 1 ms (its plan in `build.plan`).
parasim_test::ToyRun iteration(const config::ScenarioSpec& sc, const parallel::IterationBatch& batch) {
    const parasim_test::ConstantCost cm;
    parasim_test::ToyRun it{parallel::build_plan(sc, sc.strategies.at(0), cm, {}), {}};
    it.build.plan = parallel::build_iteration_plan(sc, it.build, batch);
    const net::Topology topo(sc.cluster, sc.gpus);
    exec::ExecOptions eo;
    eo.collectives = sc.collectives;
    it.result = exec::execute(it.build.plan, sc.gpu, topo, cm, eo);
    return it;
}

std::size_t on_stream(const parallel::Plan& p, parallel::StreamKind k) {
    return p.streams[0][parallel::stream_index(k)].size();
}

parallel::IterationBatch batch(std::initializer_list<parallel::IterationGroup> groups, std::int64_t sampled) {
    return parallel::IterationBatch{std::vector<parallel::IterationGroup>(groups), sampled};
}

}  // namespace

TEST_CASE("serving two_batch: SGLang's split of a ragged iteration") {
    using parallel::serving_two_batch_first_half;
    // Decode only: num_tokens // 2.
    CHECK(serving_two_batch_first_half(batch({{5, 1, 300}}, 5), true) == 2);
    CHECK(serving_two_batch_first_half(batch({{1, 1, 300}}, 1), true) == 0);  // one sequence: no split
    // Prefill (_split_array_by_half_sum over the new tokens): 3 x 100 + 300
    // = 600, half 300, reached by the third sequence.
    CHECK(serving_two_batch_first_half(batch({{3, 100, 100}, {1, 300, 300}}, 4), false) == 3);
    // 100 + 300 = 400, half 200, reached by the second: at most n - 1 = 1.
    CHECK(serving_two_batch_first_half(batch({{1, 100, 100}, {1, 300, 300}}, 2), false) == 1);
    // A chunk of 64 and 4 decodes: 68, half 34, reached by the chunk.
    CHECK(serving_two_batch_first_half(batch({{1, 64, 64}, {4, 1, 200}}, 4), false) == 1);
    // 2 chunks of 1 and one of 10: 12, half 6: the third, capped at n - 1 = 2.
    CHECK(serving_two_batch_first_half(batch({{2, 1, 50}, {1, 10, 10}}, 3), false) == 2);
}

TEST_CASE("serving two_batch: an iteration of 4 prompts costs what run's pass of them costs, every all-to-all hidden") {
    const auto on = toy(true), off = toy(false);
    const auto b = batch({{4, 128, 128}}, 4);  // a replica's 4 prompts of 128 tokens, all sampling
    const auto it_on = iteration(on, b), it_off = iteration(off, b);
    const auto run_on = parasim_test::run_toy(on, 0, 0), run_off = parasim_test::run_toy(off, 0, 0);
    const std::uint64_t k = parasim_test::kToyKernel.count_ps();
    // The same kernels as run's pass, on the same streams: 2 layers x
    // (dispatch + combine) x 2 halves on ep_comm.
    CHECK(on_stream(it_on.build.plan, parallel::StreamKind::ep_comm) == 8);
    CHECK(on_stream(it_on.build.plan, parallel::StreamKind::tp_comm) == 0);
    const std::size_t n_on = on_stream(it_on.build.plan, parallel::StreamKind::compute);
    CHECK(n_on == on_stream(run_on.build.plan, parallel::StreamKind::compute));
    // With TBO the iteration takes its kernels' time alone, as run's pass.
    CHECK(it_on.result.makespan.count_ps() == n_on * k);
    CHECK(it_on.result.makespan == run_on.result.makespan);
    // Without, it is run's pass without: its kernels and 4 exposed
    // all-to-alls (2 layers x dispatch and combine) of one duration A0.
    CHECK(it_off.result.makespan == run_off.result.makespan);
    const auto a0 = parasim_test::a2a_durations(it_off);
    REQUIRE(a0.size() == 1);
    CHECK(it_off.result.makespan.count_ps() ==
          on_stream(it_off.build.plan, parallel::StreamKind::compute) * k + 4 * *a0.begin());
    // One sequence is not split: the iteration runs whole, as without TBO.
    const auto one = batch({{1, 128, 128}}, 1);
    CHECK(on_stream(iteration(on, one).build.plan, parallel::StreamKind::compute) ==
          on_stream(iteration(off, one).build.plan, parallel::StreamKind::compute));
}

TEST_CASE(
    "serving two_batch: a decode iteration splits n / 2, and a chunk that samples nothing still ends after both "
    "halves") {
    const auto on = toy(true), off = toy(false);
    const std::uint64_t k = parasim_test::kToyKernel.count_ps();
    const auto dec = iteration(on, batch({{5, 1, 300}}, 5));
    CHECK(on_stream(dec.build.plan, parallel::StreamKind::ep_comm) == 8);
    // SGLang's decode order (docs/moe.md section 8a): the last exchange, half
    // B's last combine, is received right after it is sent, beside nothing;
    // every other one is hidden behind kernels of 1 ms.
    std::size_t b_combine = 0;
    for (std::size_t i = 0; i < dec.build.plan.tasks.size(); ++i)
        if (dec.build.plan.tasks[i].kind == parallel::TaskKind::collective) b_combine = i;
    const Time exposed = dec.result.task_end[b_combine] - dec.result.task_start[b_combine];
    CHECK(dec.result.makespan.count_ps() ==
          on_stream(dec.build.plan, parallel::StreamKind::compute) * k + exposed.count_ps());
    // Two chunks that sample no token (no head): the marker is the later
    // half's last kernel, the iteration's end.
    const auto chunks = iteration(on, batch({{2, 128, 256}}, 0));
    REQUIRE(chunks.build.plan.markers.size() == 1);
    CHECK(chunks.result.task_end[chunks.build.plan.markers[0]] == chunks.result.makespan);
    CHECK(chunks.result.makespan.count_ps() == on_stream(chunks.build.plan, parallel::StreamKind::compute) * k);
}

TEST_CASE("serving two_batch: refused at the strategy for engines that are not data-parallel attention's") {
    auto sc = toy(true);
    sc.workload.serving = config::ServingSpec{};
    try {
        (void)parallel::resolve_degrees(sc, sc.strategies.at(0));
        FAIL("not refused");
    } catch (const ConfigError& e) {
        const std::string what = e.what();
        CHECK(what.find("data-parallel-attention engines") != std::string::npos);
        CHECK(what.find(".yaml:") != std::string::npos);  // the strategy's file:line:col
    }
    // The same strategy as an attention_dp engine is formed.
    sc.strategies.at(0).attention_dp = true;
    sc.strategies.at(0).tp = 1;
    CHECK_NOTHROW((void)parallel::resolve_degrees(sc, sc.strategies.at(0)));
}

TEST_SUITE_END();
