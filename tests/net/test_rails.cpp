// Rail-optimised fabrics: NIC k of every node on rail k's leaves, spine
// oversubscription, and NCCL's PXN (a cross-rail transfer leaves through the
// NIC on the destination's rail after an NVLink hop). docs/network-model.md, "Rails".
#include "net_fixtures.h"

#include "sim/config/cluster_loader.h"
#include "sim/core/simulation.h"
#include "sim/net/flow_network.h"
#include "sim/net/topology.h"

#include "tests/test_util.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace net_fixtures;
using sim::Bytes;
using sim::net::FlowNetwork;
using sim::net::InterNode;
using sim::net::Topology;

namespace {

// Nodes of 8 GPUs and 8 NICs on a rail-optimised fabric whose leaves have 8
// ports: 4 down (one per node of a group of 4), 4 / oversubscription up.
ClusterSpec rails(int oversubscription, bool pxn) {
    ClusterSpec c = fat_tree(8, 8, 4, 8);
    c.name = "test-rails";
    c.inter_node = InterNode::rail_optimized;
    c.spine_oversubscription = oversubscription;
    c.pxn = pxn;
    return c;
}

}  // namespace

TEST_CASE("rails: NIC k of every node is on rail k's leaf, so rail-aligned routes never reach a spine") {
    const Topology t(rails(1, true), 32);  // 4 nodes: one leaf per rail
    // GPU 2 of node 0 to GPU 2 of node 3: its NIC, leaf 2, the peer's NIC.
    const auto v = vertices_on(t, 2, 26);
    CHECK(visits(v, "leaf2"));
    CHECK_FALSE(visits(v, "spine"));
    CHECK_FALSE(visits(v, "node0.nvswitch"));
    check_route_is_path(t, 2, 26);
    // A fat tree of the same ports puts node 0's and node 1's NICs 0-3 on
    // leaf 0 and their NICs 4-7 on leaf 1: GPU 2 to GPU 10 crosses nothing
    // but leaf 0, GPU 2 to GPU 26 (node 3) needs a spine.
    const Topology f(fat_tree(8, 8, 4, 8), 32);
    CHECK(visits(vertices_on(f, 2, 26), "spine"));
}

TEST_CASE("rails: a cross-rail transfer goes over a spine without PXN, and over NVLink then its rail with it") {
    const Topology off(rails(1, false), 32);
    const auto direct = vertices_on(off, 0, 11);  // GPU 0 of node 0 to GPU 3 of node 1
    CHECK(visits(direct, "leaf0"));
    CHECK(visits(direct, "spine"));
    CHECK(visits(direct, "leaf3"));
    check_route_is_path(off, 0, 11);

    const Topology on(rails(1, true), 32);
    const auto pxn = vertices_on(on, 0, 11);
    // gpu0 -> node0.nvswitch -> gpu3 (the proxy on rail 3) -> its PCIe switch
    // -> node0.nic3 -> leaf3 -> node1.nic3 -> ... -> gpu11.
    REQUIRE(pxn.size() >= 3);
    CHECK(pxn[0] == "node0.nvswitch");
    CHECK(pxn[1] == "gpu3");
    CHECK(visits(pxn, "node0.nic3"));
    CHECK(visits(pxn, "leaf3"));
    CHECK_FALSE(visits(pxn, "leaf0"));
    CHECK_FALSE(visits(pxn, "spine"));
    CHECK(pxn.back() == "gpu11");
}

TEST_CASE("rails: every route is a path, and leaves its node through the NIC of its own or the proxy's rail") {
    for (int gpus : {16, 32, 40, 64}) {
        for (int over : {1, 2}) {
            for (bool pxn : {false, true}) {
                CAPTURE(gpus);
                CAPTURE(over);
                CAPTURE(pxn);
                const Topology t(rails(over, pxn), gpus);
                for (int a = 0; a < gpus; ++a)
                    for (int b = 0; b < gpus; ++b) {
                        // The only GPU a route may cross is the PXN proxy: on
                        // the source's node, on the destination's rail.
                        check_route_is_path(t, a, b, [a, b](int via) { return via / 8 == a / 8 && via % 8 == b % 8; });
                        if (a / 8 == b / 8) continue;
                        // The NIC it leaves by: its own rail, or (PXN) the destination's.
                        const int rail = pxn ? b % 8 : a % 8;
                        CHECK(visits(vertices_on(t, a, b),
                                     "node" + std::to_string(a / 8) + ".nic" + std::to_string(rail)));
                        CHECK_FALSE(visits(vertices_on(t, a, b), "node" + std::to_string(a / 8) + ".host"));
                    }
            }
        }
    }
}

