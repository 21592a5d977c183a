// Small clusters built in code for the net tests, route checks, the
// collective requests they send, and the per-link record two runs of the
// flow network are compared on (repeated and reused steps).
#pragma once

#include "sim/core/simulation.h"
#include "sim/net/collective.h"
#include "sim/net/flow_network.h"
#include "sim/net/topology.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace net_fixtures {

using sim::Bandwidth;
using sim::Time;
using sim::net::ClusterSpec;
using sim::net::LinkClass;

inline Bandwidth gbps(double gb_per_s) { return Bandwidth{gb_per_s * 1e9}; }

inline void set_link(ClusterSpec& c, LinkClass cls, Bandwidth bw, Time latency) {
    c.links[static_cast<std::size_t>(cls)] = sim::net::LinkClassSpec{bw, latency};
}

// One NVSwitch node of `gpus` GPUs (no network).
inline ClusterSpec nvswitch_node(int gpus, Bandwidth nvlink, Time latency) {
    ClusterSpec c;
    c.name = "test-nvswitch";
    c.gpu = "test";
    c.nodes = 1;
    c.gpus_per_node = gpus;
    c.intra_node = sim::net::IntraNode::nvswitch;
    c.pcie_switches_per_node = 1;
    set_link(c, LinkClass::nvlink, nvlink, latency);
    return c;
}

// Two GPUs joined by one NVLink each way (a 2-GPU mesh gives each pair the full rate).
inline ClusterSpec two_gpu_link(Bandwidth bw, Time latency) {
    auto c = nvswitch_node(2, bw, latency);
    c.intra_node = sim::net::IntraNode::nvlink_mesh;
    return c;
}

// Nodes of PCIe-only GPUs (one PCIe switch per node, one NIC per GPU) on one
// network switch.
inline ClusterSpec pcie_nodes(int nodes, int gpus_per_node, Bandwidth pcie, Bandwidth network, Time latency) {
    ClusterSpec c;
    c.name = "test-pcie";
    c.gpu = "test";
    c.nodes = nodes;
    c.gpus_per_node = gpus_per_node;
    c.intra_node = sim::net::IntraNode::pcie;
    c.pcie_switches_per_node = 1;
    c.inter_node = sim::net::InterNode::single_switch;
    c.nics_per_node = gpus_per_node;
    set_link(c, LinkClass::pcie, pcie, latency);
    set_link(c, LinkClass::network, network, latency);
    return c;
}

// A DGX-like fat-tree cluster: NVSwitch nodes, PCIe switches, NICs, leaves, spines.
inline ClusterSpec fat_tree(int gpus_per_node, int nics_per_node, int pcie_switches, int leaf_ports) {
    ClusterSpec c;
    c.name = "test-fat-tree";
    c.gpu = "test";
    c.nodes = 0;
    c.gpus_per_node = gpus_per_node;
    c.intra_node = sim::net::IntraNode::nvswitch;
    c.pcie_switches_per_node = pcie_switches;
    c.inter_node = sim::net::InterNode::fat_tree;
    c.nics_per_node = nics_per_node;
    c.leaf_switch_ports = leaf_ports;
    set_link(c, LinkClass::nvlink, gbps(450), Time::ns(600));
    set_link(c, LinkClass::pcie, gbps(63), Time::us(1));
    set_link(c, LinkClass::network, gbps(50), Time::ns(2700));
    return c;
}

// `gpus` GPUs of DGX-like nodes (8 GPUs and 8 NICs a node, 4 PCIe switches,
// 64-port leaves): the multi-node cluster of the MoE token-exchange tests.
inline sim::net::Topology eight_gpu_nodes(int gpus) { return sim::net::Topology(fat_tree(8, 8, 4, 64), gpus); }

// GPUs 0 .. n-1.
inline std::vector<int> first_gpus(int n) {
    std::vector<int> v(static_cast<std::size_t>(n));
    std::iota(v.begin(), v.end(), 0);
    return v;
}

inline sim::net::CollectiveRequest request(sim::net::CollectiveOp op, std::vector<int> gpus, sim::Bytes size,
                                           std::string algo = "auto") {
    sim::net::CollectiveRequest r;
    r.op = op;
    r.gpus = std::move(gpus);
    r.size = size;
    r.algorithm = std::move(algo);
    return r;
}

// An MoE token exchange (dispatch or combine) over GPUs 0 .. gpus-1.
inline sim::net::CollectiveRequest token_exchange(int gpus, sim::Bytes size, sim::net::TokenRouting tokens,
                                                  std::string algo = "auto") {
    auto r = request(sim::net::CollectiveOp::all_to_all, first_gpus(gpus), size, std::move(algo));
    r.tokens = tokens;
    return r;
}

