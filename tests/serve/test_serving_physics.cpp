// Serving physics with answers known in advance: an unloaded server answers
// in the isolated prefill time; above saturation the queue grows without
// bound and the report says so; chunked prefill protects decodes from long
// prompts; static batching makes late arrivals wait for the whole batch; the
// KV pool is empty again at the end; the decode-context bucket moves
// latencies by little.
#include "serve_fixture.h"
#include "sim/report/runner.h"
#include "sim/serve/serve_report.h"
#include "sim/serve/simulator.h"

#include <doctest/doctest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

TEST_SUITE_BEGIN("e2e");

using namespace sim;
using serve_test::serve_with;

TEST_CASE("at a low rate TTFT is the isolated prefill time that `run` reports") {
    // One request every 10 s, each done in well under a second: nobody queues.
    const auto s = serve_with(
        "    arrivals: {process: fixed, rate: 0.1}\n    prompt_tokens: {distribution: fixed, value: 1024}\n"
        "    output_tokens: {distribution: fixed, value: 16}\n    requests: 5\n");
    CHECK(s.summary.queue_ms.p99 == 0);
    CHECK(s.summary.ttft_ms.p50 == doctest::Approx(s.summary.ttft_ms.p99));  // every request alike
    CHECK_FALSE(s.summary.overloaded);

    // The same request as `parasim run` sees it: a batch of one at t = 0.
    auto sc = serve_test::scenario(
        "    arrivals: {process: fixed, rate: 0.1}\n    prompt_tokens: {distribution: fixed, value: 1024}\n"
        "    output_tokens: {distribution: fixed, value: 16}\n    requests: 5\n");
    sc.workload.serving.reset();
    sc.workload.batch = 1;
    sc.workload.prompt_tokens = 1024;
    sc.workload.output_tokens = 16;
    sc.workload.decode_steps_simulated = 3;
    const auto run = report::run_strategy(sc, sc.strategies.front(), {});
    REQUIRE(run.metrics.ttft_ms);
    // Same kernels; the serving pass writes K/V to the paged cache and runs
    // the head on the last token only, so allow 2%.
    CHECK(s.summary.ttft_ms.p50 == doctest::Approx(*run.metrics.ttft_ms).epsilon(0.02));
    REQUIRE(run.metrics.tpot_ms);
    CHECK(s.summary.tpot_ms.p50 == doctest::Approx(*run.metrics.tpot_ms).epsilon(0.05));
}

TEST_CASE("above saturation the queueing delay grows and the report says overloaded") {
    const std::string lengths =
        "    prompt_tokens: {distribution: fixed, value: 1024}\n"
        "    output_tokens: {distribution: fixed, value: 256}\n    requests: 600\n    decode_context_bucket: 16\n";
    const auto light = serve_with("    arrivals: {process: poisson, rate: 2}\n" + lengths);
    const auto heavy = serve_with("    arrivals: {process: poisson, rate: 200}\n" + lengths);
    CHECK_FALSE(light.summary.overloaded);
    CHECK(heavy.summary.overloaded);
    CHECK(heavy.summary.queue_slope > 0.1);
    // The delay grows along the run: the last arrivals wait far longer than the first.
    const auto& rec = heavy.result.records;
    const auto wait = [](const serve::RequestRecord& r) { return r.first_scheduled_s - r.request.arrival_s; };
    CHECK(wait(rec.back()) > 10 * wait(rec[rec.size() / 10]));
    CHECK(heavy.summary.queue_ms.p99 > 100 * light.summary.queue_ms.p99);
    // Served throughput saturates far below the offered rate.
    CHECK(heavy.summary.requests_per_s < heavy.summary.offered_rate / 2);
    const auto table = serve::serve_table(
        serve_test::scenario("    arrivals: {process: poisson, rate: 200}\n" + lengths), heavy.result, heavy.summary);
    CHECK(table.find("OVERLOADED") != std::string::npos);
}

TEST_CASE("chunked prefill lowers P99 TPOT against continuous batching on long prompts mixed with decodes") {
    const std::string work =
        "    arrivals: {process: poisson, rate: 6}\n"
        "    prompt_tokens: {distribution: uniform, min: 1500, max: 6000}\n"
        "    output_tokens: {distribution: uniform, min: 64, max: 256}\n"
        "    requests: 150\n    decode_context_bucket: 16\n";
    const auto cont = serve_with(work + "    scheduler: continuous\n");
    const auto chunk = serve_with(work + "    scheduler: chunked-prefill\n    max_tokens_per_iteration: 512\n");
    MESSAGE("P99 TPOT continuous " << cont.summary.tpot_ms.p99 << " ms, chunked " << chunk.summary.tpot_ms.p99
                                   << " ms; longest gap P99 " << cont.summary.max_gap_ms.p99 << " vs "
                                   << chunk.summary.max_gap_ms.p99);
    CHECK(chunk.summary.tpot_ms.p99 < cont.summary.tpot_ms.p99);
    CHECK(chunk.summary.max_gap_ms.p99 < cont.summary.max_gap_ms.p99);
}