TEST_CASE("rails: at 2:1 rail-aligned traffic runs at the NIC rate while cross-rail traffic gets half") {
    // 4 nodes, leaves of 4 down- and 2 uplinks (2:1), NICs at 50 GB/s. Every
    // node's GPU 0 sends 50 MB to the next node: on its own rail, each flow
    // has its NIC to itself (1 ms). Across rails (to GPUs 9, 18, 27 and 4,
    // on rails 1-4), the 4 flows leave leaf 0 by its uplinks; a route takes
    // spine (destination node's port on its leaf mod spines: nodes 1, 2, 3,
    // 0 on ports 1, 2, 3, 0), so at 2:1 two flows share each of
    // the 2 uplinks: 25 GB/s each (2 ms). At 1:1 (4 spines) each has its own.
    const Topology t(rails(2, false), 32);
    const Bytes size{50'000'000};
    const std::vector<std::pair<int, int>> aligned{{0, 8}, {8, 16}, {16, 24}, {24, 0}};
    const std::vector<std::pair<int, int>> crossing{{0, 9}, {8, 18}, {16, 27}, {24, 4}};
    const auto a = finish_times(t, aligned, size);
    const auto c = finish_times(t, crossing, size);
    for (std::size_t i = 0; i < 4; ++i) {
        CAPTURE(i);
        CHECK(a[i] - t.route_latency(aligned[i].first, aligned[i].second).us_f() * 1e-6 ==
              doctest::Approx(1e-3).epsilon(1e-6));
        CHECK(c[i] - t.route_latency(crossing[i].first, crossing[i].second).us_f() * 1e-6 ==
              doctest::Approx(2e-3).epsilon(1e-6));
    }
    const Topology full(rails(1, false), 32);
    const auto f = finish_times(full, crossing, size);
    for (std::size_t i = 0; i < 4; ++i)
        CHECK(f[i] - full.route_latency(crossing[i].first, crossing[i].second).us_f() * 1e-6 ==
              doctest::Approx(1e-3).epsilon(1e-6));
    // With PXN the crossing flows stay on their destinations' rails: full rate again.
    const Topology p(rails(2, true), 32);
    const auto x = finish_times(p, crossing, size);
    for (std::size_t i = 0; i < 4; ++i)
        CHECK(x[i] - p.route_latency(crossing[i].first, crossing[i].second).us_f() * 1e-6 ==
              doctest::Approx(1e-3).epsilon(1e-6));
}

TEST_CASE("rails: rail-aligned traffic between leaf groups spreads over every spine (D-mod-k on the node's port)") {
    // 8 nodes: each rail has 2 leaves (nodes 0-3, nodes 4-7), each with 4
    // down- and 4 uplinks (1:1), NICs at 50 GB/s. GPU 0 of node i sends 50 MB
    // to GPU 0 of node i + 4, all on rail 0 and across its two leaves. The
    // destinations' ports are 0, 1, 2, 3: one spine each, so every flow has
    // its own uplink and runs at the NIC rate (1 ms). Choosing the spine by
    // GPU id (8 (i + 4) mod 4 = 0) sent all 4 through spine 0: 4 ms.
    const Topology t(rails(1, false), 64);
    const Bytes size{50'000'000};
    const std::vector<std::pair<int, int>> across{{0, 32}, {8, 40}, {16, 48}, {24, 56}};
    for (const auto& pair : across) {
        CAPTURE(pair.first);
        CHECK(visits(vertices_on(t, pair.first, pair.second), "spine"));
    }
    const auto d = finish_times(t, across, size);
    for (std::size_t i = 0; i < 4; ++i) {
        CAPTURE(i);
        CHECK(d[i] - t.route_latency(across[i].first, across[i].second).us_f() * 1e-6 ==
              doctest::Approx(1e-3).epsilon(1e-6));
    }
}

