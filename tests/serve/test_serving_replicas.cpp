// Replicas, routers and disaggregated prefill/decode with answers known in
// advance: round robin over two replicas at twice the rate is one replica at
// the rate; least outstanding tokens steers around a long prompt; a
// disaggregated request's TTFT is its prefill plus its KV transfer, whose
// time is the bytes over the link; two transfers into one GPU share its
// link; and a decode pool that never prefills keeps long prompts out of TPOT.
#include "serve_fixture.h"
#include "sim/core/error.h"
#include "sim/serve/router/i_router.h"
#include "sim/serve/serve_report.h"
#include "sim/serve/simulator.h"
#include "tests/test_util.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <vector>

TEST_SUITE_BEGIN("e2e");

using namespace sim;
using serve_test::serve_with;

namespace {

const std::string kFixed1024 =
    "    prompt_tokens: {distribution: fixed, value: 1024}\n    output_tokens: {distribution: fixed, value: 64}\n";

}  // namespace

TEST_CASE("routers: round robin cycles, least outstanding tokens takes the smallest load, lowest index on a tie") {
    const auto& rr = serve::serving_router("round-robin");
    const std::vector<std::int64_t> load{5, 0, 7};
    CHECK(rr.pick(load, 0) == 0);
    CHECK(rr.pick(load, 1) == 1);
    CHECK(rr.pick(load, 5) == 2);
    const auto& lot = serve::serving_router("least-outstanding-tokens");
    CHECK(lot.pick(load, 0) == 1);
    const std::vector<std::int64_t> tie{4, 3, 3};
    CHECK(lot.pick(tie, 9) == 1);
    CHECK_THROWS_AS(serve::serving_router("random"), ModelError);
}

TEST_CASE("two replicas behind round robin at twice the rate serve each request as one replica at the rate") {
    // Fixed gaps: replica r gets requests r, r + 2, ..., 1/rate apart, exactly
    // the stream one replica sees at half the rate, shifted in time.
    const std::string rest = kFixed1024 + "    requests: 40\n";
    const auto one = serve_with("    arrivals: {process: fixed, rate: 12}\n" + rest);
    const auto two = serve_with("    arrivals: {process: fixed, rate: 24}\n    requests: 80\n" + kFixed1024, 2);
    REQUIRE(two.result.replicas == 2);
    REQUIRE(two.result.records.size() == 80);
    for (std::size_t i = 0; i < 80; ++i) {
        const auto& a = two.result.records[i];
        const auto& b = one.result.records[i / 2];
        CAPTURE(i);
        CHECK(a.replica == static_cast<int>(i % 2));
        CHECK(a.first_token_s - a.request.arrival_s == doctest::Approx(b.first_token_s - b.request.arrival_s));
        CHECK(a.finish_s - a.request.arrival_s == doctest::Approx(b.finish_s - b.request.arrival_s));
    }
    CHECK(two.result.replica_stats.size() == 2);
    CHECK(two.result.replica_stats[0].requests == 40);
    CHECK(two.result.iterations == 2 * one.result.iterations);
    // Served rate doubles.
    CHECK(two.summary.requests_per_s == doctest::Approx(2 * one.summary.requests_per_s).epsilon(0.02));
}

TEST_CASE("least outstanding tokens sends the next request away from a replica busy with a long prompt") {
    // A trace: a 6,000-token prompt, then two 100-token ones a microsecond apart.
    const auto trace = parasim_test::private_temp("serve-replicas-trace.csv");
    {
        std::ofstream f(trace);
        f << "arrival_s,prompt_tokens,output_tokens\n0,6000,10\n0.000001,100,10\n0.000002,100,10\n";
    }
    const std::string block = "    arrivals: {process: trace, file: " + trace.string() + "}\n";
    const auto rr = serve_with(block + "    router: round-robin\n", 2);
    const auto lot = serve_with(block + "    router: least-outstanding-tokens\n", 2);
    std::filesystem::remove(trace);
    // Round robin: 0, 1, 0. Least outstanding: replica 0 holds 6,010 tokens,
    // replica 1 holds 110 after the second request, so the third goes to 1.
    CHECK(rr.result.records[2].replica == 0);
    CHECK(lot.result.records[1].replica == 1);
    CHECK(lot.result.records[2].replica == 1);
    // It waits less: no 6,000-token prefill ahead of it.
    CHECK(lot.result.records[2].first_token_s < rr.result.records[2].first_token_s);
}

