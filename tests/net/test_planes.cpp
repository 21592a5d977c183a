// Multi-plane fabrics: NIC k of every node on plane k mod P, each plane a
// fat tree or rail-optimised fabric of its own with its own spines, traffic
// changing plane only inside a node. docs/network-model.md §3b.
#include "net_fixtures.h"

#include "sim/config/cluster_loader.h"
#include "sim/core/simulation.h"
#include "sim/net/collective.h"
#include "sim/net/flow_network.h"
#include "sim/net/topology.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace net_fixtures;
using sim::Bytes;
using sim::net::FlowNetwork;
using sim::net::InterNode;
using sim::net::Topology;

namespace {

// Nodes of 2 GPUs and 2 NICs (one each) on NVSwitch, leaves of `leaf_ports`
// ports, NICs at 50 GB/s (fixtures' fat_tree), `planes` planes.
ClusterSpec two_nic_nodes(int leaf_ports, int planes, int oversubscription = 1) {
    ClusterSpec c = fat_tree(2, 2, 1, leaf_ports);
    c.name = "test-planes";
    c.planes = planes;
    c.spine_oversubscription = oversubscription;
    return c;
}

// The planes ("plane0", ...) whose switches a route crosses.
std::set<std::string> planes_on(const Topology& t, int src, int dst) {
    std::set<std::string> out;
    for (const auto& v : vertices_on(t, src, dst))
        if (v.rfind("plane", 0) == 0) out.insert(v.substr(0, v.find('.')));
    return out;
}

// Completion times less each route's latency: the drain time, in seconds.
std::vector<double> drain_times(const Topology& t, std::vector<double> done,
                                const std::vector<std::pair<int, int>>& pairs) {
    for (std::size_t i = 0; i < pairs.size(); ++i)
        done[i] -= t.route_latency(pairs[i].first, pairs[i].second).us_f() * 1e-6;
    return done;
}

std::vector<double> drain_times(const Topology& t, const std::vector<std::pair<int, int>>& pairs, Bytes size) {
    return drain_times(t, finish_times(t, pairs, size), pairs);
}

// Bytes carried by the links that leave a leaf of `plane` for a spine.
double uplink_bytes(const Topology& t, const FlowNetwork& net, const std::string& plane) {
    double sum = 0;
    for (sim::net::LinkId id = 0; id < t.link_count(); ++id) {
        const std::string& from = t.vertex_name(t.link(id).from);
        const std::string& to = t.vertex_name(t.link(id).to);
        if (from.rfind(plane + ".leaf", 0) == 0 && to.rfind(plane + ".spine", 0) == 0) sum += net.link_bytes(id);
    }
    return sum;
}

}  // namespace

TEST_CASE("planes: NIC k is on plane k mod P, and no link joins the switches of two planes") {
    // 8 nodes x 2 NICs, 2 planes, leaves of 4 down- and 4 uplinks: each plane
    // holds 8 NICs on 2 leaves and has 4 spines of its own.
    const Topology t(two_nic_nodes(8, 2), 16);
    int leaves = 0, spines = 0;
    for (std::uint32_t v = 0; v < t.vertex_count(); ++v) {
        const std::string& n = t.vertex_name(v);
        leaves += n.find(".leaf") != std::string::npos;
        spines += n.find(".spine") != std::string::npos;
    }
    CHECK(leaves == 4);
    CHECK(spines == 8);
    for (sim::net::LinkId id = 0; id < t.link_count(); ++id) {
        const std::string& a = t.vertex_name(t.link(id).from);
        const std::string& b = t.vertex_name(t.link(id).to);
        if (a.rfind("plane", 0) == 0 && b.rfind("plane", 0) == 0) {
            CAPTURE(a);
            CAPTURE(b);
            CHECK(a.substr(0, a.find('.')) == b.substr(0, b.find('.')));
        }
    }
    // GPU 0 (NIC 0, plane 0) to GPU 8 (node 4, NIC 0): plane 0's leaves and a spine.
    const auto v = vertices_on(t, 0, 8);
    CHECK(visits(v, "node0.nic0"));
    CHECK(visits(v, "plane0.leaf0"));
    CHECK(visits(v, "plane0.spine"));
    CHECK(visits(v, "plane0.leaf1"));
    CHECK(planes_on(t, 0, 8) == std::set<std::string>{"plane0"});
}

