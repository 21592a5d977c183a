// Repeated steps (FlowNetwork::run_steps): skipping the steps of a phase that
// runs alone must give the same times, link bytes and busy times as running
// every step flow by flow, with and without other traffic on the links.
#include "net_fixtures.h"

#include "sim/core/simulation.h"
#include "sim/net/collective.h"
#include "sim/net/flow_network.h"

#include <doctest/doctest.h>

#include <random>
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

// What one run produced: every completion time in order, and per-link counters.
struct Outcome {
    std::vector<Time> done;
    LinkRecord links;
    std::uint64_t skipped = 0, splits = 0;
};

// Background traffic: a flow from src to dst of `size`, started at `at`.
struct Extra {
    Time at;
    int src, dst;
    Bytes size;
};

struct Workload {
    std::vector<std::pair<Time, CollectiveRequest>> collectives;
    std::vector<Extra> extras;
};

Outcome run(const Topology& t, const Workload& w, bool skip) {
    Simulation sim;
    FlowNetwork net(sim, t);
    net.set_skip_repeated_steps(skip);
    CollectiveEngine engine(sim, net, t);
    Outcome out;
    auto* done = &out.done;
    auto* s = &sim;
    for (const auto& c : w.collectives)
        sim.schedule_at(
            c.first, [&engine, r = &c.second, done, s] { engine.start(*r, [done, s] { done->push_back(s->now()); }); });
    for (const Extra& e : w.extras)
        sim.schedule_at(e.at, [&net, x = &e, done, s] {
            net.start(x->src, x->dst, x->size, [done, s] { done->push_back(s->now()); });
        });
    sim.run();
    out.skipped = net.steps_skipped();
    out.splits = net.windows_split();
    out.links = record_links(net, t);
    return out;
}

void check_same(const Outcome& fast, const Outcome& slow) {
    net_fixtures::check_same(fast.done, fast.links, slow.done, slow.links);
    CHECK(slow.skipped == 0);
}

CollectiveRequest ring(std::vector<int> gpus, Bytes size, CollectiveOp op = CollectiveOp::all_reduce) {
    auto r = request(op, std::move(gpus), size, "ring");
    r.protocol_efficiency = 0.9;
    r.step_latency = Time::ns(1500);
    return r;
}

}  // namespace

TEST_CASE("repeated steps: one flow repeated, by hand") {
    const Topology t(two_gpu_link(gbps(100), Time::us(1)), 2);
    for (const bool skip : {false, true}) {
        CAPTURE(skip);
        Simulation sim;
        FlowNetwork net(sim, t);
        net.set_skip_repeated_steps(skip);
        const std::vector<FlowNetwork::StepFlow> step{{&t.route(0, 1), Time::us(1), Bytes{1'000'000}, 1.0}};
        Time done;
        net.run_steps(step, 5, Time::us(2), [&done, &sim] { done = sim.now(); });
        sim.run();
        // 5 steps of 1 us latency + 10 us transfer, 4 gaps of 2 us.
        CHECK(done == Time::us(5 * 11 + 4 * 2));
        CHECK(net.link_bytes(t.route(0, 1)[0]) == doctest::Approx(5e6));
        CHECK(net.link_busy_time(t.route(0, 1)[0]) == Time::us(50));
        CHECK(net.steps_skipped() == (skip ? 4u : 0u));
    }
}

TEST_CASE("repeated steps: a flow arriving with a step's own flow, by hand") {
    const Topology t(two_gpu_link(gbps(100), Time::us(1)), 2);
    for (const bool skip : {false, true}) {
        CAPTURE(skip);
        Simulation sim;
        FlowNetwork net(sim, t);
        net.set_skip_repeated_steps(skip);
        const std::vector<FlowNetwork::StepFlow> step{{&t.route(0, 1), Time::us(1), Bytes{1'000'000}, 1.0}};
        Time done, other;
        net.run_steps(step, 5, Time::us(2), [&done, &sim] { done = sim.now(); });
        // Steps launch at 0, 13, 26, 39, 52 us alone (1 us latency + 10 us + 2 us gap). A flow
        // started at 26 us reaches the link at 27 us, with step 3's flow: both drain at half
        // rate, 20 us, so step 3 ends at 47 us and the last step at 47 + 2 x 13 = 73 us.
        sim.schedule_at(Time::us(26), [&net, &other, &sim] {
            net.start(0, 1, Bytes{1'000'000}, [&other, &sim] { other = sim.now(); });
        });
        sim.run();
        CHECK(other == Time::us(47));
        CHECK(done == Time::us(73));
        CHECK(net.link_busy_time(t.route(0, 1)[0]) == Time::us(4 * 10 + 20));
        CHECK(net.windows_split() == (skip ? 1u : 0u));
    }
}

