// Small clusters built in code for the net tests, and route checks.
#pragma once

#include "sim/net/topology.h"

#include <doctest/doctest.h>

#include <functional>

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

}  // namespace net_fixtures