TEST_CASE("planes: every route is a path that crosses one plane, changing plane inside the source node") {
    for (int gpus : {4, 9, 16}) {  // 9: a partial last node
        for (bool pxn : {false, true}) {
            for (auto inter : {InterNode::fat_tree, InterNode::rail_optimized}) {
                CAPTURE(gpus);
                CAPTURE(pxn);
                ClusterSpec c = two_nic_nodes(8, 2);
                c.inter_node = inter;
                c.pxn = pxn;
                const Topology t(c, gpus);
                for (int a = 0; a < gpus; ++a)
                    for (int b = 0; b < gpus; ++b) {
                        // With PXN the only GPU a route may cross is the proxy:
                        // on the source's node, on the destination's NIC index.
                        check_route_is_path(t, a, b, [a, b](int via) { return via / 2 == a / 2 && via % 2 == b % 2; });
                        if (a / 2 == b / 2) continue;
                        CHECK(planes_on(t, a, b) == std::set<std::string>{"plane" + std::to_string(b % 2)});
                        // It leaves by the NIC on the destination's plane.
                        CHECK(visits(vertices_on(t, a, b),
                                     "node" + std::to_string(a / 2) + ".nic" + std::to_string(b % 2)));
                    }
            }
        }
    }
}

TEST_CASE("planes: a cross-plane transfer crosses NVLink to the proxy with PXN, and PCIe to the other NIC without") {
    // GPU 0 (node 0, plane 0) to GPU 9 (node 4, NIC 1, plane 1).
    const Topology on(two_nic_nodes(8, 2), 16);
    const auto p = vertices_on(on, 0, 9);
    REQUIRE(p.size() >= 3);
    CHECK(p[0] == "node0.nvswitch");
    CHECK(p[1] == "gpu1");
    CHECK(visits(p, "node0.nic1"));
    CHECK_FALSE(visits(p, "node0.nic0"));
    ClusterSpec c = two_nic_nodes(8, 2);
    c.pxn = false;
    const Topology off(c, 16);
    const auto d = vertices_on(off, 0, 9);
    CHECK(d[0] == "node0.pcie0");
    CHECK(d[1] == "node0.nic1");
    CHECK_FALSE(visits(d, "node0.nvswitch"));
    CHECK(planes_on(off, 0, 9) == std::set<std::string>{"plane1"});
}

TEST_CASE("planes: for balanced traffic two planes give what one plane with switches of twice the ports gives") {
    // Every GPU sends 50 MB to its own NIC index on the node 4 further on.
    // Two planes of leaves with 4 down- and 4 uplinks: plane l holds NIC l of
    // nodes 0-3 on leaf 0 and of nodes 4-7 on leaf 1; the 4 flows leaving a
    // leaf go to nodes 4-7 (or 0-3), ports 0-3: one spine each, so every
    // flow has the 50 GB/s NIC rate: 1 ms. One plane of leaves with 8 down-
    // and 8 uplinks (the same 16 NIC ports and 16 uplinks) holds nodes 0-3 on
    // leaf 0: 8 flows over 8 uplinks, also 1 ms each. Choosing a plane's
    // spine by GPU id instead of the NIC's port (ids 8, 10, 12, 14 mod 4)
    // would put two flows on each of 2 spines: 2 ms.
    const Bytes size{50'000'000};
    std::vector<std::pair<int, int>> pairs;
    for (int g = 0; g < 16; ++g) pairs.emplace_back(g, (g + 8) % 16);
    const Topology two(two_nic_nodes(8, 2), 16);
    const Topology one(two_nic_nodes(16, 1), 16);
    const auto a = drain_times(two, pairs, size);
    const auto b = drain_times(one, pairs, size);
    for (std::size_t i = 0; i < pairs.size(); ++i) {
        CAPTURE(i);
        CHECK(visits(vertices_on(two, pairs[i].first, pairs[i].second), "plane"));
        CHECK(a[i] == doctest::Approx(1e-3).epsilon(1e-6));
        CHECK(b[i] == doctest::Approx(1e-3).epsilon(1e-6));
    }
}

TEST_CASE("planes: traffic on one plane cannot use the other plane's idle spines (2:1)") {
    // Leaves of 4 down- and 2 uplinks (2:1), NICs at 50 GB/s. GPU 0 of nodes
    // 0-3 sends 50 MB to GPU 0 of nodes 4-7: 4 flows on plane 0 leave its
    // leaf 0 over 2 uplinks (spine = destination port 0-3 mod 2), 25 GB/s
    // each: 2 ms, while plane 1's uplinks carry nothing. The same 4 nodes
    // sending 2 flows on each plane (GPU 0 of nodes 0, 1 to nodes 4, 5 and
    // GPU 1 of nodes 2, 3 to nodes 6, 7) give each flow an uplink: 1 ms.
    const Bytes size{50'000'000};
    const Topology two(two_nic_nodes(8, 2, 2), 16);
    {
        const std::vector<std::pair<int, int>> one_plane{{0, 8}, {2, 10}, {4, 12}, {6, 14}};
        sim::Simulation sim;
        FlowNetwork net(sim, two);
        for (double x : drain_times(two, finish_times(net, sim, one_plane, size), one_plane))
            CHECK(x == doctest::Approx(2e-3).epsilon(1e-6));
        CHECK(uplink_bytes(two, net, "plane0") == doctest::Approx(4 * 50e6));
        CHECK(uplink_bytes(two, net, "plane1") == 0.0);
    }
    const std::vector<std::pair<int, int>> both_planes{{0, 8}, {2, 10}, {5, 13}, {7, 15}};
    for (double x : drain_times(two, both_planes, size)) CHECK(x == doctest::Approx(1e-3).epsilon(1e-6));
}

