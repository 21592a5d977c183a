// Preemption by swap to host memory: a swapped sequence keeps its cache, so
// every token goes through the model exactly once (recompute feeds some
// again), every byte swapped out comes back, and the iterations pay the
// bytes over each GPU's PCIe link.
#include "serve_fixture.h"
#include "sim/core/error.h"

#include <doctest/doctest.h>

TEST_SUITE_BEGIN("e2e");

using namespace sim;
using serve_test::serve_with;

TEST_CASE("preemption by swap feeds every token once and pays the bytes over PCIe") {
    const std::string& work = serve_test::kSmallPool;  // sequences must be preempted
    const auto recompute = serve_with(work);
    const auto swap = serve_with(work + "    preemption: swap\n");
    REQUIRE(recompute.result.preemptions > 0);
    REQUIRE(swap.result.preemptions > 0);
    // Each request feeds its prompt and every output token but the last.
    const std::uint64_t once = 40 * (512 + 1536 - 1);
    CHECK(swap.result.tokens_fed == once);
    CHECK(recompute.result.tokens_fed > once);
    CHECK(recompute.result.swap_out_bytes == 0);
    // Whatever went out came back, in whole tokens of 131,072 B.
    CHECK(swap.result.swap_out_bytes > 0);
    CHECK(swap.result.swap_in_bytes == swap.result.swap_out_bytes);
    const double tokens = swap.result.swap_out_bytes / swap.result.pool.bytes_per_token;
    CHECK(tokens == doctest::Approx(std::round(tokens)));
    // The time: bytes at 63 GB/s (the DGX H100's PCIe Gen5 x16) plus 1 us per
    // direction per iteration that swapped (at most two per preemption).
    const double bytes_time = (swap.result.swap_out_bytes + swap.result.swap_in_bytes) / 63e9;
    CHECK(swap.result.swap_time_s >= bytes_time);
    CHECK(swap.result.swap_time_s <= bytes_time + 2e-6 * static_cast<double>(swap.result.preemptions) + 1e-9);
    for (const auto& r : swap.result.records) CHECK(r.finish_s > 0);
    CHECK(swap.result.timeline.back().kv_blocks == 0);
}

TEST_CASE("preemption by swap needs a PCIe link and a known name") {
    CHECK_THROWS_AS(serve_test::scenario("    arrivals: {process: fixed, rate: 1}\n"
                                         "    prompt_tokens: {distribution: fixed, value: 8}\n"
                                         "    output_tokens: {distribution: fixed, value: 8}\n"
                                         "    requests: 2\n    preemption: evict\n"),
                    ConfigError);
}

TEST_SUITE_END();
