// DualPipe (docs/parallelism.md, "DualPipe"): the order of
// github:deepseek-ai/DualPipe dualpipe/dualpipe.py on a small pipeline, the
// activations of Table 2 of the DeepSeek-V3 report, the iteration time of a
// 4-rank pipeline worked out by hand from that order, the doubled weights,
// the overlapped pairs, and the refusals.
#include "dual_pipe_support.h"
#include "sim/config/data_dir.h"
#include "sim/config/scenario.h"
#include "sim/core/error.h"
#include "sim/exec/executor.h"
#include "sim/hw/cost_model.h"
#include "sim/net/topology.h"
#include "sim/parallel/builder.h"
#include "sim/parallel/strategy.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;
using namespace dual_pipe_test;
using parallel::PipelineShape;

namespace {

const parallel::IPipelineSchedule& dualpipe() { return parallel::pipeline_schedule("dualpipe"); }

}  // namespace

TEST_CASE("dualpipe: rank 0 and rank 1 of 4 with 8 micro-batches follow DualPipe.step's eight steps") {
    const PipelineShape shape{4, 8, 1};
    // Rank 0 (h = 0, near = direction 0 = micro-batches 0-3 on chunk 0, far =
    // direction 1 = micro-batches 4-7 on chunk 1): step 1, 2 forwards near;
    // step 2, one (F near, F far); step 3, one (B far input, its W, F far);
    // step 4, 8/2 - 4 + 1 = 1 time: (F near & B far), (F far & B near);
    // step 5, 1 time: B far, (F far & B near); step 6, 1 time: B far, then
    // B near as input only; step 7, 1 time: W (the oldest waiting, 4), B near
    // input; step 8: the last W.
    CHECK(dualpipe().items(shape, 0) == std::vector<ScheduleItem>{F(0, 0), F(1, 0),            // 1
                                                                  F(2, 0), F(4, 1),            // 2
                                                                  Bi(4, 1), W(4, 1), F(5, 1),  // 3
                                                                  P(3, 0), B(5, 1),            // 4
                                                                  P(6, 1), B(0, 0),            //
                                                                  B(6, 1), P(7, 1), B(1, 0),   // 5
                                                                  B(7, 1), Bi(2, 0),           // 6
                                                                  W(2, 0), Bi(3, 0),           // 7
                                                                  W(3, 0)});                   // 8
    // Rank 1 (h = 1, a middle rank): no step 1, 3, 5 or 7; step 2 twice; step
    // 4 twice, its first pair unoverlapped; step 6 twice, the input-only
    // halves from i = 1 on (h odd: before the far backward).
    CHECK(dualpipe().items(shape, 1) == std::vector<ScheduleItem>{F(0, 0), F(4, 1), F(1, 0), F(5, 1),    // 2
                                                                  F(2, 0), B(4, 1), P(6, 1), B(0, 0),    // 4
                                                                  P(3, 0), B(5, 1), P(7, 1), B(1, 0),    //
                                                                  B(6, 1), B(2, 0), Bi(7, 1), Bi(3, 0),  // 6
                                                                  W(7, 1), W(3, 0)});                    // 8
    // Rank 3 mirrors rank 0 with the directions swapped: near is direction 1.
    const auto r3 = dualpipe().items(shape, 3);
    REQUIRE(r3.size() == 19);
    CHECK(r3.front() == F(4, 1));
    CHECK(r3[3] == F(0, 0));
}

TEST_CASE("dualpipe: every micro-batch once each way per chunk; pp + 1 chunks of activations (Table 2)") {
    for (const auto& shape :
         {PipelineShape{4, 8, 1}, PipelineShape{8, 20, 1}, PipelineShape{2, 4, 1}, PipelineShape{6, 24, 1}}) {
        const int p = shape.stages, half = shape.microbatches / 2;
        for (int s = 0; s < p; ++s) {
            int fwd = 0, grad_in = 0, grad_w = 0;
            for (const auto& it : dualpipe().items(shape, s)) {
                // Direction d's micro-batches are d x m/2 ... on chunk d.
                CHECK(it.mb / half == it.chunk);
                fwd += it.forward;
                grad_in += !it.forward && it.part != BackwardPart::weight;
                grad_w += !it.forward && it.part != BackwardPart::input;
            }
            CHECK(fwd == shape.microbatches);
            CHECK(grad_in == shape.microbatches);
            CHECK(grad_w == shape.microbatches);
            // The report's Table 2: PP + 1 (the figure's 8 ranks hold 9).
            CHECK(dualpipe().chunks_in_flight(shape, s) == p + 1);
            // Chunk 0 of rank s is virtual stage s, chunk 1 is pp - 1 - s.
            CHECK(dualpipe().virtual_stage(shape, s, 0) == s);
            CHECK(dualpipe().virtual_stage(shape, s, 1) == p - 1 - s);
            CHECK(dualpipe().stage_of(shape, dualpipe().virtual_stage(shape, s, 1), 1) == s);
        }
    }
}

