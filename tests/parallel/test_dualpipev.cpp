// DualPipeV (docs/parallelism.md, "DualPipeV"): the order of
// github:deepseek-ai/DualPipe dualpipe/dualpipev.py written out by hand for
// 4 ranks and 8 micro-batches, the README's PP + 1 activations and its
// bubble for F = B = W, one model copy's weights (not DualPipe's two), the
// V layout of the chunks, determinism, and the refusals.
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

const parallel::IPipelineSchedule& dualpipev() { return parallel::pipeline_schedule("dualpipev"); }

}  // namespace

TEST_CASE("dualpipev: ranks 0, 1 and 3 of 4 with 8 micro-batches follow DualPipeV.step's eight steps") {
    const PipelineShape shape{4, 8, 2};
    // Written out from dualpipev.py with num_ranks 4, num_chunks 8; chunk 0
    // ("phase 0") runs micro-batch k down the ranks, chunk 1 back up.
    // Rank 0: step 1, (4 - 0 - 1) x 2 = 6 F0; step 2, once F0 F1; step 3,
    // 3 times B1 (zero bubble), W, F1; step 4, 8 - 8 + 0 + 1 = 1 time (F0 &
    // B1) (F1 & B0); step 5, 3 times B1 (F1 & B0); step 6, once: B1 whole,
    // B0 input only (rank 0 is even: zero bubble from i = 0 after B1);
    // step 7, 3 times W, B0 input; step 8, 1 W.
    CHECK(dualpipev().items(shape, 0) ==
          std::vector<ScheduleItem>{F(0, 0),  F(1, 0),  F(2, 0), F(3, 0),  F(4, 0), F(5, 0),   // 1
                                    F(6, 0),  F(0, 1),                                         // 2
                                    Bi(0, 1), W(0, 1),  F(1, 1),                               // 3
                                    Bi(1, 1), W(1, 1),  F(2, 1),                               //
                                    Bi(2, 1), W(2, 1),  F(3, 1),                               //
                                    P(7, 0),  B(3, 1),  P(4, 1), B(0, 0),                      // 4
                                    B(4, 1),  P(5, 1),  B(1, 0),                               // 5
                                    B(5, 1),  P(6, 1),  B(2, 0),                               //
                                    B(6, 1),  P(7, 1),  B(3, 0),                               //
                                    B(7, 1),  Bi(4, 0),                                        // 6
                                    W(4, 0),  Bi(5, 0), W(5, 0), Bi(6, 0), W(6, 0), Bi(7, 0),  // 7
                                    W(7, 0)});                                                 // 8
    // Rank 1: step 1, 4 F0; step 2 twice; step 3 twice; step 4 twice; step 5
    // twice; step 6 twice, rank 1 odd: input-only from i = 1 on, before B1;
    // step 7 twice (the queue holds W(7,1), W(5,0) first); step 8, 2 W.
    CHECK(dualpipev().items(shape, 1) == std::vector<ScheduleItem>{F(0, 0),  F(1, 0),  F(2, 0),  F(3, 0),   // 1
                                                                   F(4, 0),  F(0, 1),  F(5, 0),  F(1, 1),   // 2
                                                                   Bi(0, 1), W(0, 1),  F(2, 1),             // 3
                                                                   Bi(1, 1), W(1, 1),  F(3, 1),             //
                                                                   P(6, 0),  B(2, 1),  P(4, 1),  B(0, 0),   // 4
                                                                   P(7, 0),  B(3, 1),  P(5, 1),  B(1, 0),   //
                                                                   B(4, 1),  P(6, 1),  B(2, 0),             // 5
                                                                   B(5, 1),  P(7, 1),  B(3, 0),             //
                                                                   B(6, 1),  B(4, 0),  Bi(7, 1), Bi(5, 0),  // 6
                                                                   W(7, 1),  Bi(6, 0), W(5, 0),  Bi(7, 0),  // 7
                                                                   W(6, 0),  W(7, 0)});                     // 8
    // Rank 3, the last: no step 1, 3, 5 or 7; step 2 four times; step 4
    // four times, its very first pair not overlapped (the NOTE in step 4);
    // step 6 four times, rank 3 odd: input-only from i = 2 on, before B1.
    CHECK(dualpipev().items(shape, 3) == std::vector<ScheduleItem>{F(0, 0),  F(0, 1),  F(1, 0),  F(1, 1),
                                                                   F(2, 0),  F(2, 1),  F(3, 0),  F(3, 1),    // 2
                                                                   F(4, 0),  B(0, 1),  P(4, 1),  B(0, 0),    // 4
                                                                   P(5, 0),  B(1, 1),  P(5, 1),  B(1, 0),    //
                                                                   P(6, 0),  B(2, 1),  P(6, 1),  B(2, 0),    //
                                                                   P(7, 0),  B(3, 1),  P(7, 1),  B(3, 0),    //
                                                                   B(4, 1),  B(4, 0),  B(5, 1),  B(5, 0),    // 6
                                                                   Bi(6, 1), Bi(6, 0), Bi(7, 1), Bi(7, 0),   //
                                                                   W(6, 1),  W(6, 0),  W(7, 1),  W(7, 0)});  // 8
}