TEST_CASE("routers: random room spreads requests uniformly at random, the same way every run") {
    // splitmix64(0) = 0xE220A8397B1DCDAF (the generator's first output from
    // state 0), which is 3 mod 4 (0xAF = 175 = 43 x 4 + 3).
    const auto& rr = serve::serving_router("random-room");
    const std::vector<std::int64_t> load(4, 0);
    CHECK(rr.pick(load, 0) == 3);
    // 40,000 requests over 4 replicas: each count within 3% of 10,000 (a
    // binomial's standard deviation is 87, so 300 is over 3 of them), and
    // not round robin's cycle.
    std::vector<int> count(4, 0);
    bool cycle = true;
    for (std::uint64_t k = 0; k < 40000; ++k) {
        const auto p = rr.pick(load, k);
        ++count[p];
        cycle = cycle && p == k % 4;
    }
    for (const int c : count) CHECK(std::abs(c - 10000) < 300);
    CHECK(!cycle);
}

TEST_CASE("disaggregated: TTFT is the prefill plus the KV transfer, bytes over NVLink") {
    // One request at a time; 1 prefill + 1 decode replica of one H100 each,
    // GPU 0 -> GPU 1 through the NVSwitch: two NVLink hops of 450 GB/s and
    // 0.6 us each (topologies/dgx-h100.yaml).
    const std::string block = "    arrivals: {process: fixed, rate: 0.5}\n" + kFixed1024 +
                              "    requests: 3\n    disaggregation: {prefill_replicas: 1}\n";
    const auto d = serve_with(block, 2);
    const auto mono = serve_with("    arrivals: {process: fixed, rate: 0.5}\n" + kFixed1024 + "    requests: 3\n");
    REQUIRE(d.result.prefill_replicas == 1);
    const double bytes = 1024 * d.result.pool.bytes_per_token;  // 1,024 tokens x 131,072 B
    CHECK(bytes == 1024.0 * 131072.0);
    const double transfer = bytes / 450e9 + 2 * 0.6e-6;
    for (const auto& rec : d.result.records) {
        CHECK(rec.replica == 0);
        CHECK(rec.decode_replica == 1);
        CHECK(rec.kv_wait_s == 0);
        CHECK(rec.kv_transfer_s == doctest::Approx(transfer).epsilon(1e-6));
        CHECK(rec.first_token_s - rec.prefill_done_s == doctest::Approx(transfer).epsilon(1e-6));
    }
    // The prefill is the same iteration as on a colocated replica.
    const auto& a = d.result.records[1];
    const auto& b = mono.result.records[1];
    CHECK(a.prefill_done_s - a.request.arrival_s == doctest::Approx(b.first_token_s - b.request.arrival_s));
    CHECK(d.summary.ttft_ms.p50 == doctest::Approx(mono.summary.ttft_ms.p50 + transfer * 1e3).epsilon(1e-6));
    CHECK(d.summary.kv_transfer_ms.p50 == doctest::Approx(transfer * 1e3).epsilon(1e-6));
    CHECK(d.summary.kv_transfer_share == doctest::Approx(transfer * 1e3 / d.summary.ttft_ms.mean).epsilon(1e-6));
    // Alone on the decode replica, every later token is one decode step, as colocated.
    CHECK(d.summary.tpot_ms.p50 == doctest::Approx(mono.summary.tpot_ms.p50).epsilon(1e-6));
    CHECK(d.result.kv_bytes_moved == doctest::Approx(3 * bytes).epsilon(1e-9));
}