TEST_CASE("static batching: a request that arrives during a batch waits for the whole batch") {
    const auto dir = std::filesystem::temp_directory_path();
    const auto trace = dir / ("parasim-serve-static-" + std::to_string(::getpid()) + ".csv");
    {
        std::ofstream f(trace);
        f << "arrival_s,prompt_tokens,output_tokens\n0,128,200\n0.01,128,10\n";
    }
    const std::string block = "    arrivals: {process: trace, file: " + trace.string() + "}\n";
    const auto st = serve_with(block + "    scheduler: static\n");
    const auto co = serve_with(block + "    scheduler: continuous\n");
    std::filesystem::remove(trace);
    const auto& a = st.result.records;
    CHECK(a[1].first_scheduled_s >= a[0].finish_s);
    // Continuous batching lets it in at the next iteration: it finishes first.
    const auto& b = co.result.records;
    CHECK(b[1].first_scheduled_s < b[0].finish_s);
    CHECK(b[1].finish_s < b[0].finish_s);
}

TEST_CASE("closed-loop clients: never more than `concurrency` requests in the engine, each sent as one finishes") {
    const auto s = serve_with(
        "    arrivals: {process: closed, concurrency: 3}\n"
        "    prompt_tokens: {distribution: uniform, min: 100, max: 900}\n"
        "    output_tokens: {distribution: uniform, min: 10, max: 80}\n    requests: 30\n");
    const auto& rec = s.result.records;
    for (std::size_t i = 0; i < 3; ++i) CHECK(rec[i].request.arrival_s == 0);
    for (const auto& p : s.result.timeline) CHECK(p.batch <= 3);
    // Every later request arrives exactly when an earlier one finishes.
    for (std::size_t i = 3; i < rec.size(); ++i) {
        bool matched = false;
        for (std::size_t j = 0; j < i; ++j) matched = matched || rec[j].finish_s == rec[i].request.arrival_s;
        CHECK(matched);
    }
    CHECK_FALSE(s.summary.overloaded);
}

TEST_CASE("with a small KV pool sequences are preempted, recomputed, and every block comes back") {
    const auto s = serve_with(serve_test::kSmallPool);
    CHECK(s.result.pool.blocks < 1000);
    CHECK(s.result.preemptions > 0);
    CHECK(s.result.timeline.back().kv_blocks == 0);
    for (const auto& r : s.result.records) CHECK(r.finish_s > 0);
    CHECK(s.summary.peak_kv_use <= 1.0);
    CHECK(s.summary.peak_kv_use > 0.9);
}

TEST_CASE("a preempted sequence whose recompute exceeds the token budget runs alone and finishes") {
    // Prompts of 512 fit the budget of 600; after 100 or more generated
    // tokens a preempted sequence must prefill more than 600 again.
    const auto s = serve_with(serve_test::kSmallPool + "    max_tokens_per_iteration: 600\n");
    CHECK(s.result.preemptions > 0);
    for (const auto& r : s.result.records) CHECK(r.finish_s > 0);
}

// Numbers, not physics, and ~10 s: the slow tier (not run under ASan).
TEST_CASE("bucketing decode contexts by 16 tokens moves TPOT by under 1%" * doctest::test_suite("slow")) {
    const std::string work =
        "    arrivals: {process: poisson, rate: 10}\n"
        "    prompt_tokens: {distribution: lognormal, mean: 600, sigma: 0.8, max: 4096}\n"
        "    output_tokens: {distribution: lognormal, mean: 200, sigma: 0.8, max: 2048}\n    requests: 300\n";
    const auto exact = serve_with(work);
    const auto bucketed = serve_with(work + "    decode_context_bucket: 16\n");
    CHECK(bucketed.summary.tpot_ms.p50 == doctest::Approx(exact.summary.tpot_ms.p50).epsilon(0.01));
    CHECK(bucketed.summary.tpot_ms.p99 == doctest::Approx(exact.summary.tpot_ms.p99).epsilon(0.01));
    CHECK(bucketed.summary.tpot_ms.p50 >= exact.summary.tpot_ms.p50);  // contexts only round up
    CHECK(bucketed.result.cache_hits > exact.result.cache_hits);
}

TEST_SUITE_END();