TEST_CASE("dualpipev: every micro-batch once each way per chunk; 2 pp + 1 chunks of activations (README PP + 1)") {
    for (const auto& shape : {PipelineShape{4, 8, 2}, PipelineShape{4, 9, 2}, PipelineShape{3, 6, 2},
                              PipelineShape{8, 20, 2}, PipelineShape{1, 2, 2}, PipelineShape{2, 7, 2}}) {
        const int p = shape.stages;
        for (int s = 0; s < p; ++s) {
            int fwd[2] = {0, 0}, grad_in[2] = {0, 0}, grad_w[2] = {0, 0};
            for (const auto& it : dualpipev().items(shape, s)) {
                CHECK(it.mb < shape.microbatches);
                fwd[it.chunk] += it.forward;
                grad_in[it.chunk] += !it.forward && it.part != BackwardPart::weight;
                grad_w[it.chunk] += !it.forward && it.part != BackwardPart::input;
            }
            for (int c = 0; c < 2; ++c) {
                CHECK(fwd[c] == shape.microbatches);
                CHECK(grad_in[c] == shape.microbatches);
                CHECK(grad_w[c] == shape.microbatches);
            }
            // The README's table: PP + 1, PP its 2 x pp stages.
            CHECK(dualpipev().chunks_in_flight(shape, s) == 2 * p + 1);
            // The V: chunk 0 of rank s is virtual stage s, chunk 1 is 2pp - 1 - s.
            CHECK(dualpipev().virtual_stage(shape, s, 0) == s);
            CHECK(dualpipev().virtual_stage(shape, s, 1) == 2 * p - 1 - s);
            CHECK(dualpipev().stage_of(shape, 2 * p - 1 - s, 1) == s);
            CHECK(dualpipev().stage_of(shape, s, 0) == s);
        }
    }
}

TEST_CASE("dualpipev: F = B = W = T: 6m T of work per rank + the README's (PP/2 - 1)(F&B + B - 3W) = 2(pp - 1)T") {
    // Each rank runs 2 chunks x m micro-batches x (F, input-gradient half,
    // weight half), T each: 6m T of work. The README's bubble with PP = 2pp
    // stages, B = 2T (a whole backward), F&B = 3T (the pair's two items one
    // after the other in this cost model): (pp - 1)(3T + 2T - 3T) = 2(pp -
    // 1)T. pp 4 with 8 layers: one layer a chunk, T = 4 GEMMs = 4 ms, 54T;
    // pp 2: two layers a chunk, T = 8 ms, 48T + 2T; pp 3 on 6 layers: T = 4
    // ms, 48T + 4T; pp 4 with 9 micro-batches (odd): 54T + 6T.
    struct Case {
        std::vector<std::string> sets;
        int t_gemms, work, bubble;
    };
    const Case cases[] = {{{}, 4, 48, 6},
                          {{"gpus=2", "strategies[1].pp=2"}, 8, 48, 2},
                          {{"gpus=3", "strategies[1].pp=3", "model.layers=6"}, 4, 48, 4},
                          {{"workload.global_batch=9"}, 4, 54, 6}};
    const LayerGemmsOnly cm;
    for (const auto& c : cases) {
        const auto sc = four_ranks("dualpipev", c.sets);
        const auto build = parallel::build_plan(sc, sc.strategies.at(1), cm, {});
        const net::Topology topo(sc.cluster, sc.gpus);
        exec::ExecOptions eo;
        eo.comm_sms = 0;  // no SMs lent to the (instant) transfers: kernels keep 1 ms
        eo.collectives = sc.collectives;
        const auto ex = exec::execute(build.plan, sc.gpu, topo, cm, eo);
        CAPTURE(sc.gpus);
        CHECK(ex.makespan.seconds() ==
              doctest::Approx((c.work + c.bubble) * c.t_gemms * kGemm.seconds()).epsilon(1e-6));
        // Deterministic: the same plan built and run again, to the picosecond.
        const auto again =
            exec::execute(parallel::build_plan(sc, sc.strategies.at(1), cm, {}).plan, sc.gpu, topo, cm, eo);
        CHECK(again.makespan == ex.makespan);
    }
}

