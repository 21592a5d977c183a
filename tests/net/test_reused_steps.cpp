// Reused steps (FlowNetwork::run_steps with reuse; docs/network-model.md,
// "Repeated steps"): a step that ran alone is kept and later calls with the
// same flows replay it, first step included. Times, busy times and the
// largest load must equal running every step flow by flow; link bytes agree
// to rounding. Also the deepep exchange through the collective engine,
// which asks for reuse, and the lookup memo (FlowNetwork::StepMemo) that
// spares each replayed call hashing and comparing its flows.
#include "net_fixtures.h"

#include "sim/core/simulation.h"
#include "sim/net/collective.h"
#include "sim/net/flow_network.h"

#include <doctest/doctest.h>

#include <functional>
#include <optional>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace net_fixtures;
using sim::Bytes;
using sim::Simulation;
using sim::net::CollectiveEngine;
using sim::net::CollectiveOp;
using sim::net::CollectiveRequest;
using sim::net::FlowNetwork;
using sim::net::Topology;

namespace {

using Step = std::vector<FlowNetwork::StepFlow>;

// Runs `calls` calls of `step` (repeat, gap) back to back, each started when
// the previous one ends, and one flow 0 -> 1 of 1 MB at `extra_at` (if
// set). Returns every completion time in order.
struct Back2Back {
    std::vector<Time> done;
    std::uint64_t reused = 0, splits = 0, skipped = 0, lookups = 0;
    std::size_t kept = 0;
    double bytes = 0;
    Time busy;
};

Back2Back back_to_back(const Topology& t, const Step& step, int calls, std::uint32_t repeat, Time gap, bool skip,
                       std::optional<Time> extra_at = std::nullopt, bool memo = false) {
    Simulation sim;
    FlowNetwork net(sim, t);
    net.set_skip_repeated_steps(skip);
    Back2Back out;
    int left = calls;
    FlowNetwork::StepMemo step_memo;
    std::function<void()> next = [&] {
        net.run_steps(
            step, repeat, gap,
            [&] {
                out.done.push_back(sim.now());
                if (--left > 0) next();
            },
            true, memo ? &step_memo : nullptr);
    };
    next();
    if (extra_at)
        sim.schedule_at(*extra_at, [&] { net.start(0, 1, Bytes{1'000'000}, [&] { out.done.push_back(sim.now()); }); });
    sim.run();
    out.reused = net.steps_reused();
    out.splits = net.windows_split();
    out.skipped = net.steps_skipped();
    out.kept = net.templates_kept();
    out.lookups = net.kept_lookups();
    out.bytes = net.link_bytes(t.route(0, 1)[0]);
    out.busy = net.link_busy_time(t.route(0, 1)[0]);
    return out;
}

Topology mesh2() { return Topology(two_gpu_link(gbps(100), Time::us(1)), 2); }

}  // namespace

TEST_CASE("reused steps: three identical calls, the later two replayed, by hand") {
    const Topology t = mesh2();
    const Step step{{&t.route(0, 1), Time::us(1), Bytes{1'000'000}, 1.0}};
    for (const bool skip : {false, true}) {
        CAPTURE(skip);
        const auto r = back_to_back(t, step, 3, 1, Time::us(2), skip);
        // Each call: 1 us latency + 1 MB at 100 GB/s = 11 us, started when the last ended.
        REQUIRE(r.done.size() == 3);
        CHECK(r.done[0] == Time::us(11));
        CHECK(r.done[1] == Time::us(22));
        CHECK(r.done[2] == Time::us(33));
        CHECK(r.bytes == doctest::Approx(3e6));
        CHECK(r.busy == Time::us(30));
        CHECK(r.kept == 1u);
        CHECK(r.reused == (skip ? 2u : 0u));
        CHECK(r.skipped == (skip ? 2u : 0u));
    }
}