TEST_CASE("planes: with one of two planes failed, the nodes' traffic shares the NICs left: half the rate") {
    // The balanced traffic above (every GPU to its NIC index on the node 4
    // further on, 50 MB, 1 ms on two planes) with plane 1 gone: one NIC a
    // node, on the one plane left, serves both GPUs, so two flows share each
    // NIC's 50 GB/s: 2 ms.
    const Bytes size{50'000'000};
    std::vector<std::pair<int, int>> pairs;
    for (int g = 0; g < 16; ++g) pairs.emplace_back(g, (g + 8) % 16);
    ClusterSpec failed = two_nic_nodes(8, 1);
    failed.nics_per_node = 1;
    const Topology t(failed, 16);
    for (double x : drain_times(t, pairs, size)) CHECK(x == doctest::Approx(2e-3).epsilon(1e-6));
}

TEST_CASE("planes: a hierarchical all-reduce spreads its rails' rings over the planes, as fast as on one plane") {
    // Rail-optimised, 8 nodes x 2 GPUs, leaves of 4 down- and 4 uplinks: each
    // rail has 2 leaves (nodes 0-3, 4-7). The across-node ring of local rank j
    // runs on rail j, so on plane j with two planes. A plane's leaf has the
    // same 4 uplinks as a leaf of the one-plane fabric, so the time is the
    // same, and each plane's spines carry half the bytes.
    ClusterSpec c1 = two_nic_nodes(8, 1);
    c1.inter_node = InterNode::rail_optimized;
    ClusterSpec c2 = c1;
    c2.planes = 2;
    const Topology one(c1, 16), two(c2, 16);
    sim::net::CollectiveRequest req;
    req.op = sim::net::CollectiveOp::all_reduce;
    req.algorithm = "hierarchical";
    req.size = Bytes{64 << 20};
    for (int g = 0; g < 16; ++g) req.gpus.push_back(g);
    const sim::Time t1 = sim::net::simulate_collective(one, req);
    const sim::Time t2 = sim::net::simulate_collective(two, req);
    CHECK(t1 == t2);
    CHECK(t2 > sim::Time{});

    sim::Simulation sim;
    FlowNetwork net(sim, two);
    sim::net::CollectiveEngine engine(sim, net, two);
    bool done = false;
    engine.start(req, [&done] { done = true; });
    sim.run();
    CHECK(done);
    const double p0 = uplink_bytes(two, net, "plane0"), p1 = uplink_bytes(two, net, "plane1");
    CHECK(p0 > 0.0);
    CHECK(p0 == doctest::Approx(p1));
}

TEST_CASE("planes: the shipped h800-mpft reaches 16,384 GPUs with 64-port switches in two tiers") {
    // 8 planes of 2,048 NICs: 64 leaves of 32 NICs and 32 spines each, every
    // spine with one port per leaf, 64: the switch's port count. One more
    // node makes a 65th leaf per plane.
    const Topology t(sim::config::load_cluster_file("h800-mpft"), 16384);
    std::vector<int> spine_ports(t.vertex_count(), 0);
    int leaves = 0, spines = 0;
    for (std::uint32_t v = 0; v < t.vertex_count(); ++v) {
        leaves += t.vertex_name(v).find(".leaf") != std::string::npos;
        spines += t.vertex_name(v).find(".spine") != std::string::npos;
    }
    for (sim::net::LinkId id = 0; id < t.link_count(); ++id)
        if (t.vertex_name(t.link(id).to).find(".spine") != std::string::npos) ++spine_ports[t.link(id).to];
    CHECK(leaves == 8 * 64);
    CHECK(spines == 8 * 32);
    CHECK(*std::max_element(spine_ports.begin(), spine_ports.end()) == 64);
    // Rail-aligned between leaves: plane 5 only; across planes: PXN over NVLink first.
    CHECK(planes_on(t, 5, 8 * 1000 + 5) == std::set<std::string>{"plane5"});
    CHECK(vertices_on(t, 5, 8 * 1000 + 6).front() == "node0.nvswitch");
}

TEST_CASE("planes: a spec built in code whose planes do not divide its NICs is a ConfigError") {
    ClusterSpec c = two_nic_nodes(8, 2);
    c.nics_per_node = 1;
    CHECK_THROWS_AS(Topology(c, 16), sim::ConfigError);
    c = two_nic_nodes(8, 2);
    c.inter_node = InterNode::single_switch;
    CHECK_THROWS_AS(Topology(c, 16), sim::ConfigError);
}

TEST_SUITE_END();
