// The software profile's serving host times (docs/serving.md, "Host time of
// the serving engine"): a per-sequence cost lengthens every iteration, a
// per-request cost delays a request's entry into the engine, a per-token
// cost delays each token's delivery, a per-request latency delays a request
// without queueing, and the front end's streaming and intake are FIFO
// queues on one CPU, streaming first (when one is the bottleneck, requests or
// tokens leave at its pace; tokens postpone pending intake). Each answer is exact in picoseconds against the same run
// without the cost.
#include "serve_fixture.h"

#include <doctest/doctest.h>

TEST_SUITE_BEGIN("e2e");

using namespace sim;

namespace {

// One request of 64 + 8 tokens every 10 s: each runs alone, in 8 iterations
// of one sequence (a prefill and 7 decodes).
const std::string kAlone =
    "    arrivals: {process: fixed, rate: 0.1}\n"
    "    prompt_tokens: {distribution: fixed, value: 64}\n"
    "    output_tokens: {distribution: fixed, value: 8}\n    requests: 3\n";

// Two such requests, at 0 and 1 us.
const std::string kTogether =
    "    arrivals: {process: fixed, rate: 1000000}\n"
    "    prompt_tokens: {distribution: fixed, value: 64}\n"
    "    output_tokens: {distribution: fixed, value: 8}\n    requests: 2\n";

serve_test::Served serve_costed(const std::string& block, Time sequence, Time request, Time token, Time latency = {}) {
    auto sc = serve_test::scenario(block);
    sc.profile.serving_request_latency = latency;
    sc.profile.serving_sequence_overhead = sequence;
    sc.profile.serving_request_overhead = request;
    sc.profile.serving_token_overhead = token;
    serve_test::Served s{serve::simulate_serving(sc, sc.strategies.front(), {}), {}};
    s.summary = serve::summarize(sc, s.result);
    return s;
}

double ttft(const serve::RequestRecord& r) { return r.first_token_s - r.request.arrival_s; }
double e2e(const serve::RequestRecord& r) { return r.finish_s - r.request.arrival_s; }

}  // namespace

TEST_CASE("serving host time: a per-sequence cost adds to every iteration of every sequence in it") {
    const auto plain = serve_costed(kAlone, {}, {}, {});
    const auto costed = serve_costed(kAlone, Time::us(500), {}, {});
    for (std::size_t i = 0; i < 3; ++i) {
        // 1 sequence x 500 us, once in the prefill and 7 times in the decodes.
        CHECK(ttft(costed.result.records[i]) - ttft(plain.result.records[i]) == doctest::Approx(500e-6).epsilon(1e-6));
        CHECK(e2e(costed.result.records[i]) - e2e(plain.result.records[i]) ==
              doctest::Approx(8 * 500e-6).epsilon(1e-6));
    }
}

TEST_CASE("serving host time: a request enters the engine after its front-end cost, a token leaves after its own") {
    const auto plain = serve_costed(kAlone, {}, {}, {});
    const auto req = serve_costed(kAlone, {}, Time::us(20000), {});
    const auto tok = serve_costed(kAlone, {}, {}, Time::us(300));
    for (std::size_t i = 0; i < 3; ++i) {
        const auto& p = plain.result.records[i];
        // Alone, the front end is idle: the request reaches the engine 20 ms
        // late and everything after it shifts by 20 ms.
        CHECK(req.result.records[i].first_scheduled_s - p.first_scheduled_s == doctest::Approx(0.020).epsilon(1e-9));
        CHECK(ttft(req.result.records[i]) - ttft(p) == doctest::Approx(0.020).epsilon(1e-6));
        CHECK(e2e(req.result.records[i]) - e2e(p) == doctest::Approx(0.020).epsilon(1e-6));
        // Each token leaves 300 us after the engine sampled it (a decode step
        // is longer than that, so the front end is idle again each time):
        // TTFT and the finish both move by 300 us, TPOT does not.
        CHECK(ttft(tok.result.records[i]) - ttft(p) == doctest::Approx(300e-6).epsilon(1e-6));
        CHECK(e2e(tok.result.records[i]) - e2e(p) == doctest::Approx(300e-6).epsilon(1e-6));
    }
}

