// The disaggregated handover's software (docs/serving.md, "The handover's
// software") with answers by hand: the receiving worker posts one transfer
// descriptor per block and region before a cache's flows start, serially
// across the caches it receives; and with the first token on the decode
// engine, the last prompt token is recomputed there and the first token the
// client sees comes from that step; vLLM's P2pNcclConnector posts no
// descriptors, pushes the cache when the prefill ends, copies it once on
// each side, and lets the decode engine take blocks for it only when it
// schedules the request; and a proxy that dispatches serially hands the
// request to the decode engine's own front end only once the prefill has
// ended.
#include "serve_fixture.h"
#include "sim/serve/serve_report.h"
#include "sim/serve/simulator.h"
#include "tests/test_util.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

TEST_SUITE_BEGIN("e2e");

using namespace sim;

namespace {

// Llama 3 8B: 32 layers, each with K and V, so 64 regions a 16-token block.
constexpr double kPost = 3.4e-6;  // seconds a descriptor

serve_test::Served serve_handover(const std::string& block, int gpus, Time post, bool first_token_on_decode) {
    auto sc = serve_test::scenario(block, "s", gpus);
    sc.profile.serving_kv_descriptor_post = post;
    sc.profile.serving_first_token_on_decode = first_token_on_decode;
    serve_test::Served s{serve::simulate_serving(sc, sc.strategies.front(), {}), {}};
    s.summary = serve::summarize(sc, s.result);
    return s;
}

const std::string kOneAtATime =
    "    arrivals: {process: fixed, rate: 0.5}\n"
    "    prompt_tokens: {distribution: fixed, value: 1024}\n    output_tokens: {distribution: fixed, value: 64}\n"
    "    requests: 3\n    disaggregation: {prefill_replicas: 1}\n";

// More caches land than one decode slot drains, into a decode pool of 849
// blocks (22% of the H100's memory).
const std::string kOverload =
    "    arrivals: {process: poisson, rate: 10}\n"
    "    prompt_tokens: {distribution: lognormal, mean: 600, sigma: 0.8, max: 4096}\n"
    "    output_tokens: {distribution: lognormal, mean: 200, sigma: 0.8, max: 2048}\n"
    "    requests: 40\n    seed: 1\n    max_batch: 1\n    gpu_memory_utilization: 0.22\n";

}  // namespace

TEST_CASE("handover: a 1,024-token cache posts 64 blocks x 64 regions before its bytes move") {
    const auto d = serve_handover(kOneAtATime, 2, Time::ns(3400), false);
    REQUIRE(d.result.pool.regions_per_block == 64);
    const double bytes = 1024.0 * 131072.0;
    // 4,096 descriptors x 3.4 us = 13.926 ms, then the flow of
    // docs/serving.md's hand check (two NVLink hops of 450 GB/s, 0.6 us each).
    const double transfer = 4096 * kPost + bytes / 450e9 + 2 * 0.6e-6;
    for (const auto& rec : d.result.records) {
        CHECK(rec.kv_transfer_s == doctest::Approx(transfer).epsilon(1e-6));
        CHECK(rec.first_token_s - rec.prefill_done_s == doctest::Approx(transfer).epsilon(1e-6));
    }
    // Without the term, the transfer is the flow alone (nothing else moves).
    const auto none = serve_handover(kOneAtATime, 2, Time{}, false);
    CHECK(none.result.records[0].kv_transfer_s == doctest::Approx(bytes / 450e9 + 2 * 0.6e-6).epsilon(1e-6));
    CHECK(d.summary.ttft_ms.p50 == doctest::Approx(none.summary.ttft_ms.p50 + 4096 * kPost * 1e3).epsilon(1e-6));
}

TEST_CASE("handover: vLLM's P2pNcclConnector posts no descriptors, its bytes still move") {
    // The same 1,024-token caches with `connector: p2p-nccl` and the posting
    // cost of 3.4 us still in the profile: the prefill pushes each layer's K
    // and V as one NCCL send, so the transfer is the flow alone, 134.2 MB over
    // two NVLink hops of 450 GB/s and 0.6 us each (298.3 us + 1.2 us), and it
    // starts when the prefill ends: no decode block is reserved for it.
    std::string block = kOneAtATime;
    block.replace(block.find("{prefill_replicas: 1}"), 21, "{prefill_replicas: 1, connector: p2p-nccl}");
    const auto d = serve_handover(block, 2, Time::ns(3400), false);
    const double flow = 1024.0 * 131072.0 / 450e9 + 2 * 0.6e-6;
    for (const auto& rec : d.result.records) {
        CHECK(rec.kv_transfer_s == doctest::Approx(flow).epsilon(1e-6));
        CHECK(rec.kv_wait_s == 0.0);
        CHECK(rec.first_token_s - rec.prefill_done_s > flow);  // then the decode engine's first step
    }
    CHECK(d.result.kv_bytes_moved == doctest::Approx(3 * 1024.0 * 131072.0));
}