TEST_CASE("reused steps: repeats of a replayed call wait their gaps, the first does not, by hand") {
    const Topology t = mesh2();
    const Step step{{&t.route(0, 1), Time::us(1), Bytes{1'000'000}, 1.0}};
    for (const bool skip : {false, true}) {
        CAPTURE(skip);
        const auto r = back_to_back(t, step, 2, 3, Time::us(2), skip);
        // 3 steps of 11 us and 2 gaps of 2 us: 37 us a call.
        REQUIRE(r.done.size() == 2);
        CHECK(r.done[0] == Time::us(37));
        CHECK(r.done[1] == Time::us(74));
        CHECK(r.busy == Time::us(60));
        // First call: steps 2 and 3 skipped; the second call replays all 3.
        CHECK(r.skipped == (skip ? 5u : 0u));
        CHECK(r.reused == (skip ? 1u : 0u));
    }
}

TEST_CASE("reused steps: a flow arriving during a replayed step shares the link from then on, by hand") {
    const Topology t = mesh2();
    const Step step{{&t.route(0, 1), Time::us(1), Bytes{1'000'000}, 1.0}};
    for (const bool skip : {false, true}) {
        CAPTURE(skip);
        const auto r = back_to_back(t, step, 2, 1, Time::us(2), skip, Time::us(13));
        // Call 2 launches at 11 us, its flow drains alone from 12 us; the
        // other flow arrives at 14 us with 0.8 MB left of call 2's: both at
        // 50 GB/s for 16 us (call 2 ends at 30 us), then 0.2 MB alone at
        // 100 GB/s (the other flow ends at 32 us).
        REQUIRE(r.done.size() == 3);
        CHECK(r.done[0] == Time::us(11));
        CHECK(r.done[1] == Time::us(30));
        CHECK(r.done[2] == Time::us(32));
        CHECK(r.bytes == doctest::Approx(3e6));
        CHECK(r.busy == Time::us(30));
        CHECK(r.reused == (skip ? 1u : 0u));
        CHECK(r.splits == (skip ? 1u : 0u));
    }
}

TEST_CASE("reused steps: a flow arriving in a replayed call's gap delays nothing but itself, by hand") {
    const Topology t = mesh2();
    const Step step{{&t.route(0, 1), Time::us(1), Bytes{1'000'000}, 1.0}};
    for (const bool skip : {false, true}) {
        CAPTURE(skip);
        // Call 2 (3 steps) starts at 37 us; its first step ends at 48 us,
        // the second launches at 50 us. A flow started at 47.5 us reaches
        // the link at 48.5 us, in the gap, and takes it alone until the
        // second step's flow arrives at 51 us: 0.25 MB done, then both at
        // half rate. The step's flow moves 1 MB: 0.75 MB shared with the
        // other's 0.75 MB left (15 us, to 66 us), both ending at 66 us, then
        // 0.25 MB alone (2.5 us): step 2 ends at 68.5 us, step 3 at 81.5.
        const auto r = back_to_back(t, step, 2, 3, Time::us(2), skip, Time::ns(47500));
        REQUIRE(r.done.size() == 3);
        CHECK(r.done[0] == Time::us(37));
        CHECK(r.done[1] == Time::us(66));
        CHECK(r.done[2] == Time::ns(81500));
        CHECK(r.splits == (skip ? 1u : 0u));
    }
}

TEST_CASE("reused steps: a step that shared its link is not kept; the first alone is, by hand") {
    const Topology t = mesh2();
    const Step step{{&t.route(0, 1), Time::us(1), Bytes{1'000'000}, 1.0}};
    for (const bool skip : {false, true}) {
        CAPTURE(skip);
        const auto r = back_to_back(t, step, 4, 1, Time::us(2), skip, Time::us(5));
        // Call 1: alone 1-6 us (0.5 MB), then with the other flow at 50 GB/s
        // (ends at 16 us). The other flow: 0.5 MB left, alone 16-17 us
        // (0.1 MB), then with call 2's flow: 0.4 MB at 50 GB/s (ends at
        // 25 us); call 2's 0.6 MB left alone: 31 us. Call 3 runs alone
        // (42 us) and is kept; call 4 replays it (53 us).
        REQUIRE(r.done.size() == 5);
        CHECK(r.done[0] == Time::us(16));
        CHECK(r.done[1] == Time::us(25));
        CHECK(r.done[2] == Time::us(31));
        CHECK(r.done[3] == Time::us(42));
        CHECK(r.done[4] == Time::us(53));
        CHECK(r.kept == 1u);
        CHECK(r.reused == (skip ? 1u : 0u));
    }
}