TEST_CASE("serving host time: a saturated front end streams one token per token cost, FIFO") {
    // A token cost of 1 s, far above a decode step: the engine finishes in
    // milliseconds, and the front end hands out the 8 tokens one per second.
    const auto plain = serve_costed(kAlone, {}, {}, {});
    const auto slow = serve_costed(kAlone, {}, {}, Time::us(1000000));
    for (std::size_t i = 0; i < 3; ++i) {
        const auto& r = slow.result.records[i];
        CHECK(ttft(r) - ttft(plain.result.records[i]) == doctest::Approx(1.0).epsilon(1e-6));
        CHECK(r.finish_s - r.first_token_s == doctest::Approx(7.0).epsilon(1e-9));  // 7 more tokens, 1 s each
        CHECK(r.max_gap_s == doctest::Approx(1.0).epsilon(1e-9));
    }
    // Two requests arriving together queue at the front end: the second
    // enters the engine one request cost after the first.
    const auto queued = serve_costed(kTogether, {}, Time::us(50000), {});
    const auto& a = queued.result.records[0];
    const auto& b = queued.result.records[1];
    CHECK(a.first_scheduled_s == doctest::Approx(a.request.arrival_s + 0.050).epsilon(1e-9));
    CHECK(b.first_scheduled_s >= a.request.arrival_s + 0.100);  // behind the first request's 50 ms
}

TEST_CASE("serving host time: a request latency delays without queueing; intake work does not hold back tokens") {
    const auto plain = serve_costed(kAlone, {}, {}, {});
    // Alone, 20 ms of latency moves everything by 20 ms, as 20 ms of intake work does.
    const auto alone = serve_costed(kAlone, {}, {}, {}, Time::us(20000));
    for (std::size_t i = 0; i < 3; ++i) {
        CHECK(ttft(alone.result.records[i]) - ttft(plain.result.records[i]) == doctest::Approx(0.020).epsilon(1e-6));
        CHECK(e2e(alone.result.records[i]) - e2e(plain.result.records[i]) == doctest::Approx(0.020).epsilon(1e-6));
    }
    // Two requests together (at 0 and 1 us) with 50 ms of latency: both enter
    // the engine 50 ms after arriving (a latency occupies no server; 50 ms of
    // work would hold the second until 100 ms, the test above). The first
    // starts its prefill alone at 50 ms; the second, in 1 us later, starts at
    // the end of that prefill.
    REQUIRE(ttft(plain.result.records[0]) < 0.045);
    const auto late = serve_costed(kTogether, {}, {}, {}, Time::us(50000));
    const auto& first = late.result.records[0];
    CHECK(first.first_scheduled_s == doctest::Approx(0.050).epsilon(1e-9));
    CHECK(late.result.records[1].first_scheduled_s ==
          doctest::Approx(0.050 + ttft(plain.result.records[0])).epsilon(1e-9));
    // 50 ms of intake work each and 300 us per token: the first request's
    // prefill ends before the second's intake does (at 100 ms), and its first
    // token leaves 300 us after its prefill, not behind that queued intake.
    const auto both = serve_costed(kTogether, {}, Time::us(50000), Time::us(300));
    const auto& a = both.result.records[0];
    CHECK(ttft(a) == doctest::Approx(0.050 + ttft(plain.result.records[0]) + 300e-6).epsilon(1e-9));
}

TEST_CASE("serving host time: streaming goes before intake on the one front end, so tokens postpone pending intake") {
    // Two requests together (at 0 and 1 us), 1 s of intake work each and
    // 10 ms per token. The first is taken in at 1 s and runs alone (its whole
    // run, below 1 s, ends before the second's intake would, at 2 s); its 8
    // tokens, 80 ms of streaming work, all come in while the second's intake
    // is pending, and streaming goes first: the second reaches the engine at
    // exactly 2 s + 8 x 10 ms. The first's tokens do not wait for that intake.
    const auto plain = serve_costed(kAlone, {}, {}, {});
    REQUIRE(e2e(plain.result.records[0]) < 0.9);
    const auto shared = serve_costed(kTogether, {}, Time::us(1000000), Time::us(10000));
    const auto& a = shared.result.records[0];
    const auto& b = shared.result.records[1];
    CHECK(a.first_scheduled_s == doctest::Approx(1.0).epsilon(1e-12));
    CHECK(ttft(a) == doctest::Approx(1.0 + ttft(plain.result.records[0]) + 0.010).epsilon(1e-9));
    CHECK(b.first_scheduled_s == doctest::Approx(2.0 + 8 * 0.010).epsilon(1e-12));
}