// What the flow network booked on each link by the end of a run.
struct LinkRecord {
    std::vector<double> bytes;
    std::vector<Time> busy;
    double max_load = 0;
};

inline LinkRecord record_links(const sim::net::FlowNetwork& net, const sim::net::Topology& t) {
    LinkRecord out;
    for (sim::net::LinkId id = 0; id < t.link_count(); ++id) {
        out.bytes.push_back(net.link_bytes(id));
        out.busy.push_back(net.link_busy_time(id));
    }
    out.max_load = net.max_link_load();
    return out;
}

// Completion times, busy times and the largest load equal; link bytes to
// rounding (skipped or replayed steps book their payload as whole steps at
// once instead of piece by piece).
inline void check_same(const std::vector<Time>& fast_done, const LinkRecord& fast, const std::vector<Time>& slow_done,
                       const LinkRecord& slow) {
    REQUIRE(fast_done.size() == slow_done.size());
    for (std::size_t i = 0; i < fast_done.size(); ++i) CHECK(fast_done[i] == slow_done[i]);
    for (std::size_t i = 0; i < fast.bytes.size(); ++i) {
        CHECK(fast.bytes[i] == doctest::Approx(slow.bytes[i]).epsilon(1e-12));
        CHECK(fast.busy[i] == slow.busy[i]);
    }
    CHECK(fast.max_load == slow.max_load);
}

// `n` background flows between random distinct GPUs of `t` (generator
// `seed`), of 0.1-3 MB each, started at random times in the first 2 ms;
// each appends its completion time to `done`.
inline void background_flows(sim::Simulation& sim, sim::net::FlowNetwork& net, const sim::net::Topology& t, int n,
                             std::uint64_t seed, std::vector<Time>& done) {
    const int gpus = t.gpu_count();
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> gpu(0, gpus - 1);
    std::uniform_int_distribution<std::uint64_t> at(0, 2'000'000'000), size(100'000, 3'000'000);
    for (int i = 0; i < n; ++i) {
        const int src = gpu(rng), dst = (src + 1 + gpu(rng) % (gpus - 1)) % gpus;
        const Time when = Time::ps(at(rng));
        const sim::Bytes b{size(rng)};
        sim.schedule_at(when, [&net, &done, &sim, src, dst, b] {
            net.start(src, dst, b, [&done, &sim] { done.push_back(sim.now()); });
        });
    }
}

// A route is a chain of links from `src` to `dst` that never passes through
// another GPU, except those `transit_ok` allows (a PXN proxy).
inline void check_route_is_path(const sim::net::Topology& t, int src, int dst,
                                const std::function<bool(int)>& transit_ok = {}) {
    const auto& r = t.route(src, dst);
    if (src == dst) {
        CHECK(r.empty());
        return;
    }
    REQUIRE_FALSE(r.empty());
    CHECK(t.link(r.front()).from == static_cast<std::uint32_t>(src));
    CHECK(t.link(r.back()).to == static_cast<std::uint32_t>(dst));
    for (std::size_t i = 0; i + 1 < r.size(); ++i) {
        CHECK(t.link(r[i]).to == t.link(r[i + 1]).from);
        const auto via = t.link(r[i]).to;
        if (via < static_cast<std::uint32_t>(t.gpu_count())) CHECK((transit_ok && transit_ok(static_cast<int>(via))));
    }
}

// The vertices a route enters, by name, in order.
inline std::vector<std::string> vertices_on(const sim::net::Topology& t, int src, int dst) {
    std::vector<std::string> out;
    for (auto id : t.route(src, dst)) out.push_back(t.vertex_name(t.link(id).to));
    return out;
}

// Whether any of `v` starts with `prefix`.
inline bool visits(const std::vector<std::string>& v, const std::string& prefix) {
    return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
}

// Starts every (src, dst) transfer of `size` at t = 0 on `net` and runs
// `sim`; returns each one's completion time in seconds.
inline std::vector<double> finish_times(sim::net::FlowNetwork& net, sim::Simulation& sim,
                                        const std::vector<std::pair<int, int>>& pairs, sim::Bytes size) {
    std::vector<double> done(pairs.size(), -1.0);
    for (std::size_t i = 0; i < pairs.size(); ++i)
        net.start(pairs[i].first, pairs[i].second, size, [&done, &sim, i] { done[i] = sim.now().us_f() * 1e-6; });
    sim.run();
    return done;
}

// The same on a fresh simulation of `t`.
inline std::vector<double> finish_times(const sim::net::Topology& t, const std::vector<std::pair<int, int>>& pairs,
                                        sim::Bytes size) {
    sim::Simulation sim;
    sim::net::FlowNetwork net(sim, t);
    return finish_times(net, sim, pairs, size);
}

}  // namespace net_fixtures