namespace {

CollectiveRequest exchange(int gpus, Bytes size) {
    auto r = token_exchange(gpus, size, sim::net::TokenRouting{8, 256, 8, 4}, "deepep");
    r.protocol_efficiency = 0.8;
    r.network_efficiency = 0.75;
    r.step_latency = Time::us(2);
    return r;
}

struct EngineRun {
    std::vector<Time> done;
    LinkRecord links;
    std::uint64_t reused = 0, splits = 0, lookups = 0;
    std::size_t kept = 0;
};

// `n` deepep exchanges over 16 GPUs on 2 nodes, each of one of two sizes,
// the next started when one ends; with `background`, random flows between
// random GPUs at random times meet some of them.
EngineRun engine_run(const Topology& t, int n, bool background, bool skip) {
    Simulation sim;
    FlowNetwork net(sim, t);
    net.set_skip_repeated_steps(skip);
    CollectiveEngine engine(sim, net, t);
    EngineRun out;
    const CollectiveRequest big = exchange(16, Bytes{8'000'000}), small = exchange(16, Bytes{2'000'000});
    int left = n;
    std::function<void()> next = [&] {
        engine.start(left % 3 == 0 ? small : big, [&] {
            out.done.push_back(sim.now());
            if (--left > 0) next();
        });
    };
    next();
    if (background) background_flows(sim, net, t, 12, 7, out.done);
    sim.run();
    out.links = record_links(net, t);
    out.reused = net.steps_reused();
    out.splits = net.windows_split();
    out.lookups = net.kept_lookups();
    out.kept = net.templates_kept();
    return out;
}

}  // namespace

TEST_CASE("reused steps: deepep exchanges replayed give the same times as flow by flow, alone and with traffic") {
    const Topology t = eight_gpu_nodes(16);
    for (const bool background : {false, true}) {
        CAPTURE(background);
        const EngineRun slow = engine_run(t, 40, background, false);
        const EngineRun fast = engine_run(t, 40, background, true);
        check_same(fast.done, fast.links, slow.done, slow.links);
        CHECK(slow.reused == 0u);
        // Two distinct exchanges are kept (the first of each size); each later
        // one starts with its links idle, so all 38 are replayed, and with
        // traffic some windows end early, as a newcomer reaches their links.
        CHECK(fast.reused == 38u);
        CHECK((fast.splits > 0) == background);
    }
}

TEST_CASE("reused steps: a memo looks a call's flows up once per new template, with the same times") {
    const Topology t = mesh2();
    const Step step{{&t.route(0, 1), Time::us(1), Bytes{1'000'000}, 1.0}};
    const auto plain = back_to_back(t, step, 6, 1, Time::us(2), true);
    const auto memo = back_to_back(t, step, 6, 1, Time::us(2), true, std::nullopt, true);
    // Without a memo every call hashes and compares its flows. With one: the
    // first call (nothing kept), then the second (a template was kept since);
    // the other four read the memo.
    CHECK(plain.lookups == 6u);
    CHECK(memo.lookups == 2u);
    CHECK(memo.done == plain.done);
    CHECK(memo.reused == plain.reused);
    CHECK(memo.busy == plain.busy);
    CHECK(memo.bytes == plain.bytes);
}

TEST_CASE("reused steps: the collective engine's kept plans look their flows up once per new template") {
    // 40 exchanges of two sizes, big first, then small: each plan's memo is
    // filled at its first call and again once after the other's template is
    // kept (4 lookups, not 40). With traffic, a call whose step shared its
    // links is not kept, and the memo keeps the answer "none" until a
    // template is kept: at most (templates + 1) lookups a plan.
    const Topology t = eight_gpu_nodes(16);
    for (const bool background : {false, true}) {
        CAPTURE(background);
        const EngineRun r = engine_run(t, 40, background, true);
        if (!background) {
            CHECK(r.kept == 2u);
            CHECK(r.lookups == 4u);
        } else {
            CHECK(r.lookups <= 2 * (r.kept + 1));
        }
    }
}

TEST_SUITE_END();