TEST_CASE("dualpipe: 4 ranks, 8 micro-batches, F = B = W = 8 ms: 26 x 8 ms by hand (Table 2), 1F1B 33 x 8 ms") {
    // Each rank runs 8 forwards, 8 input-gradient and 8 weight-gradient
    // halves, T = 8 ms each: 24T of work. By hand from rank 0's order above
    // (times in T; a backward not split is 2T; a pair starts once both its
    // inputs are in): F0 F1 F2 in [0, 3); F4 arrives at 3 (it entered rank
    // 3 at 0, 3 hops); B4i W4 F5 end at 7; the pair (F3, B5) in [7, 10);
    // the pair (F6, B0) waits for rank 1's B0, done at 11: idle [10, 11);
    // then to 16; the pair (F7, B1) waits for rank 1's B1, done at 17: idle
    // [16, 17); B1 B7 B2i W2 B3i W3 end at 26. Rank 1 idles [0, 1) and
    // [21, 22) (its B7 waits for rank 0's): also 26. 24T + 2T, the bubble of
    // Table 2: (pp/2 - 1)(F&B + B - 3W) = 1 x (3T + 2T - 3T) = 2T.
    // 1F1B: (m + p - 1)(F + B + W) = 11 x 3T = 33T.
    const LayerGemmsOnly cm;
    for (const auto& run : {std::pair{"dualpipe", 26}, std::pair{"1f1b", 33}}) {
        // Named copies, not a structured binding: INFO captures by reference in
        // a lambda, which clang 14 refuses for a binding.
        const char* const schedule = run.first;
        const int units = run.second;
        const auto sc = four_ranks(schedule);
        const auto build = parallel::build_plan(sc, sc.strategies.at(1), cm, {});
        const net::Topology topo(sc.cluster, sc.gpus);
        exec::ExecOptions eo;
        eo.comm_sms = 0;  // no SMs lent to the (instant) transfers: kernels keep 1 ms
        eo.collectives = sc.collectives;
        const auto ex = exec::execute(build.plan, sc.gpu, topo, cm, eo);
        INFO(std::string(schedule));
        CHECK(ex.makespan.seconds() == doctest::Approx(units * 8 * kGemm.seconds()).epsilon(1e-6));
    }
}

TEST_CASE("dualpipe: a rank holds two chunks' weights, gradients and optimizer state, pp + 1 activations") {
    const auto one = four_ranks("1f1b"), dual = four_ranks("dualpipe");
    const LayerGemmsOnly cm;
    // Rank 1: virtual stages 1 and 2 under DualPipe (2 x 2 layers), virtual
    // stage 1 under 1F1B (2 layers); neither holds the embedding or head.
    auto rs1 = parallel::resolve_degrees(one, one.strategies.at(1));
    auto rs2 = parallel::resolve_degrees(dual, dual.strategies.at(1));
    const auto v1 = parallel::split_layers(one, one.strategies.at(1), rs1, cm);
    const auto v2 = parallel::split_layers(dual, dual.strategies.at(1), rs2, cm);
    const auto m1 = parallel::stage_memory(one, rs1, 1, v1);
    const auto m2 = parallel::stage_memory(dual, rs2, 1, v2);
    CHECK(m2.weights == doctest::Approx(2 * m1.weights));
    CHECK(m2.gradients == doctest::Approx(2 * m1.gradients));
    CHECK(m2.optimizer == doctest::Approx(2 * m1.optimizer));
    // Activations of one micro-batch through one virtual stage (2 layers):
    // 1F1B's rank 1 holds p - 1 = 3 of them, DualPipe's p + 1 = 5.
    CHECK(m2.activations == doctest::Approx(m1.activations * 5.0 / 3.0));
}

TEST_CASE("dualpipe: overlap.moe_a2a is accepted and its pairs hide all-to-alls; the shapes refused") {
    // Mixtral, 2 layers per rank: pp 2 x dp 4, ep 4, 8 micro-batches.
    const std::string kMixtral = std::string(sim::config::data_dir()) + "/scenarios/moe-mixtral-8x7b-ep.yaml";
    const auto mixtral = [&](bool overlap, std::vector<std::string> extra = {}) {
        std::vector<std::string> sets = {
            "gpus=8",
            "model.layers=4",
            "workload.recompute=none",
            "workload.global_batch=32",
            "strategies[1].pp=2",
            "strategies[1].dp=4",
            "strategies[1].ep=4",
            "strategies[1].schedule=dualpipe",
            std::string("strategies[1].overlap={moe_a2a: ") + (overlap ? "true" : "false") + "}"};
        sets.insert(sets.end(), extra.begin(), extra.end());
        return scenario(kMixtral, sets);
    };
    const auto makespan = [](const config::ScenarioSpec& sc) {
        const auto cm = hw::make_cost_model("roofline");
        const auto build = parallel::build_plan(sc, sc.strategies.at(1), *cm, {});
        const net::Topology topo(sc.cluster, sc.gpus);
        return exec::execute(build.plan, sc.gpu, topo, *cm).makespan;
    };
    CHECK(makespan(mixtral(true)) < makespan(mixtral(false)));
    // 28 / 4 = 7 micro-batches: odd. 8 / 4 = 2: fewer than 2 x pp = 4.
    const auto odd = mixtral(false, {"workload.global_batch=28"});
    CHECK_THROWS_WITH_AS(parallel::resolve_degrees(odd, odd.strategies.at(1)),
                         doctest::Contains("dualpipe needs an even number of micro-batches, at least 2 x pp = 4"),
                         ConfigError);
    const auto few = mixtral(false, {"workload.global_batch=8"});
    CHECK_THROWS_AS(parallel::resolve_degrees(few, few.strategies.at(1)), ConfigError);
    const auto single = mixtral(false, {"strategies[1].pp=1", "strategies[1].dp=8"});
    CHECK_THROWS_WITH_AS(parallel::resolve_degrees(single, single.strategies.at(1)),
                         doctest::Contains("dualpipe needs an even pp >= 2"), ConfigError);
}

TEST_SUITE_END();
