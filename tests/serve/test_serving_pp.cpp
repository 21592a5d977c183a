// Pipeline parallelism inside a serving replica (docs/serving.md, "Pipeline
// parallelism"), with answers computed from each stage's own iteration
// time: a lone request's TTFT is its prefill on both stages plus one
// activation send; at saturation two batches in flight keep the slowest
// stage busy, so a batch's decode step comes round every pp x that stage's
// time; the KV pool is the one the fullest stage leaves; a pp the model
// cannot be split into is refused at the strategy's line, as `run` does.
#include "serve_fixture.h"
#include "sim/core/error.h"
#include "sim/hw/cost_model.h"
#include "sim/parallel/builder.h"
#include "sim/parallel/strategy.h"
#include "sim/serve/iteration_cost.h"
#include "sim/serve/simulator.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

TEST_SUITE_BEGIN("e2e");

using namespace sim;

namespace {

// Llama 3 8B over `pp` stages of tp 1 (one replica), by default on one DGX H100.
config::ScenarioSpec pp_scenario(const std::string& block, int pp, const std::string& cluster = "dgx-h100") {
    auto sc = serve_test::scenario(block, "s", pp, 1, cluster);
    sc.strategies.front().pp = pp;
    return sc;
}

// Ratios are compared to 1 (doctest's Approx adds 1 to the scale, so times
// in seconds would be compared absolutely).

// Stage s's time for `batch` alone (the plan of `run`'s partitioner, built
// the way the simulator builds a replica's).
Time stage_time(const config::ScenarioSpec& sc, int s, const parallel::IterationBatch& batch) {
    const auto cm = hw::make_cost_model("roofline");
    const auto base = parallel::build_plan(sc, sc.strategies.front(), *cm, parallel::BuildOptions{});
    serve::IterationCost cost(sc, base, *cm, s);
    return cost.time(batch);
}

const std::string kTwo =
    "    arrivals: {process: fixed, rate: 1}\n    requests: 2\n"
    "    prompt_tokens: {distribution: fixed, value: 64}\n    output_tokens: {distribution: fixed, value: 4}\n";

// Serving `sc` is a ConfigError at a line of its file whose message holds `text`.
void check_refused(const config::ScenarioSpec& sc, const std::string& text) {
    try {
        serve::simulate_serving(sc, sc.strategies.front(), {});
        FAIL("no ConfigError");
    } catch (const ConfigError& e) {
        CHECK(e.where().line > 0);
        CHECK(std::string(e.what()).find(text) != std::string::npos);
    }
}

}  // namespace

TEST_CASE("pp 2 at a low rate: TTFT is the prefill on both stages plus one activation send over NVLink") {
    const std::string block =
        "    arrivals: {process: fixed, rate: 1}\n"
        "    prompt_tokens: {distribution: fixed, value: 512}\n"
        "    output_tokens: {distribution: fixed, value: 4}\n"
        "    requests: 3\n";
    const auto sc = pp_scenario(block, 2);
    const auto r = serve::simulate_serving(sc, sc.strategies.front(), {});
    REQUIRE(r.pp == 2);
    REQUIRE(r.replicas == 1);
    const parallel::IterationBatch prefill{{{1, 512, 512}}, 1};
    const double t0 = stage_time(sc, 0, prefill).seconds(), t1 = stage_time(sc, 1, prefill).seconds();
    // 512 tokens x 4,096 hidden x 2 bytes (BF16), GPU 0 to GPU 1 through the
    // NVSwitch: two NVLink hops of 450 GB/s and 0.6 us each.
    const double send = 512.0 * 4096 * 2 / 450e9 + 2 * 0.6e-6;
    for (const auto& rec : r.records) {
        CAPTURE(rec.request.arrival_s);
        CHECK((rec.first_token_s - rec.request.arrival_s) / (t0 + send + t1) == doctest::Approx(1).epsilon(1e-6));
    }
    // The same as the whole iteration's plan with the send inside it (what
    // `run` builds for pp 2).
    const auto cm = hw::make_cost_model("roofline");
    const auto base = parallel::build_plan(sc, sc.strategies.front(), *cm, parallel::BuildOptions{});
    serve::IterationCost whole(sc, base, *cm);
    CHECK(whole.time(prefill).seconds() / (t0 + send + t1) == doctest::Approx(1).epsilon(1e-3));
}