TEST_CASE("dualpipev: one model copy (1F1B's weights, half DualPipe's), 2 pp + 1 one-layer chunks of activations") {
    const LayerGemmsOnly cm;
    const auto memory = [&](const std::string& schedule, int s) {
        const auto sc = four_ranks(schedule);
        auto rs = parallel::resolve_degrees(sc, sc.strategies.at(1));
        const auto v = parallel::split_layers(sc, sc.strategies.at(1), rs, cm);
        return parallel::stage_memory(sc, rs, s, v);
    };
    // Rank 1 holds layers 1 and 6 under DualPipeV (virtual stages 1 and 6 of
    // 8, one layer each), layers 2-3 under 1F1B, 2 x 2 under DualPipe.
    const auto one = memory("1f1b", 1), dual = memory("dualpipe", 1), v = memory("dualpipev", 1);
    CHECK(v.weights == doctest::Approx(one.weights));
    CHECK(v.gradients == doctest::Approx(one.gradients));
    CHECK(v.optimizer == doctest::Approx(one.optimizer));
    CHECK(dual.weights == doctest::Approx(2 * v.weights));
    // Activations in layers: 1F1B rank 1, p - 1 = 3 chunks of 2 layers = 6;
    // DualPipeV, 2 x 4 + 1 = 9 chunks of 1 layer = 9.
    CHECK(v.activations == doctest::Approx(one.activations * 9.0 / 6.0));
    // Rank 0 holds virtual stages 0 and 7: the embedding and the head, both.
    const auto sc = four_ranks("dualpipev");
    auto rs = parallel::resolve_degrees(sc, sc.strategies.at(1));
    const auto split = parallel::split_layers(sc, sc.strategies.at(1), rs, cm);
    REQUIRE(split.size() == 8);
    CHECK(rs.stage_layers.at(0) == parallel::LayerRange{0, 8});
    CHECK(rs.stage_layers.at(3) == parallel::LayerRange{3, 5});
    CHECK(memory("dualpipev", 0).weights > v.weights);
}

TEST_CASE("dualpipev: first/last_stage_layers set the first and last of the 2 pp virtual stages, both on rank 0") {
    const LayerGemmsOnly cm;
    // 8 layers, pp 2: 4 virtual stages; the first and last take 1 layer
    // each, the middle two split the other 6: 3 and 3.
    const auto sc = four_ranks("dualpipev", {"gpus=2", "strategies[1].pp=2", "strategies[1].first_stage_layers=1",
                                             "strategies[1].last_stage_layers=1"});
    auto rs = parallel::resolve_degrees(sc, sc.strategies.at(1));
    const auto split = parallel::split_layers(sc, sc.strategies.at(1), rs, cm);
    CHECK(split == std::vector<parallel::LayerRange>{{0, 1}, {1, 4}, {4, 7}, {7, 8}});
}

TEST_CASE("dualpipev: odd counts accepted, fewer than 2 x pp micro-batches or layers refused") {
    // 4 ranks, 9 micro-batches (odd: DualPipe refuses it, DualPipeV.step does not).
    const auto odd = four_ranks("dualpipev", {"workload.global_batch=9"});
    CHECK(parallel::resolve_degrees(odd, odd.strategies.at(1)).microbatches == 9);
    const auto odd_dual = four_ranks("dualpipe", {"workload.global_batch=9"});
    CHECK_THROWS_AS(parallel::resolve_degrees(odd_dual, odd_dual.strategies.at(1)), ConfigError);
    // pp 3 (odd: DualPipe refuses it).
    const auto three = four_ranks("dualpipev", {"gpus=3", "strategies[1].pp=3", "model.layers=6"});
    CHECK(parallel::resolve_degrees(three, three.strategies.at(1)).pp == 3);
    const auto few = four_ranks("dualpipev", {"workload.global_batch=7"});
    CHECK_THROWS_WITH_AS(parallel::resolve_degrees(few, few.strategies.at(1)),
                         doctest::Contains("dualpipev needs at least 2 x pp = 8 micro-batches"), ConfigError);
    const auto shallow = four_ranks("dualpipev", {"model.layers=7"});
    CHECK_THROWS_WITH_AS(parallel::resolve_degrees(shallow, shallow.strategies.at(1)),
                         doctest::Contains("dualpipev cuts the model into 2 x pp = 8 chunks, more than its 7 layers"),
                         ConfigError);
}

TEST_SUITE_END();