TEST_CASE("repeated steps: a ring alone is skipped and gives the same results") {
    const Topology t(fat_tree(4, 4, 2, 4), 32);
    std::vector<int> gpus;
    for (int g = 0; g < 32; ++g) gpus.push_back(g);
    for (const auto op : {CollectiveOp::all_reduce, CollectiveOp::all_gather}) {
        Workload w;
        w.collectives.emplace_back(Time{}, ring(gpus, Bytes{64u << 20}, op));
        const Outcome slow = run(t, w, false), fast = run(t, w, true);
        check_same(fast, slow);
        CHECK(fast.skipped > 0);
        CHECK(fast.splits == 0);
    }
}

TEST_CASE("repeated steps: a window split by other traffic gives the same results") {
    const Topology t(fat_tree(4, 4, 2, 4), 32);
    std::vector<int> gpus;
    for (int g = 0; g < 32; g += 2) gpus.push_back(g);
    const Outcome alone = [&] {
        Workload w;
        w.collectives.emplace_back(Time{}, ring(gpus, Bytes{16u << 20}));
        return run(t, w, false);
    }();
    const std::uint64_t span = alone.done.back().count_ps();
    std::uint64_t splits = 0;
    for (std::uint32_t seed = 1; seed <= 32; ++seed) {
        CAPTURE(seed);
        std::mt19937_64 rng(seed);
        Workload w;
        auto first = ring(gpus, Bytes{16u << 20});
        // Hierarchical: three phases, two of them repeated; tree: one step.
        first.algorithm = seed % 4 == 1 ? "hierarchical" : seed % 8 == 2 ? "tree" : "ring";
        w.collectives.emplace_back(Time{}, first);
        if (seed % 3 == 0) {  // a second collective over the other GPUs, sharing the network
            std::vector<int> odd;
            for (int g = 1; g < 32; g += 2) odd.push_back(g);
            w.collectives.emplace_back(Time::ps(rng() % span), ring(odd, Bytes{8u << 20}));
        }
        const int extras = 1 + static_cast<int>(rng() % 4);
        for (int i = 0; i < extras; ++i) {
            const int src = static_cast<int>(rng() % 32);
            const int dst = (src + 1 + static_cast<int>(rng() % 31)) % 32;
            w.extras.push_back(Extra{Time::ps(rng() % span), src, dst, Bytes{1 + rng() % (4u << 20)}});
        }
        const Outcome slow = run(t, w, false), fast = run(t, w, true);
        check_same(fast, slow);
        splits += fast.splits;
    }
    CHECK(splits > 0);  // the cases did end windows early
}

TEST_CASE("repeated steps: a query in the middle of a window ends it exactly") {
    const Topology t(fat_tree(4, 4, 2, 4), 16);
    std::vector<int> gpus;
    for (int g = 0; g < 16; ++g) gpus.push_back(g);
    const auto req = ring(gpus, Bytes{32u << 20});
    Time dones[2];
    std::vector<double> mids[2];
    for (const bool skip : {false, true}) {
        CAPTURE(skip);
        Simulation sim;
        FlowNetwork net(sim, t);
        net.set_skip_repeated_steps(skip);
        CollectiveEngine engine(sim, net, t);
        Time& done = dones[skip];
        engine.start(req, [&done, &sim] { done = sim.now(); });
        std::vector<double>& mid = mids[skip];
        sim.schedule_at(Time::us(400), [&] {
            for (sim::net::LinkId id = 0; id < t.link_count(); ++id) mid.push_back(net.link_bytes(id));
        });
        sim.run();
        if (skip) CHECK(net.windows_split() == 1);
    }
    CHECK(dones[1] == dones[0]);
    REQUIRE(mids[1].size() == mids[0].size());
    for (std::size_t i = 0; i < mids[0].size(); ++i) CHECK(mids[1][i] == doctest::Approx(mids[0][i]).epsilon(1e-12));
}

TEST_SUITE_END();
