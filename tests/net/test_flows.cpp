// FlowNetwork: max-min fair sharing, to the picosecond where the answer is exact.
#include "net_fixtures.h"

#include "sim/core/simulation.h"
#include "sim/net/flow_network.h"

#include <doctest/doctest.h>

#include <random>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace net_fixtures;
using sim::Bytes;
using sim::Simulation;
using sim::net::FlowNetwork;
using sim::net::Topology;

namespace {

struct Recorder {
    std::vector<Time> done;
};

}  // namespace

TEST_CASE("flow: one flow takes its route latency plus size / bandwidth") {
    const Topology t(two_gpu_link(gbps(100), Time::us(1)), 2);
    Simulation sim;
    FlowNetwork net(sim, t);
    Time done;
    net.start(0, 1, Bytes{1'000'000}, [&done, &sim] { done = sim.now(); });
    CHECK(net.active_flows() == 1);
    sim.run();
    CHECK(done == Time::us(1) + Time::us(10));
    CHECK(net.active_flows() == 0);
    const auto link = t.route(0, 1)[0];
    CHECK(net.link_bytes(link) == doctest::Approx(1e6));
    CHECK(net.link_busy_time(link) == Time::us(10));
    CHECK(net.max_link_load() == doctest::Approx(1.0));
    CHECK(net.class_bytes(LinkClass::nvlink) == doctest::Approx(1e6));
    CHECK(net.class_utilization(LinkClass::nvlink, Time::us(11)) == doctest::Approx(1e6 / (100e9 * 11e-6)));
}

TEST_CASE("flow: a flow with efficiency e drains at e x bandwidth") {
    const Topology t(two_gpu_link(gbps(100), Time::us(1)), 2);
    Simulation sim;
    FlowNetwork net(sim, t);
    Time done;
    net.start(
        0, 1, Bytes{1'000'000}, [&done, &sim] { done = sim.now(); }, 0.8);
    sim.run();
    CHECK(done == Time::us(1) + Time::us(10) + Time::us(2) + Time::ns(500));  // 1e6 B / 80 GB/s = 12.5 us
    CHECK(net.max_link_load() <= 1.0 + 1e-9);
}

TEST_CASE("flow: two flows on one link get half each") {
    const Topology t(two_gpu_link(gbps(100), Time::us(1)), 2);
    Simulation sim;
    FlowNetwork net(sim, t);
    Recorder r;
    for (int i = 0; i < 2; ++i) net.start(0, 1, Bytes{1'000'000}, [&r, &sim] { r.done.push_back(sim.now()); });
    // The reverse direction is a different link: it does not share.
    Time reverse;
    net.start(1, 0, Bytes{1'000'000}, [&reverse, &sim] { reverse = sim.now(); });
    sim.run();
    CHECK(r.done == std::vector<Time>{Time::us(21), Time::us(21)});
    CHECK(reverse == Time::us(11));
}

TEST_CASE("flow: a finished flow frees its bandwidth for the others") {
    const Topology t(two_gpu_link(gbps(1), Time{}), 2);  // 1 byte per ns, no latency
    Simulation sim;
    FlowNetwork net(sim, t);
    Time a, b;
    net.start(0, 1, Bytes{1000}, [&a, &sim] { a = sim.now(); });
    net.start(0, 1, Bytes{3000}, [&b, &sim] { b = sim.now(); });
    sim.run();
    // Both at 0.5 B/ns until A is done at 2000 ns (1000 B each); B's last 2000 B then go at 1 B/ns.
    CHECK(a == Time::ns(2000));
    CHECK(b == Time::ns(4000));
    CHECK(net.link_bytes(t.route(0, 1)[0]) == doctest::Approx(4000));
    CHECK(net.link_busy_time(t.route(0, 1)[0]) == Time::ns(4000));
}

TEST_CASE("flow: a flow starting later slows the running one down") {
    const Topology t(two_gpu_link(gbps(1), Time{}), 2);
    Simulation sim;
    FlowNetwork net(sim, t);
    Time a, b;
    net.start(0, 1, Bytes{2000}, [&a, &sim] { a = sim.now(); });
    sim.schedule_at(Time::ns(1000), [&] { net.start(0, 1, Bytes{500}, [&b, &sim] { b = sim.now(); }); });
    sim.run();
    // A: 1000 B alone, then 0.5 B/ns with B; B's 500 B take 1000 ns (to 2000); A's last 500 B at 1 B/ns.
    CHECK(b == Time::ns(2000));
    CHECK(a == Time::ns(2500));
}

