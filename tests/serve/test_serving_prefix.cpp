// Prefix caching with a shared prefix: after the first request computes it,
// every later request skips its whole blocks (less the last prompt token),
// so the tokens fed drop by exactly that, the first token comes sooner, and
// the prefix's blocks stay held at the end.
#include "serve_fixture.h"
#include "sim/core/error.h"

#include <doctest/doctest.h>

TEST_SUITE_BEGIN("e2e");

using namespace sim;
using serve_test::serve_with;

TEST_CASE("a shared prefix is computed once per replica and skipped by every later request") {
    // One request per second, each done in a fraction of one: request 0
    // computes the 512-token prefix (32 blocks of 16), requests 1..9 skip it.
    const std::string work =
        "    arrivals: {process: fixed, rate: 1}\n"
        "    prompt_tokens: {distribution: fixed, value: 1024}\n"
        "    output_tokens: {distribution: fixed, value: 16}\n    requests: 10\n";
    const auto plain = serve_with(work);
    const auto cached = serve_with(work + "    prefix_cache: {shared_prefix_tokens: 520}\n");
    CHECK(plain.result.tokens_fed == 10 * (1024 + 15));
    CHECK(cached.result.tokens_fed == 10 * (1024 + 15) - 9 * 512);  // 520 tokens: 32 whole blocks
    CHECK(cached.result.records[0].prefix_hit_tokens == 0);
    for (std::size_t i = 1; i < 10; ++i) CHECK(cached.result.records[i].prefix_hit_tokens == 512);
    CHECK(cached.summary.prefix_hit_rate == doctest::Approx(0.9));
    CHECK(cached.summary.prefix_tokens_skipped == 9 * 512);
    // Half the prompt to prefill: the first token comes sooner.
    const auto ttft = [](const serve::RequestRecord& r) { return r.first_token_s - r.request.arrival_s; };
    CHECK(ttft(cached.result.records[0]) == doctest::Approx(ttft(plain.result.records[0])));
    CHECK(ttft(cached.result.records[5]) < 0.7 * ttft(plain.result.records[5]));
    // The cache keeps the prefix's 32 blocks; everything else came back.
    CHECK(cached.result.timeline.back().kv_blocks == 32);
    CHECK(plain.result.timeline.back().kv_blocks == 0);
}

TEST_CASE("prefix caching with preemption: preempted sequences keep the prefix and all finish") {
    const auto s = serve_with(serve_test::kSmallPool + "    prefix_cache: {shared_prefix_tokens: 256}\n");
    CHECK(s.result.preemptions > 0);
    for (const auto& r : s.result.records) CHECK(r.finish_s > 0);
    CHECK(s.result.timeline.back().kv_blocks == 16);
    CHECK(s.summary.prefix_hit_rate > 0.5);
}

TEST_CASE("prefix caching is refused with disaggregation and when the prefix fills the pool") {
    const std::string lengths =
        "    arrivals: {process: fixed, rate: 1}\n"
        "    prompt_tokens: {distribution: fixed, value: 64}\n"
        "    output_tokens: {distribution: fixed, value: 8}\n    requests: 2\n";
    const auto disagg = serve_test::scenario(lengths +
                                                 "    prefix_cache: {shared_prefix_tokens: 32}\n"
                                                 "    disaggregation: {prefill_replicas: 1}\n",
                                             "s", 2);
    CHECK_THROWS_AS(serve::simulate_serving(disagg, disagg.strategies.front(), {}), ConfigError);
    const auto huge = serve_test::scenario(lengths + "    prefix_cache: {shared_prefix_tokens: 16000000}\n");
    CHECK_THROWS_AS(serve::simulate_serving(huge, huge.strategies.front(), {}), ConfigError);
}

TEST_SUITE_END();