TEST_CASE("rails: the shipped DGX H100 SuperPOD has 8 rails, one leaf per rail per 32 nodes") {
    const Topology t(sim::config::load_cluster_file("dgx-h100-superpod"), 512);  // 64 nodes: 2 leaves per rail
    const auto same_group = vertices_on(t, 5, 8 * 31 + 5);                       // node 0 -> node 31, rail 5
    const auto other_group = vertices_on(t, 5, 8 * 32 + 5);                      // node 0 -> node 32, rail 5
    CHECK_FALSE(visits(same_group, "spine"));
    CHECK(visits(other_group, "spine"));
    CHECK(visits(vertices_on(t, 5, 8 * 31 + 6), "node0.nvswitch"));  // PXN across rails
}

TEST_CASE("rails: bad fabric keys (rails, oversubscription, pxn, planes) are ConfigErrors at file:line:column") {
    const std::string good = R"(name: t
gpu: h100-sxm
nodes: 4
gpus_per_node: 8
intra_node: nvswitch
inter_node: rail-optimized
nics_per_node: 8
rails: 8
leaf_switch_ports: 64
spine_oversubscription: 2
links:
  nvlink:  {bandwidth: 450 GB/s, latency: 1 us}
  pcie:    {bandwidth: 63 GB/s, latency: 1 us}
  network: {bandwidth: 400 Gb/s, latency: 2 us}
)";
    const auto load = [](const std::string& text) {
        sim::config::load_cluster(sim::config::load_string(text, "c.yaml"));
    };
    const auto spec = sim::config::load_cluster(sim::config::load_string(good, "c.yaml"));
    CHECK(spec.inter_node == InterNode::rail_optimized);
    CHECK(spec.spine_oversubscription == 2);
    CHECK(spec.pxn);
    CHECK(parasim_test::config_error_of(load, parasim_test::replace_once(good, "rails: 8", "rails: 4")) ==
          "c.yaml:8:8: rails: 4 rails, but nics_per_node is 8: a rail-optimized fabric has one rail per NIC of a node");
    CHECK(parasim_test::config_error_of(
              load, parasim_test::replace_once(good, "spine_oversubscription: 2", "spine_oversubscription: 3")) ==
          "c.yaml:10:25: spine_oversubscription: 32 leaf downlinks (leaf_switch_ports / 2) cannot be split 3:1 into "
          "whole uplinks");
    CHECK(parasim_test::config_error_of(
              load, parasim_test::replace_once(parasim_test::replace_once(good, "rail-optimized", "fat-tree"),
                                               "rails: 8\n", "pxn: false\n")) ==
          "c.yaml:8:6: pxn: applies only to a rail-optimized inter_node or one with planes > 1");
    // Planes (docs/network-model.md §3b): a count that divides the NICs, on a two-level fabric only.
    const std::string planes = parasim_test::replace_once(good, "rails: 8", "planes: 2");
    CHECK(sim::config::load_cluster(sim::config::load_string(planes, "c.yaml")).planes == 2);
    CHECK(parasim_test::config_error_of(load, parasim_test::replace_once(good, "rails: 8", "planes: 3")) ==
          "c.yaml:8:9: planes: 3 planes do not divide the 8 NICs of a node (nics_per_node): every plane takes the "
          "same number of each node's NICs");
    CHECK(parasim_test::config_error_of(load, parasim_test::replace_once(good, "rails: 8", "planes: 0")) ==
          "c.yaml:8:9: planes: 0 is out of range [1, 4096]");
    CHECK(parasim_test::config_error_of(
              load, parasim_test::replace_once(parasim_test::replace_once(planes, "rail-optimized", "single-switch"),
                                               "spine_oversubscription: 2\n", "")) ==
          "c.yaml:8:9: planes: applies only to a fat-tree or rail-optimized inter_node");
    // pxn is meaningful on a multi-plane fat tree (the plane change), not only on rails.
    CHECK_FALSE(sim::config::load_cluster(
                    sim::config::load_string(
                        parasim_test::replace_once(parasim_test::replace_once(planes, "rail-optimized", "fat-tree"),
                                                   "planes: 2\n", "planes: 2\npxn: false\n"),
                        "c.yaml"))
                    .pxn);
}

TEST_SUITE_END();