TEST_CASE("flow: a flow gets its bottleneck, and max-min gives the rest to the others") {
    // GPU0 -> PCIe switch (100 GB/s) is shared by A (to another node, network 25 GB/s)
    // and B (to GPU1 on the same switch): A gets 25, B the remaining 75.
    const Topology t(pcie_nodes(2, 2, gbps(100), gbps(25), Time::us(1)), 4);
    Simulation sim;
    FlowNetwork net(sim, t);
    Time a, b;
    // B starts later so that both leave their latency phase together.
    const Time both = t.route_latency(0, 2);
    net.start(0, 2, Bytes{25'000'000}, [&a, &sim] { a = sim.now(); });
    sim.schedule_at(both - t.route_latency(0, 1),
                    [&] { net.start(0, 1, Bytes{75'000'000}, [&b, &sim] { b = sim.now(); }); });
    sim.run();
    CHECK(t.route_bandwidth(0, 2).bytes_per_s == doctest::Approx(25e9));
    CHECK(a == both + Time::us(1000));
    CHECK(b == both + Time::us(1000));
    const auto shared = t.route(0, 1)[0];
    CHECK(net.link_max_load(shared) == doctest::Approx(1.0));
    // The one-lookup form gives the same links and latency (GPU, PCIe switch,
    // host, PCIe switch, NIC, network switch, and down again: 1 us a link).
    Time latency;
    CHECK(&t.route(0, 2, latency) == &t.route(0, 2));
    CHECK(latency == both);
    CHECK(latency == Time::us(static_cast<std::int64_t>(t.route(0, 2).size())));
    CHECK(net.max_link_load() <= 1.0 + 1e-9);
}

TEST_CASE("flow: zero-byte flows and flows to oneself complete after the latency only") {
    const Topology t(two_gpu_link(gbps(100), Time::us(1)), 2);
    Simulation sim;
    FlowNetwork net(sim, t);
    Time zero = Time::max(), self = Time::max();
    net.start(0, 1, Bytes{0}, [&zero, &sim] { zero = sim.now(); });
    net.start(1, 1, Bytes{1000}, [&self, &sim] { self = sim.now(); });
    CHECK(self == Time::max());  // still via an event
    sim.run();
    CHECK(zero == Time::us(1));
    CHECK(self == Time{});
}

TEST_CASE("flow: many random flows all finish, conserve bytes and never overload a link") {
    const Topology t(fat_tree(4, 4, 2, 4), 24);
    Simulation sim;
    FlowNetwork net(sim, t);
    std::mt19937 rng(7);
    std::vector<double> expected(t.link_count(), 0.0);
    int finished = 0;
    const int total = 3000;
    for (int i = 0; i < total; ++i) {
        const int src = static_cast<int>(rng() % 24), dst = static_cast<int>(rng() % 24);
        const Bytes size{1000 + rng() % 5'000'000};
        const double eff = 0.5 + 0.5 * static_cast<double>(rng() % 100) / 100.0;
        const Time at = Time::ns(rng() % 2'000'000);
        for (auto id : t.route(src, dst)) expected[id] += size.as_double();
        sim.schedule_at(at, [&net, &finished, src, dst, size, eff] {
            net.start(
                src, dst, size, [&finished] { ++finished; }, eff);
        });
    }
    sim.run();
    CHECK(finished == total);
    CHECK(net.active_flows() == 0);
    CHECK(net.max_link_load() <= 1.0 + 1e-9);
    CHECK(net.max_link_load() > 0.99);
    for (sim::net::LinkId id = 0; id < t.link_count(); ++id) CHECK(net.link_bytes(id) == doctest::Approx(expected[id]));
    // Batching: far fewer recomputations than starts + ends, each touching only its component.
    CHECK(net.recomputations() <= 2u * total);
}

TEST_SUITE_END();