TEST_CASE("disaggregated: two transfers into one GPU share its NVLink and take twice as long") {
    // Two prefill replicas receive one request each at (almost) the same
    // instant; both caches go to the single decode replica (GPU 2) together.
    const auto trace = parasim_test::private_temp("serve-replicas-pair.csv");
    {
        std::ofstream f(trace);
        f << "arrival_s,prompt_tokens,output_tokens\n0,2048,8\n0,2048,8\n";
    }
    const auto d = serve_with(
        "    arrivals: {process: trace, file: " + trace.string() + "}\n    disaggregation: {prefill_replicas: 2}\n", 3);
    std::filesystem::remove(trace);
    const double bytes = 2048 * d.result.pool.bytes_per_token;
    const auto& r = d.result.records;
    REQUIRE(r[0].replica == 0);
    REQUIRE(r[1].replica == 1);
    REQUIRE(r[0].decode_replica == 2);
    REQUIRE(r[1].decode_replica == 2);
    // Fair shares of GPU 2's ingress link: each at 225 GB/s.
    CHECK(r[0].kv_transfer_s == doctest::Approx(2 * bytes / 450e9 + 2 * 0.6e-6).epsilon(1e-6));
    CHECK(r[1].kv_transfer_s == doctest::Approx(r[0].kv_transfer_s));
}

TEST_CASE("disaggregated: KV across nodes moves on the network, one flow per tensor-parallel rank") {
    // Two DGX H100 nodes, tp 8: the prefill replica is node 0, the decode
    // replica node 1. Rank i sends its 1/8 of the cache through its own
    // 400 Gb/s NIC (topologies/dgx-h100-x2.yaml), so all eight run in parallel.
    const std::string block = "    arrivals: {process: fixed, rate: 0.5}\n" + kFixed1024 +
                              "    requests: 2\n    disaggregation: {prefill_replicas: 1}\n";
    const auto d = serve_with(block, 16, 8, "dgx-h100-x2");
    const double bytes = 1024 * d.result.pool.bytes_per_token;  // per GPU: 1 KV head of 8
    CHECK(d.result.pool.bytes_per_token == doctest::Approx(131072.0 / 8));
    const double t = d.result.records[0].kv_transfer_s;
    // Bandwidth bound by the NIC: bytes / 50 GB/s, plus hop latencies (a few us).
    CHECK(t > bytes / 50e9);
    CHECK(t < bytes / 50e9 + 20e-6);
    CHECK(d.result.kv_bytes_moved == doctest::Approx(2 * 8 * bytes).epsilon(1e-9));
}

TEST_CASE("disaggregated with another tp for decode: each decode rank gets its heads from the ranks that hold them") {
    // 1 prefill replica of tp 1 (GPU 0) and 1 decode replica of tp 2 (GPUs 1,
    // 2): GPU 0 sends each decode GPU its half of the 8 KV heads, 1,024 x
    // 65,536 B; the two flows share GPU 0's NVLink (450 GB/s) out, so each
    // takes as long as the whole cache alone: 134.2 MB / 450 GB/s + 1.2 us.
    const std::string block = "    arrivals: {process: fixed, rate: 0.5}\n" + kFixed1024 +
                              "    requests: 2\n    disaggregation: {prefill_replicas: 1, decode_tp: 2}\n";
    const auto d = serve_with(block, 3);
    REQUIRE(d.result.replicas == 2);
    CHECK(d.result.decode_tp == 2);
    CHECK(d.result.decode_pool.bytes_per_token == doctest::Approx(65536.0));
    CHECK(d.result.replica_stats[1].first_gpu == 1);
    CHECK(d.result.replica_stats[1].tp == 2);
    const double whole = 1024 * 131072.0;
    CHECK(d.result.records[0].kv_transfer_s == doctest::Approx(whole / 450e9 + 2 * 0.6e-6).epsilon(1e-6));
    CHECK(d.result.kv_bytes_moved == doctest::Approx(2 * whole).epsilon(1e-9));
    // The reverse, prefill tp 2 (GPUs 0, 1) into decode tp 1 (GPU 2): two
    // halves into GPU 2's link, the same time.
    const auto r = serve_with("    arrivals: {process: fixed, rate: 0.5}\n" + kFixed1024 +
                                  "    requests: 2\n    disaggregation: {prefill_replicas: 1, decode_tp: 1}\n",
                              3, 2);
    CHECK(r.result.records[0].kv_transfer_s == doctest::Approx(whole / 450e9 + 2 * 0.6e-6).epsilon(1e-6));
    // A decode replica of tp 2 decodes faster than one of tp 1.
    const auto same = serve_with(
        block.substr(0, block.find("    disaggregation")) + "    disaggregation: {prefill_replicas: 1}\n", 2);
    CHECK(d.summary.tpot_ms.p50 < same.summary.tpot_ms.p50);
    // GPUs left over that decode_tp does not divide are an error.
    const auto odd =
        serve_test::scenario("    arrivals: {process: fixed, rate: 1}\n" + kFixed1024 +
                                 "    requests: 2\n    disaggregation: {prefill_replicas: 1, decode_tp: 2}\n",
                             "s", 4);
    CHECK_THROWS_AS(serve::simulate_serving(odd, odd.strategies.front(), {}), ConfigError);
}

