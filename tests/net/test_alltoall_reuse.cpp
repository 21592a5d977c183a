// Direct all-to-alls reuse their steps (ICollectiveAlgorithm::reuses_steps;
// docs/network-model.md, "Repeated steps"; docs/moe.md section 3d): the
// first exchange of a kind that runs alone is kept, and a later identical
// one whose links are idle is replayed as one window. The replayed runs must
// equal the flow-by-flow runs (FlowNetwork::set_skip_repeated_steps(false))
// in every completion time, busy time and the largest load, alone, with
// random background traffic, and with two EP groups whose exchanges contend.
#include "net_fixtures.h"

#include "sim/core/simulation.h"
#include "sim/net/collective.h"
#include "sim/net/flow_network.h"

#include <doctest/doctest.h>

#include <cstddef>
#include <functional>
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

CollectiveRequest plain_all_to_all(std::vector<int> gpus, Bytes size) {
    auto r = request(CollectiveOp::all_to_all, std::move(gpus), size, "direct");
    r.protocol_efficiency = 0.8;
    r.network_efficiency = 0.75;
    r.step_latency = Time::us(2);
    return r;
}

std::vector<int> gpu_range(int from, int to) {
    std::vector<int> v;
    for (int g = from; g < to; ++g) v.push_back(g);
    return v;
}

// A chain of `calls` exchanges over one group, each started `pause` after
// the previous one ended; every third is the small one.
struct Chain {
    std::vector<int> gpus;
    int calls = 0;
    Time first, pause;
};

struct Run {
    std::vector<Time> done;  // every completion, in order
    LinkRecord links;
    std::uint64_t reused = 0, splits = 0;
    std::size_t kept = 0;
};

// Runs the chains at once on `t`, plus `background` random flows between
// random GPUs at random times in the first 2 ms.
Run run_chains(const Topology& t, const std::vector<Chain>& chains, int background, bool skip) {
    Simulation sim;
    FlowNetwork net(sim, t);
    net.set_skip_repeated_steps(skip);
    CollectiveEngine engine(sim, net, t);
    Run out;
    // What the completion callbacks reach, by one pointer (callbacks are small).
    struct State {
        Simulation& sim;
        CollectiveEngine& engine;
        const std::vector<Chain>& chains;
        Run& out;
        std::vector<int> left;
        void next(std::size_t i) {
            const Chain& c = chains[i];
            const Bytes size{left[i] % 3 == 0 ? 2'000'000u : 8'000'000u};
            engine.start(plain_all_to_all(c.gpus, size), [this, i] {
                out.done.push_back(sim.now());
                if (--left[i] > 0) sim.schedule_after(chains[i].pause, [this, i] { next(i); });
            });
        }
    } state{sim, engine, chains, out, {}};
    for (const Chain& c : chains) state.left.push_back(c.calls);
    for (std::size_t i = 0; i < chains.size(); ++i) sim.schedule_at(chains[i].first, [&state, i] { state.next(i); });
    background_flows(sim, net, t, background, 11, out.done);
    sim.run();
    out.links = record_links(net, t);
    out.reused = net.steps_reused();
    out.splits = net.windows_split();
    out.kept = net.templates_kept();
    return out;
}

}  // namespace

TEST_CASE("all-to-all reuse: direct exchanges back to back inside a node are replayed, by hand") {
    // 4 GPUs on one NVSwitch (120 GB/s, 1 us a link): each rank sends
    // 1 MB to each of 3 peers, 3 flows on every up and down link at 40 GB/s
    // wire, 32 GB/s payload (efficiency 0.8): 31.25 us, after the 2 us step
    // latency and the 2 us route: 35.25 us a call.
    const Topology t(nvswitch_node(4, gbps(120), Time::us(1)), 4);
    for (const bool skip : {false, true}) {
        CAPTURE(skip);
        Simulation sim;
        FlowNetwork net(sim, t);
        net.set_skip_repeated_steps(skip);
        CollectiveEngine engine(sim, net, t);
        std::vector<Time> done;
        int left = 5;
        std::function<void()> next = [&] {
            engine.start(plain_all_to_all(first_gpus(4), Bytes{4'000'000}), [&] {
                done.push_back(sim.now());
                if (--left > 0) next();
            });
        };
        next();
        sim.run();
        REQUIRE(done.size() == 5);
        for (std::size_t i = 0; i < done.size(); ++i) CHECK(done[i] == Time::ns(35250 * (i + 1)));
        // Each up link carries 3 MB a call, busy 31.25 us of it.
        const auto up = t.route(0, 1).front();
        CHECK(net.link_bytes(up) == doctest::Approx(15e6));
        CHECK(net.link_busy_time(up) == Time::ns(31250 * 5));
        CHECK(net.templates_kept() == 1u);
        CHECK(net.steps_reused() == (skip ? 4u : 0u));
    }
}

TEST_CASE("all-to-all reuse: send-recv does not reuse steps") {
    // Only the all-to-all asks for reuse (pipeline sends keep their events).
    const Topology t(nvswitch_node(4, gbps(120), Time::us(1)), 4);
    Simulation sim;
    FlowNetwork net(sim, t);
    CollectiveEngine engine(sim, net, t);
    int left = 3;
    std::function<void()> next = [&] {
        engine.start(request(CollectiveOp::send_recv, {0, 1}, Bytes{1'000'000}), [&] {
            if (--left > 0) next();
        });
    };
    next();
    sim.run();
    CHECK(left == 0);
    CHECK(net.templates_kept() == 0u);
    CHECK(net.steps_reused() == 0u);
}

TEST_CASE("all-to-all reuse: direct exchanges replayed equal flow by flow, alone and with traffic") {
    // 16 GPUs on 2 nodes: 240 flows an exchange, over NVLink and the network.
    const Topology t = eight_gpu_nodes(16);
    const std::vector<Chain> chain{{first_gpus(16), 30, Time{}, Time{}}};
    for (const int background : {0, 12}) {
        CAPTURE(background);
        const Run slow = run_chains(t, chain, background, false);
        const Run fast = run_chains(t, chain, background, true);
        check_same(fast.done, fast.links, slow.done, slow.links);
        CHECK(slow.reused == 0u);
        // Two exchanges kept (one per size); alone, every later one starts
        // with its links idle and is replayed; traffic on its links at the
        // start keeps some from replaying and ends some windows early.
        CHECK(fast.kept == 2u);
        if (background == 0) CHECK(fast.reused == 28u);
        else CHECK((fast.reused > 0u && fast.reused < 28u));
        CHECK((fast.splits > 0) == (background > 0));
    }
}

TEST_CASE("all-to-all reuse: two EP groups sharing a node contend, replayed equal flow by flow") {
    // Groups of 2 nodes each on 3 nodes, sharing the middle one (GPUs 8-15):
    // their exchanges meet on its NVLink and NIC links whenever both run, and
    // run alone in between (the second chain pauses 40 us between calls and
    // starts later), so some steps are kept and replayed, some are ended
    // early by the other group's flows, and some never run alone.
    const Topology t = eight_gpu_nodes(24);
    const std::vector<Chain> chains{{gpu_range(0, 16), 20, Time{}, Time{}},
                                    {gpu_range(8, 24), 40, Time::us(150), Time::us(40)}};
    for (const int background : {0, 8}) {
        CAPTURE(background);
        const Run slow = run_chains(t, chains, background, false);
        const Run fast = run_chains(t, chains, background, true);
        check_same(fast.done, fast.links, slow.done, slow.links);
        CHECK(fast.reused > 0u);
        CHECK(fast.splits > 0u);
    }
}

TEST_SUITE_END();