TEST_CASE("pp 2 at saturation: two batches in flight keep the slowest stage busy") {
    // 64 clients send at once, 32 per batch: two batches of 32 decodes
    // alternate. The last stage (with the LM head) is the slower; while it
    // runs one batch, the other crosses stage 0 and the send, so each batch
    // decodes once every 2 x T1: one iteration per T1, the slowest stage's
    // bound, pp x the rate of a lone batch if T0 = T1.
    const std::string lengths =
        "    prompt_tokens: {distribution: fixed, value: 128}\n"
        "    output_tokens: {distribution: fixed, value: 256}\n    max_batch: 32\n";
    const auto sc = pp_scenario("    arrivals: {process: closed, concurrency: 64}\n    requests: 64\n" + lengths, 2);
    const auto r = serve::simulate_serving(sc, sc.strategies.front(), {});
    // Decode contexts run from 129 to 383: time the step at the middle.
    const parallel::IterationBatch decode{{{32, 1, 256}}, 32};
    const double t0 = stage_time(sc, 0, decode).seconds(), t1 = stage_time(sc, 1, decode).seconds();
    REQUIRE(t1 > t0);
    const auto mean_tpot = [](const serve::ServeResult& res) {
        double sum = 0;
        for (const auto& rec : res.records) sum += (rec.finish_s - rec.first_token_s) / 255;
        return sum / static_cast<double>(res.records.size());
    };
    CHECK(mean_tpot(r) / (2 * t1) == doctest::Approx(1).epsilon(0.02));
    // Every iteration is one batch: 2 x (1 prefill + 255 decodes).
    CHECK(r.iterations == 2 * 256);
    // A lone batch of 32 (32 clients) crosses the stages one after the
    // other: T0 + send + T1 per step (32 tokens x 8 KiB over two NVLink hops).
    const auto lone_sc =
        pp_scenario("    arrivals: {process: closed, concurrency: 32}\n    requests: 32\n" + lengths, 2);
    const auto lone = serve::simulate_serving(lone_sc, lone_sc.strategies.front(), {});
    const double send = 32.0 * 4096 * 2 / 450e9 + 2 * 0.6e-6;
    CHECK(mean_tpot(lone) / (t0 + send + t1) == doctest::Approx(1).epsilon(0.02));
    // Two batches in flight: twice the tokens in 2 T1 instead of T0 + send + T1.
    CHECK(64 / mean_tpot(r) == doctest::Approx(2 * 32 / mean_tpot(lone) * (t0 + send + t1) / (2 * t1)).epsilon(0.03));
}

TEST_CASE("pp 2: the KV pool is what the fullest stage leaves, each GPU holding its stage's layers") {
    const auto sc = pp_scenario(kTwo, 2);
    const auto r = serve::simulate_serving(sc, sc.strategies.front(), {});
    // 16 layers x 2 (K, V) x 8 KV heads x 128 x 2 bytes per token.
    CHECK(r.pool.bytes_per_token == doctest::Approx(16.0 * 2 * 8 * 128 * 2));
    const auto cm = hw::make_cost_model("roofline");
    const auto base = parallel::build_plan(sc, sc.strategies.front(), *cm, parallel::BuildOptions{});
    std::int64_t blocks = -1;
    for (int s = 0; s < 2; ++s) {
        const double left = sc.gpu.memory_capacity.as_double() * 0.9 -
                            parallel::stage_memory(sc, base.strategy, s, base.strategy.virtual_stage_layers).total();
        const auto b = static_cast<std::int64_t>(std::floor(left / (16 * 65536.0)));
        blocks = blocks < 0 ? b : std::min(blocks, b);
    }
    CHECK(r.pool.blocks == blocks);
    // Half the layers per GPU: about twice the blocks of one GPU holding all 32.
    const auto one = serve_test::serve_with(kTwo);
    CHECK(r.pool.blocks > 2 * one.result.pool.blocks);
}

TEST_CASE("pp the model's layers cannot be split into is refused at the strategy, as run refuses it") {
    // Llama 3 8B has 32 layers: 64 stages (on 8 DGX H100) is more than there are.
    check_refused(pp_scenario(kTwo, 64, "dgx-h100-pod"), "exceeds the model's 32 layers");
}

TEST_CASE("async_scheduling with pp > 1 is refused at its key") {
    check_refused(pp_scenario(kTwo + "    async_scheduling: true\n", 2), "async_scheduling with pp > 1");
}

TEST_SUITE_END();