TEST_CASE("handover: the P2pNcclConnector copies a cache once on each side, one kernel a layer") {
    // One request at a time (nothing queues), first token on the decode
    // engine both ways. The prefill's step that ends the prompt gathers its
    // 1,024 tokens out of the paged cache, and the decode's step that
    // schedules it scatters them into its blocks: on each side 32 kernels,
    // each reading and writing a layer's 4,194,304 B at the H100's
    // 3,350 GB/s x 0.91 after its 5.5 us launch, 32 x 8.2517 us = 264.05 us.
    // The flow starts when the prefill ends either way (no descriptors
    // posted here), so the first token comes exactly two copies later than
    // the NixlConnector's, and every later token as much later.
    const double copy = 32 * (5.5e-6 + 2 * 4194304.0 / (3350e9 * 0.91));
    std::string push = kOneAtATime;
    push.replace(push.find("{prefill_replicas: 1}"), 21, "{prefill_replicas: 1, connector: p2p-nccl}");
    const auto nixl = serve_handover(kOneAtATime, 2, Time{}, true);
    const auto p2p = serve_handover(push, 2, Time{}, true);
    for (std::size_t i = 0; i < 3; ++i) {
        const auto& a = p2p.result.records[i];
        const auto& b = nixl.result.records[i];
        CHECK(a.prefill_done_s - b.prefill_done_s == doctest::Approx(copy).epsilon(1e-6));
        CHECK(a.kv_transfer_s == doctest::Approx(b.kv_transfer_s).epsilon(1e-9));
        CHECK(a.first_token_s - b.first_token_s == doctest::Approx(2 * copy).epsilon(1e-6));
        CHECK(a.finish_s - b.finish_s == doctest::Approx(2 * copy).epsilon(1e-6));
    }
    CHECK(p2p.result.replica_stats[1].iterations == nixl.result.replica_stats[1].iterations);
}

TEST_CASE("handover: a serial dispatch passes the decode engine's front end after the prefill") {
    // One request at a time, with the front end's 15 ms of intake work and
    // 20 ms of latency: dispatched serially, each request reaches the decode
    // engine 35 ms after its prefill ends, and only then is its cache read;
    // so its first token comes exactly 35 ms later than when the proxy sent
    // it on concurrently (no queue anywhere: one request every 2 s).
    const auto run = [](const std::string& block) {
        auto sc = serve_test::scenario(block, "s", 2);
        sc.profile.serving_kv_descriptor_post = Time::ns(3400);
        sc.profile.serving_request_overhead = Time::us(15000);
        sc.profile.serving_request_latency = Time::us(20000);
        serve_test::Served s{serve::simulate_serving(sc, sc.strategies.front(), {}), {}};
        s.summary = serve::summarize(sc, s.result);
        return s;
    };
    std::string serial = kOneAtATime;
    serial.replace(serial.find("{prefill_replicas: 1}"), 21, "{prefill_replicas: 1, dispatch: serial}");
    const auto c = run(kOneAtATime), s = run(serial);
    for (std::size_t i = 0; i < 3; ++i) {
        const auto& a = s.result.records[i];
        const auto& b = c.result.records[i];
        CHECK(a.prefill_done_s == doctest::Approx(b.prefill_done_s));
        CHECK(a.kv_wait_s == doctest::Approx(0.0));
        CHECK(a.kv_transfer_s == doctest::Approx(b.kv_transfer_s));
        CHECK(a.first_token_s - b.first_token_s == doctest::Approx(0.035).epsilon(1e-9));
    }
}

