// The deepep all-to-all (docs/moe.md section 3a): nodes a token reaches,
// the plan's flows (each token once per destination node over its rail, then
// NVLink), its time on a fat tree, and when auto and names may use it.
#include "net_fixtures.h"

#include "sim/core/error.h"
#include "sim/net/collective.h"
#include "sim/net/collective/i_collective.h"

#include <doctest/doctest.h>

#include <map>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace net_fixtures;
using sim::Bytes;
using sim::net::CollectiveOp;
using sim::net::CollectivePlan;
using sim::net::CollectiveRequest;
using sim::net::nodes_per_token;
using sim::net::simulate_collective;
using sim::net::TokenRouting;
using sim::net::Topology;

TEST_CASE("nodes per token: the node limit of group-limited routing, else the uniform expectation") {
    // DeepSeek-V3 under EP 64 on 8 nodes: 8 groups of 32 experts, one a node; 4 groups -> 4 nodes.
    CHECK(nodes_per_token(TokenRouting{8, 256, 8, 4}, 8) == 4.0);
    // 16 nodes of 16 experts: a group of 32 spans 2 nodes, so 4 groups reach at most 8 nodes = top_k.
    CHECK(nodes_per_token(TokenRouting{8, 256, 8, 4}, 16) == 8.0);
    // top_k caps it: 2 copies reach at most 2 of the 4 nodes the groups allow.
    CHECK(nodes_per_token(TokenRouting{2, 256, 8, 4}, 8) == 2.0);
    // 2 nodes, no limit (the limit 4 does not bind): a node is missed when all
    // 8 experts fall on the other, C(128, 8) / C(256, 8) = prod (128 - i) / (256 - i).
    double miss = 1;
    for (int i = 0; i < 8; ++i) miss *= (128.0 - i) / (256.0 - i);
    CHECK(nodes_per_token(TokenRouting{8, 256, 8, 4}, 2) == doctest::Approx(2 * (1 - miss)));
    CHECK(nodes_per_token(TokenRouting{8, 256, 0, 0}, 2) == doctest::Approx(2 * (1 - miss)));
    // top_k 1 reaches one node; one node is one node.
    CHECK(nodes_per_token(TokenRouting{1, 64, 0, 0}, 4) == doctest::Approx(1.0));
    CHECK(nodes_per_token(TokenRouting{8, 256, 0, 0}, 1) == 1.0);
}

TEST_CASE("deepep plan: S / g to each peer in the node, S m / (k N) to the same rail of each other node") {
    // 2 nodes of 8, S = 16 MB, top 8 of 256 in 8 groups, 1 group a token:
    // a group of 32 lies on one node of 128 experts, so m = 1.
    const Topology t = eight_gpu_nodes(16);
    const auto req = token_exchange(16, Bytes{16'000'000}, TokenRouting{8, 256, 8, 1});
    CollectivePlan plan;
    sim::net::PlanBuilder b(t, req, plan);
    sim::net::find_collective_algorithm("deepep")->plan(b);
    REQUIRE(plan.phases.size() == 1);
    std::map<std::uint64_t, int> nvlink, network;  // flow size -> count
    for (const auto& f : plan.flows) {
        if (t.node_of(f.src) == t.node_of(f.dst)) {
            ++nvlink[f.size.value];
        } else {
            CHECK(f.dst % 8 == f.src % 8);  // the same rail
            ++network[f.size.value];
        }
    }
    // 16 GPUs x 7 peers of S / 8; 16 GPUs x 1 other node of S x 1 / (8 x 2).
    CHECK(nvlink == std::map<std::uint64_t, int>{{2'000'000, 112}});
    CHECK(network == std::map<std::uint64_t, int>{{1'000'000, 16}});
}

TEST_CASE("deepep on 8 nodes: half the network bytes of the direct all-to-all for 8 copies on 4 nodes") {
    // 64 GPUs, one 50 GB/s NIC each, NVLink 450 GB/s. Network-bound:
    // deepep sends 7 x S x 4 / (8 x 8) = 7 S / 16 a NIC, direct 56 S / 64 = 7 S / 8.
    const Topology t = eight_gpu_nodes(64);
    const Bytes s{64'000'000};
    const double deepep = simulate_collective(t, token_exchange(64, s, TokenRouting{8, 256, 8, 4}, "deepep")).seconds();
    const double direct = simulate_collective(t, token_exchange(64, s, TokenRouting{8, 256, 8, 4}, "direct")).seconds();
    CHECK(deepep == doctest::Approx(7.0 * 64e6 / 16 / 50e9).epsilon(0.02));
    CHECK(direct == doctest::Approx(7.0 * 64e6 / 8 / 50e9).epsilon(0.02));
}

TEST_CASE("auto takes deepep for a token exchange across nodes, never for a plain all-to-all") {
    const Topology t = eight_gpu_nodes(16);
    sim::Simulation sim;
    sim::net::FlowNetwork flows(sim, t);
    const sim::net::CollectiveEngine e(sim, flows, t);
    const Bytes s{16'000'000};
    CHECK(e.resolve(token_exchange(16, s, TokenRouting{8, 256, 0, 0})) == "deepep");
    CHECK(e.resolve(token_exchange(16, s, TokenRouting{})) == "direct");
    CHECK(e.resolve(token_exchange(8, s, TokenRouting{8, 256, 0, 0})) == "direct");  // one node: nothing to deduplicate
    CHECK_THROWS_WITH_AS(e.resolve(token_exchange(16, s, TokenRouting{}, "deepep")),
                         "algorithm 'deepep' runs only MoE token exchanges (dispatch and combine)", sim::ModelError);
}

TEST_SUITE_END();
