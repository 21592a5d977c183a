// Topology: graph shapes, fewest-hop routes, BFS vs structural routing, scale.
#include "net_fixtures.h"

#include "sim/config/cluster_loader.h"
#include "sim/core/error.h"
#include "sim/net/topology.h"

#include <doctest/doctest.h>

#include <set>
#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace net_fixtures;
using sim::net::IntraNode;
using sim::net::Topology;

TEST_CASE("topology: an NVSwitch node routes every GPU pair through the switch") {
    const Topology t(nvswitch_node(8, gbps(450), Time::ns(600)), 8);
    CHECK(t.gpu_count() == 8);
    CHECK(t.node_count() == 1);
    CHECK(t.vertex_count() == 8 + 1);  // no PCIe class: no PCIe switches
    CHECK(t.link_count() == 16);
    for (int a = 0; a < 8; ++a) {
        for (int b = 0; b < 8; ++b) {
            check_route_is_path(t, a, b);
            if (a == b) continue;
            REQUIRE(t.route(a, b).size() == 2);
            CHECK(t.vertex_name(t.link(t.route(a, b)[0]).to) == "node0.nvswitch");
            CHECK(t.route_latency(a, b) == Time::ns(1200));
            CHECK(t.route_bandwidth(a, b).bytes_per_s == doctest::Approx(450e9));
        }
    }
    CHECK(t.to_switch(3).size() == 1);
    CHECK(t.link(t.to_switch(3)[0]).from == 3);
    CHECK(t.link(t.from_switch(3)[0]).to == 3);
}

TEST_CASE("topology: NVLink prefers the wider path when PCIe has as few hops") {
    auto spec = nvswitch_node(8, gbps(450), Time::ns(600));
    set_link(spec, LinkClass::pcie, gbps(63), Time::us(1));
    spec.pcie_switches_per_node = 4;  // GPUs 0,1 share a PCIe switch: GPU-PCIe-GPU is also 2 hops
    const Topology t(spec, 8);
    CHECK(t.vertex_count() == 8 + 1 + 4 + 1);
    for (auto id : t.route(0, 1)) CHECK(t.link(id).cls == LinkClass::nvlink);
}

TEST_CASE("topology: an NVLink mesh splits each GPU's bandwidth over its peers") {
    auto spec = nvswitch_node(4, gbps(300), Time::ns(500));
    spec.intra_node = IntraNode::nvlink_mesh;
    const Topology t(spec, 4);
    CHECK(t.vertex_count() == 4);
    CHECK(t.link_count() == 12);
    REQUIRE(t.route(0, 3).size() == 1);
    CHECK(t.route_bandwidth(0, 3).bytes_per_s == doctest::Approx(100e9));
    CHECK(t.route_latency(0, 3) == Time::ns(500));
}

TEST_CASE("topology: NVLink pairs bridge neighbours, other pairs cross PCIe") {
    auto spec = nvswitch_node(8, gbps(300), Time::ns(600));
    spec.intra_node = IntraNode::nvlink_pairs;
    spec.pcie_switches_per_node = 4;
    set_link(spec, LinkClass::pcie, gbps(63), Time::us(1));
    const Topology t(spec, 8);
    REQUIRE(t.route(0, 1).size() == 1);
    CHECK(t.link(t.route(0, 1)[0]).cls == LinkClass::nvlink);
    // 0 and 2 sit on different PCIe switches: GPU -> switch -> host -> switch -> GPU.
    CHECK(vertices_on(t, 0, 2) == std::vector<std::string>{"node0.pcie0", "node0.host", "node0.pcie1", "gpu2"});
    for (auto id : t.route(0, 2)) CHECK(t.link(id).cls == LinkClass::pcie);
    CHECK(t.route_latency(0, 2) == Time::us(4));
}

TEST_CASE("topology: routes across nodes go GPU -> PCIe -> NIC -> switch -> NIC -> PCIe -> GPU") {
    const Topology t(pcie_nodes(2, 2, gbps(100), gbps(25), Time::us(1)), 4);
    CHECK(t.node_count() == 2);
    CHECK(t.node_of(2) == 1);
    CHECK(vertices_on(t, 1, 2) ==
          std::vector<std::string>{"node0.pcie0", "node0.nic1", "switch", "node1.nic0", "node1.pcie0", "gpu2"});
    CHECK(t.route_bandwidth(1, 2).bytes_per_s == doctest::Approx(25e9));
    CHECK(t.route_latency(1, 2) == Time::us(6));
    // Inside a node the PCIe switch is enough.
    CHECK(vertices_on(t, 0, 1) == std::vector<std::string>{"node0.pcie0", "gpu1"});
}

TEST_CASE("topology: the shipped two-node DGX H100 cluster uses each GPU's own NIC") {
    const auto spec = sim::config::load_cluster_file("dgx-h100-x2");
    const Topology t(spec, 16);
    for (int a = 0; a < 16; ++a) {
        for (int b = 0; b < 16; ++b) {
            check_route_is_path(t, a, b);
            if (t.node_of(a) == t.node_of(b)) continue;
            const auto v = vertices_on(t, a, b);
            CHECK(v[1] == "node" + std::to_string(t.node_of(a)) + ".nic" + std::to_string(a % 8));
            CHECK(v[v.size() - 3] == "node" + std::to_string(t.node_of(b)) + ".nic" + std::to_string(b % 8));
            int network_links = 0;
            for (auto id : t.route(a, b)) network_links += t.link(id).cls == LinkClass::network;
            CHECK(network_links == 2);
        }
    }
}

