// Small clusters built in code for the net tests, and route checks.
#pragma once

#include "sim/core/simulation.h"
#include "sim/net/flow_network.h"
#include "sim/net/topology.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <string>
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