TEST_CASE("disaggregation removes prefill interference from TPOT") {
    // Long prompts arriving among decodes: colocated on two replicas, every
    // prefill stalls the decodes of its replica; disaggregated (one prefill,
    // one decode replica), decode iterations hold decodes only.
    const std::string work =
        "    arrivals: {process: poisson, rate: 4}\n"
        "    prompt_tokens: {distribution: uniform, min: 1500, max: 6000}\n"
        "    output_tokens: {distribution: uniform, min: 100, max: 300}\n    requests: 120\n"
        "    decode_context_bucket: 16\n";
    const auto colocated = serve_with(work, 2);
    const auto disagg = serve_with(work + "    disaggregation: {prefill_replicas: 1}\n", 2);
    CAPTURE(colocated.summary.tpot_ms.p99);
    CAPTURE(disagg.summary.tpot_ms.p99);
    CHECK(disagg.summary.tpot_ms.p99 < 0.85 * colocated.summary.tpot_ms.p99);
    CHECK(disagg.summary.max_gap_ms.p99 < 0.2 * colocated.summary.max_gap_ms.p99);
    // Every request ran its prefill on replica 0 and decoded on replica 1.
    for (const auto& rec : disagg.result.records) {
        CHECK(rec.replica == 0);
        CHECK(rec.decode_replica == 1);
    }
    CHECK(disagg.result.replica_stats[1].requests == 120);
    // Both pools end with every KV block returned.
    CHECK(disagg.summary.kv_transfer_share > 0);
    CHECK(disagg.summary.kv_transfer_share < 0.2);
}

TEST_CASE("replica and disaggregation input errors name the file, line and column") {
    const auto sc = serve_test::scenario("    arrivals: {process: fixed, rate: 1}\n" + kFixed1024 +
                                             "    requests: 2\n    disaggregation: {prefill_replicas: 2}\n",
                                         "s", 2);
    try {
        serve::simulate_serving(sc, sc.strategies.front(), {});
        FAIL("expected a ConfigError");
    } catch (const ConfigError& e) {
        const std::string what = e.what();
        CHECK(what.find(":14:21: ") != std::string::npos);
        CHECK(what.find("2 prefill replicas leave no decode replica") != std::string::npos);
    }
    const auto odd =
        serve_test::scenario("    arrivals: {process: fixed, rate: 1}\n" + kFixed1024 + "    requests: 2\n", "s", 3, 2);
    CHECK_THROWS_AS(serve::simulate_serving(odd, odd.strategies.front(), {}), ConfigError);
    const auto stat = serve_test::scenario("    arrivals: {process: fixed, rate: 1}\n" + kFixed1024 +
                                               "    requests: 2\n    scheduler: static\n"
                                               "    disaggregation: {prefill_replicas: 1}\n",
                                           "s", 2);
    CHECK_THROWS_AS(serve::simulate_serving(stat, stat.strategies.front(), {}), ConfigError);
}

TEST_SUITE_END();