TEST_CASE("topology: BFS on the whole graph and structural routing agree on fat trees") {
    struct Case {
        int gpn, nics, pcie, ports, gpus;
    };
    for (const Case c : {Case{2, 2, 1, 4, 12}, Case{8, 8, 4, 8, 32}, Case{8, 8, 4, 16, 64}, Case{4, 4, 2, 4, 24},
                         Case{8, 4, 4, 8, 40}}) {
        CAPTURE(c.gpn);
        CAPTURE(c.ports);
        const Topology t(fat_tree(c.gpn, c.nics, c.pcie, c.ports), c.gpus);
        std::set<std::string> spines_used;
        for (int a = 0; a < c.gpus; ++a) {
            for (int b = 0; b < c.gpus; ++b) {
                const auto bfs = t.bfs_route(a, b);
                CHECK(bfs == t.structural_route(a, b));
                CHECK(bfs == t.route(a, b));
                check_route_is_path(t, a, b);
                for (auto id : bfs)
                    if (t.vertex_name(t.link(id).to).rfind("spine", 0) == 0)
                        spines_used.insert(t.vertex_name(t.link(id).to));
            }
        }
        // D-mod-k spreads traffic over every spine.
        CHECK(spines_used.size() == static_cast<std::size_t>(c.ports / 2));
    }
}

TEST_CASE("topology: nodes: auto builds a partial last node") {
    auto spec = fat_tree(8, 8, 4, 64);
    const Topology t(spec, 12);
    CHECK(t.node_count() == 2);
    CHECK(t.node_of(11) == 1);
    // node 0: 8 GPUs + NVSwitch + 4 PCIe + host + 8 NICs; node 1: 4 GPUs + NVSwitch + 4 PCIe + host + 4 NICs; one leaf.
    CHECK(t.vertex_count() == 12 + (1 + 4 + 1 + 8) + (1 + 4 + 1 + 4) + 1);
    check_route_is_path(t, 11, 0);
    check_route_is_path(t, 3, 10);
}

TEST_CASE("topology: a 16,384-GPU fat tree builds and routes without all-pairs state") {
    const auto spec = sim::config::load_cluster_file("dgx-h100-pod");
    const Topology t(spec, 16384);
    CHECK(t.node_count() == 2048);
    // 2048 x (8 GPUs + NVSwitch + 4 PCIe + host + 8 NICs) + 512 leaves + 32 spines
    CHECK(t.vertex_count() == 2048u * 22u + 512u + 32u);
    for (int g = 0; g < 16384; ++g) {
        const auto& r = t.route(g, (g + 1) % 16384);
        CHECK(!r.empty());
    }
    CHECK(t.cached_routes() == 16384);
    check_route_is_path(t, 16383, 0);
    check_route_is_path(t, 5, 9000);
    // The structural route is the whole-graph BFS route.
    for (auto [a, b] : {std::pair{0, 16383}, {7, 8}, {100, 5000}, {12345, 54}, {8191, 8192}})
        CHECK(t.bfs_route(a, b) == t.route(a, b));
}

TEST_CASE("topology: clusters that cannot hold the GPUs are ConfigErrors at the cluster") {
    auto spec = nvswitch_node(8, gbps(450), Time::ns(600));
    spec.where = sim::SourceLocation{"c.yaml", 1, 1};
    CHECK_THROWS_WITH_AS(Topology(spec, 9), doctest::Contains("c.yaml:1:1:"), sim::ConfigError);
    auto two = pcie_nodes(2, 2, gbps(100), gbps(25), Time::us(1));
    CHECK_THROWS_AS(Topology(two, 5), sim::ConfigError);
    CHECK_THROWS_AS(Topology(two, 0), sim::ConfigError);
    const Topology ok(two, 3);
    CHECK_THROWS_AS(ok.route(0, 3), sim::ModelError);
}

TEST_CASE("topology: cached routes stay where they are as the cache grows") {
    // Flows keep pointers to their routes, so the cache must never move an
    // entry: take one route's address, add about 4000 more routes (the
    // cache's index grows from 1024 slots several times), and find the same
    // entry, unchanged, at the same address; every route found again is the
    // one computed first (a probe that stopped early would compute a second copy).
    const auto spec = sim::config::load_cluster_file("dgx-h100-pod");
    const Topology t(spec, 64);
    const auto& first = t.route(0, 63);
    const std::vector<sim::net::LinkId> copy = first;
    std::vector<const std::vector<sim::net::LinkId>*> seen;
    for (int a = 0; a < 64; ++a)
        for (int b = 0; b < 64; ++b) seen.push_back(&t.route(a, b));
    CHECK(t.cached_routes() == 64u * 64u);
    CHECK(&t.route(0, 63) == &first);
    CHECK(first == copy);
    for (int a = 0; a < 64; ++a)
        for (int b = 0; b < 64; ++b) REQUIRE(&t.route(a, b) == seen[static_cast<std::size_t>(a * 64 + b)]);
    CHECK(t.cached_routes() == 64u * 64u);
}

TEST_SUITE_END();
