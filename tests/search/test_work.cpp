// The executor of ordered work (sim/search/work.h) and the wire codec of run
// metrics (sim/search/wire.h), the two pieces the MPI scale-out rests on.
#include "sim/core/error.h"
#include "sim/search/wire.h"
#include "sim/search/work.h"

#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// Positions 0..n-1; position k is wanted while k < stop_at; run(k) throws
// at throw_at; accept records the order results arrive in.
struct Counting final : sim::search::OrderedWork {
    std::size_t n = 0, stop_at = 0, throw_at = 0;
    mutable std::atomic<int> runs{0};
    std::vector<std::size_t> accepted;
    std::size_t size() const override { return n; }
    bool wanted(std::size_t k) override { return k < stop_at; }
    std::string run(std::size_t k) const override {
        ++runs;
        if (k == throw_at) throw std::runtime_error("boom at " + std::to_string(k));
        return std::to_string(k * k);
    }
    void accept(std::size_t k, const std::string& r) override {
        CHECK(r == std::to_string(k * k));
        accepted.push_back(k);
    }
};

}  // namespace

TEST_SUITE_BEGIN("unit");

TEST_CASE("run_local runs each wanted position once and nothing after the first unwanted one") {
    for (const int threads : {1, 3}) {
        CAPTURE(threads);
        Counting w;
        w.n = 50;
        w.stop_at = 20;
        w.throw_at = 1000;
        sim::search::run_local(w, threads);
        CHECK(w.runs == 20);
        std::sort(w.accepted.begin(), w.accepted.end());
        REQUIRE(w.accepted.size() == 20);
        for (std::size_t k = 0; k < 20; ++k) CHECK(w.accepted[k] == k);
    }
}

TEST_CASE("run_local rethrows a failed run's exception after the others finish") {
    Counting w;
    w.n = 30;
    w.stop_at = 30;
    w.throw_at = 7;
    CHECK_THROWS_WITH_AS(sim::search::run_local(w, 2), "boom at 7", std::runtime_error);
    CHECK(w.runs >= 8);
}

TEST_CASE("run metrics survive the wire bit for bit") {
    sim::report::RunMetrics m;
    m.strategy = "tp2-pp4, \"quoted\"";
    m.gpus = 64;
    m.feasible = false;
    m.note = "why\nnot";
    m.memory.breakdown.weights = 1.5e9;
    m.memory.breakdown.expert_optimizer = 0.1;  // not exact in binary: must travel as bits
    m.memory.capacity.value = 80ull << 30;
    m.memory.oom = true;
    m.memory.explanation = "over";
    m.memory_stage = 3;
    m.resolved.tp = 2;
    m.resolved.pp = 4;
    m.resolved.ep = 2;
    m.resolved.sp = true;
    m.resolved.schedule = &sim::parallel::pipeline_schedule("interleaved-1f1b");
    m.resolved.virtual_stages = 2;
    m.resolved.overlap.param_gather = true;
    // Fields added after the wire was written, each of which a rank's output shows (run_json prints
    // etp and the all-to-all share; the overlaps say how the run was built).
    m.resolved.etp = 1;
    m.resolved.overlap.moe_a2a = true;
    m.resolved.overlap.two_batch = true;
    m.frac_all_to_all = 0.25;
    m.resolved.microbatch_sizes = {3, 3, 2};
    m.resolved.stage_layers = {{0, 5}, {5, 12}};
    m.resolved.stage_fit = {"l2", "hbm"};
    m.resolved.stage_working_set_bytes = {1.0 / 3.0, 2e6};
    m.tokens_per_s = 1.0 / 7.0;
    m.frac_idle = 0.0;
    m.events = 123456789012ull;
    m.simulated_seconds = 2.0 / 3.0;
    sim::report::RunMetrics other;
    other.strategy = "b";
    const auto bytes = sim::search::encode_runs({m, other});
    const auto back = sim::search::decode_runs(bytes);
    REQUIRE(back.size() == 2);
    CHECK(sim::search::encode_runs(back) == bytes);
    CHECK(sim::report::run_json(back[0]) == sim::report::run_json(m));
    CHECK(back[0].resolved.schedule == m.resolved.schedule);
    CHECK(back[0].resolved.stage_fit == m.resolved.stage_fit);
    CHECK(back[0].memory.breakdown.expert_optimizer == m.memory.breakdown.expert_optimizer);
    CHECK(back[0].frac_idle.has_value());
    CHECK(back[0].resolved.etp == 1);
    CHECK(back[0].resolved.overlap.moe_a2a);
    CHECK(back[0].resolved.overlap.two_batch);
    CHECK(back[0].frac_all_to_all == 0.25);
    CHECK(!back[0].frac_memory.has_value());
    CHECK(back[1].strategy == "b");
    CHECK_THROWS_AS(sim::search::decode_runs(bytes.substr(0, bytes.size() - 1)), sim::InternalError);
    CHECK_THROWS_AS(sim::search::decode_runs(bytes + "x"), sim::InternalError);
}

TEST_SUITE_END();