TEST_CASE("serving host time with async scheduling: a step takes the longer of the GPU's work and the host's") {
    // With async scheduling the host prepares the next step while the GPU
    // runs this one: T = max(T_gpu, sequence_overhead x B). 500 us per
    // sequence is below every step of a lone 64 + 8-token request of Llama 3
    // 8B on an H100 (the per-token test above: a decode step is longer than
    // 300 us; the prefill longer still), so it is hidden and the run is the
    // plain run to the picosecond; serially it adds 8 x 500 us.
    const std::string async = kAlone + "    async_scheduling: true\n";
    const auto plain = serve_costed(kAlone, {}, {}, {});
    const auto hidden = serve_costed(async, Time::us(500), {}, {});
    for (std::size_t i = 0; i < 3; ++i) {
        CHECK(hidden.result.records[i].first_token_s == plain.result.records[i].first_token_s);
        CHECK(hidden.result.records[i].finish_s == plain.result.records[i].finish_s);
    }
    // 1 s per sequence, far above any step: every step takes exactly 1 s, so
    // the first token comes 1 s after arrival (the prefill step starts at
    // once) and the 7 decodes follow 1 s apart; serially each step is 1 s
    // plus its GPU time.
    const auto slow = serve_costed(async, Time::us(1000000), {}, {});
    const auto serial = serve_costed(kAlone, Time::us(1000000), {}, {});
    for (std::size_t i = 0; i < 3; ++i) {
        const auto& r = slow.result.records[i];
        CHECK(ttft(r) == doctest::Approx(1.0).epsilon(1e-9));
        CHECK(r.finish_s - r.first_token_s == doctest::Approx(7.0).epsilon(1e-9));
        CHECK(r.max_gap_s == doctest::Approx(1.0).epsilon(1e-9));
        CHECK(e2e(serial.result.records[i]) - e2e(r) == doctest::Approx(e2e(plain.result.records[i])).epsilon(1e-6));
    }
}

TEST_CASE("serving with async scheduling: a request that arrives during a step joins the step after next") {
    // vLLM's engine core schedules step N + 1 while the GPU runs step N, so a
    // request that arrives during step N joins step N + 2 (docs/serving.md).
    // 1 s of host time per sequence makes every step exactly 1 s a sequence.
    // Chunked prefill (vLLM V1's): A arrives at 0 and runs alone in [0, 1)
    // (its prefill); B arrives at 0.5 s, during that step: step [1, 2) holds
    // A's first decode only, and B starts at 2 s, A's decode and B's prefill
    // together, two sequences: [2, 4). Joining the next step, B would start
    // at 1 s.
    const std::string overlap =
        "    scheduler: chunked-prefill\n"
        "    arrivals: {process: fixed, rate: 2}\n"
        "    prompt_tokens: {distribution: fixed, value: 64}\n"
        "    output_tokens: {distribution: fixed, value: 8}\n    requests: 2\n"
        "    async_scheduling: true\n";
    const auto run = serve_costed(overlap, Time::us(1000000), {}, {});
    const auto& a = run.result.records[0];
    const auto& b = run.result.records[1];
    REQUIRE(b.request.arrival_s == doctest::Approx(0.5).epsilon(1e-12));
    CHECK(a.first_token_s == doctest::Approx(1.0).epsilon(1e-12));
    CHECK(b.first_scheduled_s == doctest::Approx(2.0).epsilon(1e-12));
    CHECK(b.first_token_s == doctest::Approx(4.0).epsilon(1e-12));
    // A ends with its only token in [0, 1): the step after it would have had
    // nothing else, so no step was in flight and B starts at once, at 1 s.
    const std::string last =
        "    scheduler: chunked-prefill\n"
        "    arrivals: {process: fixed, rate: 2}\n"
        "    prompt_tokens: {distribution: fixed, value: 64}\n"
        "    output_tokens: {distribution: fixed, value: 1}\n    requests: 2\n"
        "    async_scheduling: true\n";
    const auto alone = serve_costed(last, Time::us(1000000), {}, {});
    CHECK(alone.result.records[1].first_scheduled_s == doctest::Approx(1.0).epsilon(1e-12));
    CHECK(alone.result.records[1].first_token_s == doctest::Approx(2.0).epsilon(1e-12));
}

TEST_SUITE_END();