TEST_CASE("handover: two caches into one GPU are posted one after the other") {
    // Two prefill replicas hand a 2,048-token cache each to decode GPU 2 at
    // the same instant: 128 blocks x 64 regions = 8,192 descriptors each,
    // 27.85 ms; the first cache's flow (0.60 ms) ends before the second's
    // posting does, so neither shares the link.
    const auto trace = parasim_test::private_temp("serve-handover-pair.csv");
    {
        std::ofstream f(trace);
        f << "arrival_s,prompt_tokens,output_tokens\n0,2048,8\n0,2048,8\n";
    }
    const auto d = serve_handover(
        "    arrivals: {process: trace, file: " + trace.string() + "}\n    disaggregation: {prefill_replicas: 2}\n", 3,
        Time::ns(3400), false);
    std::filesystem::remove(trace);
    const auto& r = d.result.records;
    REQUIRE(r[0].decode_replica == 2);
    REQUIRE(r[1].decode_replica == 2);
    const double post = 8192 * kPost, flow = 2048.0 * 131072.0 / 450e9 + 2 * 0.6e-6;
    CHECK(std::min(r[0].kv_transfer_s, r[1].kv_transfer_s) == doctest::Approx(post + flow).epsilon(1e-6));
    CHECK(std::max(r[0].kv_transfer_s, r[1].kv_transfer_s) == doctest::Approx(2 * post + flow).epsilon(1e-6));
}

TEST_CASE("handover: with the first token on the decode engine, its recompute step comes before every token") {
    // One request at a time: the decode engine runs one more step per
    // request (the last prompt token, which samples the first output token),
    // and every later token is the same decode step as when the first token
    // came with the cache, one step later. So the request ends later by
    // exactly the time from the cache's landing to its first token.
    const auto seed = serve_handover(kOneAtATime, 2, Time{}, false);
    const auto recompute = serve_handover(kOneAtATime, 2, Time{}, true);
    REQUIRE(recompute.result.replica_stats.size() == 2);
    CHECK(recompute.result.replica_stats[1].iterations == 3 * 64);
    CHECK(seed.result.replica_stats[1].iterations == 3 * 63);
    CHECK(recompute.result.tokens_fed == seed.result.tokens_fed + 3);
    for (std::size_t i = 0; i < 3; ++i) {
        const auto& a = recompute.result.records[i];
        const auto& b = seed.result.records[i];
        CHECK(a.prefill_done_s == doctest::Approx(b.prefill_done_s));
        CHECK(a.kv_transfer_s == doctest::Approx(b.kv_transfer_s));
        const double landed = a.prefill_done_s + a.kv_transfer_s;
        const double step = a.first_token_s - landed;
        CHECK(step > 1e-4);  // a 1-token step of an 8B model: a fraction of a millisecond or more
        CHECK(a.finish_s - b.finish_s == doctest::Approx(step).epsilon(1e-6));
    }
}

TEST_CASE("handover: a decode engine whose pool is held by queued caches drops them and finishes every request") {
    // Caches land faster than one decode slot drains them, so the decode
    // pool (849 blocks) fills with received caches queued for their
    // first-token step; a decode that then preempts the running request
    // puts it at the queue's front with nothing running, and only dropping
    // queued caches lets it run again (before: "made no progress").
    const auto d = serve_handover(kOverload + "    disaggregation: {prefill_replicas: 1}\n", 2, Time{}, true);
    REQUIRE(d.result.replica_stats.size() == 2);
    CHECK(d.result.replica_stats[1].preemptions > 0);
    for (const auto& rec : d.result.records) CHECK(rec.finish_s >= rec.first_token_s);
    CHECK(d.summary.overloaded);  // the backlog waits for decode blocks, not in the prefill queue
    CHECK(d.summary.queue_ms.p99 < 1000);
}

TEST_CASE("handover: with the P2pNcclConnector, queued caches hold no decode blocks and nothing is preempted") {
    // The overload of the case above with vLLM's P2pNcclConnector: received
    // caches wait in the decode engine's receive buffer, outside its pool,
    // and the scheduler takes a request's blocks only when it admits it
    // (get_num_new_matched_tokens says the load is synchronous, so
    // allocate_slots runs at scheduling). With one sequence running
    // (max_batch 1) the pool then holds one request's blocks at a time, at
    // most ceil((4,096 + 2,048) / 16) = 384 of its 849: nothing is
    // preempted, nothing is dropped, and no cache waits for blocks to move.
    const auto d =
        serve_handover(kOverload + "    disaggregation: {prefill_replicas: 1, connector: p2p-nccl}\n", 2, Time{}, true);
    REQUIRE(d.result.replica_stats.size() == 2);
    CHECK(d.result.replica_stats[1].preemptions == 0);
    std::int64_t most = 0;
    for (const auto& rec : d.result.records) {
        CHECK(rec.kv_wait_s == 0.0);
        CHECK(rec.finish_s >= rec.first_token_s);
        most = std::max(most, (rec.request.prompt + rec.request.output + 15) / 16);
    }
    CHECK(d.result.replica_stats[1].peak_kv_blocks <= most);
}
