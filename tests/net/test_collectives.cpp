// Collectives: closed-form times on ideal topologies, algorithm choice, and the
// nccl-tests bus bandwidths of the shipped clusters against measurements
// (hardware.md §5.3, §7.3).
#include "net_fixtures.h"

#include "sim/config/calibration_loader.h"
#include "sim/config/cluster_loader.h"
#include "sim/config/gpu_loader.h"
#include "sim/core/error.h"
#include "sim/core/simulation.h"
#include "sim/exec/comm_tuning.h"
#include "sim/net/collective.h"
#include "sim/net/collective/i_collective.h"

#include <doctest/doctest.h>

#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace net_fixtures;
using sim::Bytes;
using sim::Simulation;
using sim::net::bus_bandwidth;
using sim::net::CollectiveEngine;
using sim::net::CollectiveOp;
using sim::net::CollectiveRequest;
using sim::net::FlowNetwork;
using sim::net::simulate_collective;
using sim::net::Topology;

namespace {

constexpr std::uint64_t kGiB = 1ULL << 30;
constexpr std::uint64_t kMiB = 1ULL << 20;

Time times(int k, Time t) {
    Time out;
    for (int i = 0; i < k; ++i) out += t;
    return out;
}

// An all-reduce as the executor asks for it: the request it builds from the
// GPU file and the shipped collective library (exec::make_request), so the
// comparison below checks the calibration a run uses, not hand-set figures.
CollectiveRequest nccl_all_reduce(const sim::net::ClusterSpec& c, int n, std::uint64_t bytes, std::string algo) {
    static sim::config::GpuCatalog gpus;  // loads each GPU file once
    auto r = sim::exec::make_request(gpus.get(c.gpu), c, sim::config::collective_library());
    r.op = CollectiveOp::all_reduce;
    r.gpus = first_gpus(n);
    r.size = Bytes{bytes};
    r.algorithm = std::move(algo);
    return r;
}

// An engine on one DGX A100 node.
struct OneNode {
    Topology ta{sim::config::load_cluster_file("dgx-a100"), 8};
    Simulation sim;
    FlowNetwork net{sim, ta};
    CollectiveEngine e{sim, net, ta};
};

double busbw_gbps(const Topology& t, const CollectiveRequest& r) {
    return bus_bandwidth(r.op, r.size, static_cast<int>(r.gpus.size()), simulate_collective(t, r)) / 1e9;
}

}  // namespace

TEST_CASE("collective: ring all-reduce on an NVSwitch node takes 2(n-1)/n S/B + 2(n-1)(step + route latency)") {
    const int n = 8;
    const Topology t(nvswitch_node(n, gbps(450), Time::ns(600)), n);
    auto r = request(CollectiveOp::all_reduce, first_gpus(n), Bytes{3'600'000}, "ring");  // 450 kB chunks: 1 us each
    r.step_latency = Time::us(2);
    const Time got = simulate_collective(t, r);
    const Time step = r.step_latency + t.route_latency(0, 1) + sim::transfer_time(Bytes{450'000}, gbps(450));
    CHECK(got == times(2 * (n - 1), step));
    CHECK(got == Time::ns(14 * (2000 + 1200 + 1000)));
    // With a protocol efficiency the data term scales by 1/e.
    r.protocol_efficiency = 0.5;
    CHECK(simulate_collective(t, r) == Time::ns(14 * (2000 + 1200 + 2000)));
}

TEST_CASE("collective: ring reduce-scatter and all-gather take n-1 steps") {
    const int n = 4;
    const Topology t(nvswitch_node(n, gbps(100), Time::us(1)), n);
    for (auto op : {CollectiveOp::reduce_scatter, CollectiveOp::all_gather}) {
        auto r = request(op, first_gpus(n), Bytes{4'000'000}, "ring");
        r.step_latency = Time::us(3);
        CHECK(simulate_collective(t, r) == times(n - 1, Time::us(3 + 2 + 10)));
    }
}

TEST_CASE("collective: all-to-all, broadcast, send-recv and tree have their closed forms") {
    const int n = 4;
    const Topology t(nvswitch_node(n, gbps(100), Time::us(1)), n);
    const Time step = Time::us(3);
    {  // every uplink carries n-1 flows of S/n: (n-1) S/n / B
        auto r = request(CollectiveOp::all_to_all, first_gpus(n), Bytes{4'000'000});
        r.step_latency = step;
        CHECK(simulate_collective(t, r) == step + Time::us(2) + Time::us(30));
    }
    {  // pipelined chain: n-1 fill latencies, every hop carries S at once
        auto r = request(CollectiveOp::broadcast, first_gpus(n), Bytes{1'000'000});
        r.step_latency = step;
        CHECK(simulate_collective(t, r) == times(n - 1, step) + Time::us(2) + Time::us(10));
    }
    {
        auto r = request(CollectiveOp::send_recv, {2, 0}, Bytes{1'000'000});
        r.step_latency = step;
        CHECK(simulate_collective(t, r) == step + Time::us(2) + Time::us(10));
    }
    {  // 2 ranks, double binary tree: each direction carries S/2 of each tree -> S / B
        auto r = request(CollectiveOp::all_reduce, {0, 1}, Bytes{1'000'000}, "tree");
        r.step_latency = step;
        CHECK(simulate_collective(t, r) == times(2, step) + Time::us(2) + Time::us(10));
    }
    {  // 8 ranks: completes, and is no faster than the bandwidth-optimal ring
        const Topology t8(nvswitch_node(8, gbps(100), Time::us(1)), 8);
        const auto tree =
            simulate_collective(t8, request(CollectiveOp::all_reduce, first_gpus(8), Bytes{kGiB}, "tree"));
        const auto ring =
            simulate_collective(t8, request(CollectiveOp::all_reduce, first_gpus(8), Bytes{kGiB}, "ring"));
        CHECK(tree >= ring);
        CHECK(tree.seconds() < 2.0 * ring.seconds());
    }
}

namespace {

// 8 ranks on one NVSwitch node with in-switch reduction (450 GB/s, 0.6 us links), and an in-switch
// all-reduce of 8 MB over them at 0.8 x 0.5 of the link rate, paying 25 us.
struct InSwitchNode {
    Topology t{[] {
                   auto spec = nvswitch_node(8, gbps(450), Time::ns(600));
                   spec.in_switch_reduction = true;
                   return spec;
               }(),
               8};
    CollectiveRequest r = [] {
        auto q = request(CollectiveOp::all_reduce, first_gpus(8), Bytes{8'000'000}, "in-switch");
        q.in_switch_latency = Time::us(25);
        q.protocol_efficiency = 0.8;
        q.in_switch_efficiency = 0.5;
        return q;
    }();
};

}  // namespace

TEST_CASE("collective: in-switch all-reduce moves (n+1)/n S each way per rank in one step") {
    InSwitchNode node;
    const Topology& t = node.t;
    const CollectiveRequest& r = node.r;
    // 9 MB per direction at 0.4 x 450 GB/s = 50 us; one link latency each way, concurrently.
    CHECK(simulate_collective(t, r) == Time::us(25) + Time::ns(600) + Time::us(50));
}

TEST_CASE("collective: NVLS's chunk follows NCCL's rule (64, 8 and 2 rounds of every channel and rank)") {
    using sim::net::nvls_chunk;
    const Bytes max{128 * 1024};
    const std::uint64_t ops = 16 * 8;  // 16 channels x 8 ranks
    // 64 rounds of 128 ops x 128 KiB = 1 GiB: from there on the whole chunk, below it 64 KiB.
    CHECK(nvls_chunk(Bytes{kGiB}, ops, max) == Bytes{131072});
    CHECK(nvls_chunk(Bytes{kGiB - 1}, ops, max) == Bytes{65536});
    // 8 rounds x 128 x 64 KiB = 64 MiB; 2 rounds x 128 x 32 KiB = 8 MiB.
    CHECK(nvls_chunk(Bytes{64 * kMiB}, ops, max) == Bytes{65536});
    CHECK(nvls_chunk(Bytes{64 * kMiB - 1}, ops, max) == Bytes{32768});
    CHECK(nvls_chunk(Bytes{8 * kMiB}, ops, max) == Bytes{32768});
    CHECK(nvls_chunk(Bytes{8 * kMiB - 1}, ops, max) == Bytes{16384});
    CHECK(nvls_chunk(Bytes{1024}, ops, max) == Bytes{16384});
    // A smaller largest chunk is never raised, and never cut below 16 KiB by the rule.
    CHECK(nvls_chunk(Bytes{kGiB}, ops, Bytes{32768}) == Bytes{32768});
    CHECK(nvls_chunk(Bytes{1024}, ops, Bytes{8192}) == Bytes{8192});
    // A span past 64 bits is above any size: the smallest chunk.
    CHECK(nvls_chunk(Bytes{~0ULL}, 1ULL << 50, max) == Bytes{16384});
}

TEST_CASE("collective: in-switch all-reduce pays its pipeline's fill, rounds of one chunk per channel and rank") {
    InSwitchNode node;
    const Topology& t = node.t;
    CollectiveRequest& r = node.r;
    r.in_switch_channels = 16;
    r.in_switch_chunk = Bytes{128 * 1024};
    r.in_switch_fill = 2.5;
    // 8 MB < 8 MiB: 16 KiB chunks. A round moves 16 x 8 x 16384 x 9/8 = 2,359,296 B per rank at
    // 0.4 x 450 GB/s: 13.1072 us; 2.5 rounds 32.768 us, on top of 25 + 0.6 + 50 us.
    const Time expected = Time::us(25) + Time::ns(600) + Time::us(50) + Time::ns(32768);
    const Time got = simulate_collective(t, r);
    CHECK(got >= expected);
    CHECK(got.count_ps() - expected.count_ps() <= 1);  // the fill is rounded up to the picosecond
    // No channels: no fill (the library without a pipeline).
    r.in_switch_channels = 0;
    CHECK(simulate_collective(t, r) == Time::us(25) + Time::ns(600) + Time::us(50));
    // Four times the size (32 KiB chunks from 8 MiB): the fill doubles.
    r.in_switch_channels = 16;
    r.size = Bytes{32'000'000};
    const Time big = Time::us(25) + Time::ns(600) + Time::us(200) + Time::ns(65536);
    CHECK(simulate_collective(t, r).count_ps() - big.count_ps() <= 1);
    // A pipeline without a chunk is refused.
    r.in_switch_chunk = Bytes{};
    CHECK_THROWS_AS(simulate_collective(t, r), sim::ModelError);
}

TEST_CASE("collective: a 1-rank collective completes at once, through an event") {
    const Topology t(nvswitch_node(8, gbps(450), Time::ns(600)), 8);
    Simulation sim;
    FlowNetwork net(sim, t);
    CollectiveEngine engine(sim, net, t);
    bool done = false;
    engine.start(request(CollectiveOp::all_reduce, {3}, Bytes{kGiB}), [&done] { done = true; });
    CHECK_FALSE(done);
    sim.run();
    CHECK(done);
    CHECK(sim.now() == Time{});
}

TEST_CASE("collective: concurrent collectives share links; disjoint ones do not") {
    const Topology t(nvswitch_node(8, gbps(100), Time::us(1)), 8);
    const auto alone = simulate_collective(t, request(CollectiveOp::all_reduce, {0, 1, 2, 3}, Bytes{kGiB}, "ring"));
    Simulation sim;
    FlowNetwork net(sim, t);
    CollectiveEngine engine(sim, net, t);
    Time a, b, c;
    engine.start(request(CollectiveOp::all_reduce, {0, 1, 2, 3}, Bytes{kGiB}, "ring"), [&a, &sim] { a = sim.now(); });
    engine.start(request(CollectiveOp::all_reduce, {4, 5, 6, 7}, Bytes{kGiB}, "ring"), [&b, &sim] { b = sim.now(); });
    engine.start(request(CollectiveOp::all_reduce, {3, 2, 1, 0}, Bytes{kGiB}, "ring"), [&c, &sim] { c = sim.now(); });
    CHECK(engine.active() == 3);
    sim.run();
    CHECK(b == alone);
    CHECK(a.seconds() == doctest::Approx(2.0 * alone.seconds()).epsilon(0.01));
    CHECK(engine.active() == 0);
    CHECK(net.max_link_load() <= 1.0 + 1e-9);
}

TEST_CASE("collective: auto chooses like NCCL") {
    const auto h100 = sim::config::load_cluster_file("dgx-h100");
    const auto a100 = sim::config::load_cluster_file("dgx-a100");
    const auto x2 = sim::config::load_cluster_file("dgx-h100-x2");
    const Topology th(h100, 8), ta(a100, 8), tx(x2, 16);
    Simulation sim;
    FlowNetwork nh(sim, th), na(sim, ta), nx(sim, tx);
    CollectiveEngine eh(sim, nh, th), ea(sim, na, ta), ex(sim, nx, tx);
    const Bytes s{kMiB};
    CHECK(eh.resolve(request(CollectiveOp::all_reduce, first_gpus(8), s)) == "in-switch");
    CHECK(eh.resolve(request(CollectiveOp::all_reduce, first_gpus(5), s)) == "in-switch");
    CHECK(eh.resolve(request(CollectiveOp::all_reduce, first_gpus(4), s)) == "ring");
    CHECK(ea.resolve(request(CollectiveOp::all_reduce, first_gpus(8), s)) == "ring");
    CHECK(ex.resolve(request(CollectiveOp::all_reduce, first_gpus(16), s)) == "hierarchical");
    CHECK(ex.resolve(request(CollectiveOp::all_reduce, {0, 1, 2, 8}, s)) == "ring");  // uneven: 3 + 1
    CHECK(ex.resolve(request(CollectiveOp::reduce_scatter, first_gpus(16), s)) == "ring");
    CHECK(ex.resolve(request(CollectiveOp::all_to_all, first_gpus(16), s)) == "direct");
    CHECK(ex.resolve(request(CollectiveOp::send_recv, {0, 9}, s)) == "direct");
}

TEST_CASE("collective: impossible requests are ModelErrors that say why") {
    const Topology ta(sim::config::load_cluster_file("dgx-a100"), 8);
    Simulation sim;
    FlowNetwork net(sim, ta);
    CollectiveEngine e(sim, net, ta);
    const Bytes s{kMiB};
    CHECK_THROWS_WITH_AS(e.start(request(CollectiveOp::all_reduce, first_gpus(8), s, "ring2"), [] {}),
                         doctest::Contains("unknown collective algorithm 'ring2'"), sim::ModelError);
    CHECK_THROWS_WITH_AS(e.start(request(CollectiveOp::all_reduce, first_gpus(8), s, "in-switch"), [] {}),
                         doctest::Contains("no in-switch reduction"), sim::ModelError);
    CHECK_THROWS_WITH_AS(e.start(request(CollectiveOp::all_to_all, first_gpus(8), s, "ring"), [] {}),
                         doctest::Contains("does not implement all-to-all"), sim::ModelError);
    CHECK_THROWS_AS(e.start(request(CollectiveOp::all_reduce, {0, 1, 1}, s), [] {}), sim::ModelError);
    CHECK_THROWS_AS(e.start(request(CollectiveOp::all_reduce, {0, 8}, s), [] {}), sim::ModelError);
    CHECK_THROWS_AS(e.start(request(CollectiveOp::send_recv, {0, 1, 2}, s), [] {}), sim::ModelError);
    CHECK_THROWS_AS(e.start(request(CollectiveOp::all_reduce, {}, s), [] {}), sim::ModelError);
}

TEST_CASE("collective: a request the choice memo knows is still refused when it is bad") {
    // choose() looks a request up in its memo before resolving it; a hit
    // must give the first answer and still refuse what resolve() refuses.
    OneNode n;
    CollectiveEngine& e = n.e;
    auto r = request(CollectiveOp::all_reduce, first_gpus(8), Bytes{kMiB});
    r.protocols = {sim::net::Protocol{"LL", 0.25, Time::us(1), Time{}, Time{}},
                   sim::net::Protocol{"Simple", 1.0, Time::us(5), Time{}, Time::us(10)}};
    const auto a = e.choose(r), b = e.choose(r);
    CHECK(!a.algorithm.empty());
    CHECK(b.algorithm == a.algorithm);
    CHECK(b.protocol == a.protocol);
    CHECK(b.predicted == a.predicted);
    // Same key, efficiency out of (0, 1]: not in the key, checked on a hit.
    r.protocol_efficiency = 1.5;
    CHECK_THROWS_WITH_AS(e.choose(r), doctest::Contains("efficiencies must be in (0, 1]"), sim::ModelError);
    r.protocol_efficiency = 1.0;
    r.network_efficiency = -1.0;
    CHECK_THROWS_AS(e.choose(r), sim::ModelError);
    r.network_efficiency = 0.0;
    // A group with a repeated GPU is another key: resolved, and refused.
    r.gpus = {0, 1, 1};
    CHECK_THROWS_AS(e.choose(r), sim::ModelError);
}

TEST_CASE("collective: a start that finds a shared plan runs as a fresh engine's; other fields plan anew") {
    // Plans of algorithms that do not reuse steps are kept per request and
    // found again through the choice memo, which compares the planned
    // efficiencies and latencies (not in its key) before reusing one.
    OneNode n;
    const Topology& ta = n.ta;
    Simulation& sim = n.sim;
    auto r = request(CollectiveOp::all_reduce, first_gpus(8), Bytes{kMiB});
    r.algorithm = "ring";
    r.protocols = {sim::net::Protocol{"Simple", 1.0, Time::us(5), Time{}, Time::us(10)}};
    const auto on_engine = [&](const CollectiveRequest& q) {
        const Time from = sim.now();
        bool done = false;
        n.e.start(q, [&done] { done = true; });
        sim.run();
        REQUIRE(done);
        return sim.now() - from;
    };
    const Time fresh = simulate_collective(ta, r);
    CHECK(on_engine(r) == fresh);
    CHECK(on_engine(r) == fresh);  // the shared plan
    auto slower = r;
    slower.protocol_efficiency = 0.5;
    const Time fresh_slower = simulate_collective(ta, slower);
    CHECK(fresh_slower > fresh);
    CHECK(on_engine(slower) == fresh_slower);
    auto later = r;
    later.protocols[0].step_latency = Time::us(50);
    const Time fresh_later = simulate_collective(ta, later);
    CHECK(fresh_later > fresh);
    CHECK(on_engine(later) == fresh_later);
    CHECK(on_engine(r) == fresh);
}

TEST_CASE("collective: nccl-tests busbw of the shipped clusters is within 15% of the measurements" *
          doctest::test_suite("fit")) {
    const auto h100 = sim::config::load_cluster_file("dgx-h100");
    const auto a100 = sim::config::load_cluster_file("dgx-a100");
    const Topology th(h100, 8), ta(a100, 8);

    const double h_ring = busbw_gbps(th, nccl_all_reduce(h100, 8, kGiB, "ring"));
    const double h_nvls = busbw_gbps(th, nccl_all_reduce(h100, 8, kGiB, "auto"));
    const double a_ring = busbw_gbps(ta, nccl_all_reduce(a100, 8, kGiB, "auto"));
    MESSAGE("busbw 1 GiB: H100 ring ", h_ring, " GB/s, H100 NVLS ", h_nvls, " GB/s, A100 ring ", a_ring, " GB/s");
    CHECK(h_ring == doctest::Approx(367.4).epsilon(0.15));  // 8xH200 ring, NVLS off [STAS-NET]
    CHECK(h_nvls == doctest::Approx(480.0).epsilon(0.15));  // 8xH200 / 8xH100 NVLS [STAS-NET][AZ-H100]
    CHECK(a_ring == doctest::Approx(231.6).epsilon(0.15));  // 8xA100 [AZ-A100]
    CHECK(h_nvls > h_ring);

    // Small messages are latency-bound: busbw at 1 MiB is far below 1 GiB.
    const double h_small = busbw_gbps(th, nccl_all_reduce(h100, 8, kMiB, "ring"));
    const double h_small_nvls = busbw_gbps(th, nccl_all_reduce(h100, 8, kMiB, "auto"));
    MESSAGE("busbw 1 MiB: H100 ring ", h_small, " GB/s, NVLS ", h_small_nvls, " GB/s");
    CHECK(h_small < 0.25 * h_ring);
    CHECK(h_small_nvls < 0.25 * h_nvls);
}

TEST_CASE("collective: two H100 PCIe over their NVLink bridge: a 2-rank all-reduce is 2 chunk steps at e x 300 GB/s") {
    // The shipped bridge (topologies/gpus/h100-pcie.yaml: 12 NVLink 4 links,
    // 300 GB/s a direction; 12 links at 26.562 GB/s and 256.6-257.0 GB/s of
    // copy-engine P2P measured on such a pair, HPE-Japan-Presales/e-learning
    // @80cd5bf2 gpu/h100/mgmt_gpu_on_dl380agen11.md). With 2 ranks a ring
    // all-reduce is 2 steps of S/2 over the one bridge link, each way at once.
    // S = 492 MB makes a chunk 246 MB, 1 ms at 0.82 x 300 GB/s. NCCL's Simple
    // protocol wins at this size: per step 3.4 + 8.6 us (hwLat NVLink + fitted
    // overhead) + the 0.6 us link, plus 8.4 us of base latency once:
    // 8.4 + 2 x (12.0 + 0.6 + 1000) = 2033.6 us.
    const auto c = sim::config::load_cluster_file("pcie-h100-x8-nvlink-pairs");
    const Topology t(c, 2);
    REQUIRE(t.route(0, 1).size() == 1);
    CHECK(t.route_bandwidth(0, 1).bytes_per_s == doctest::Approx(300e9));
    const auto r = nccl_all_reduce(c, 2, 492'000'000, "ring");
    CHECK(r.protocol_efficiency == doctest::Approx(0.82));
    const Time got = simulate_collective(t, r);
    CHECK(got.count_ps() >= Time::ns(2'033'600).count_ps());
    CHECK(got.count_ps() <= Time::ns(2'033'600).count_ps() + 2);  // rounded up to whole ps per step
    // busbw = algbw with 2 ranks: 241.9 GB/s, below the copy engines' 256.8 on
    // the same bridge and 2% under NCCL's own link model (12 x 20.6 GB/s,
    // NVIDIA/nccl@5067397c src/graph/topo.h); NVIDIA/nccl#1161's 116 GB/s on
    // such a pair is not this bridge's rate (docs/validation.md §7).
    const double busbw = bus_bandwidth(r.op, r.size, 2, got) / 1e9;
    CHECK(busbw == doctest::Approx(241.94).epsilon(0.001));
    CHECK(busbw < 256.6);
}

TEST_CASE("collective: across two DGX H100 the ring and the hierarchical all-reduce both use all 8 rails") {
    const auto x2 = sim::config::load_cluster_file("dgx-h100-x2");
    const Topology t(x2, 16);
    auto r = nccl_all_reduce(x2, 16, kGiB, "hierarchical");
    const double hier = busbw_gbps(t, r);
    r.algorithm = "ring";
    const double ring = busbw_gbps(t, r);
    MESSAGE("busbw 1 GiB on 2 x DGX H100: hierarchical ", hier, " GB/s, ring ", ring, " GB/s");
    // One ring through one 50 GB/s NIC would stay under 0.82 x 50 GB/s; NCCL
    // runs one ring per rail (channel), so each of the 8 NICs carries one.
    CHECK(ring > 4.0 * 0.82 * 50.0);
    CHECK(hier > 4.0 * 0.82 * 50.0);
}

TEST_CASE("collective: a ring over several nodes runs one ring per rail, each leaving a node from its own GPU") {
    const auto x2 = sim::config::load_cluster_file("dgx-h100-x2");
    const Topology t(x2, 16);
    Simulation sim;
    FlowNetwork net(sim, t);
    CollectiveEngine e(sim, net, t);
    auto r = nccl_all_reduce(x2, 16, 64 * kMiB, "ring");
    r.op = CollectiveOp::all_gather;
    e.start(r, [] {});
    sim.run();
    // 15 steps, 8 rings, chunks of S / (16 x 8): each of the 16 NICs sends
    // one ring's crossing, 15/16 x S / 8, counted on its NIC->switch link and
    // on the receiver's switch->NIC link.
    const double per_nic = 15.0 / 16.0 * static_cast<double>(64 * kMiB) / 8.0;
    CHECK(net.class_bytes(LinkClass::network) == doctest::Approx(2.0 * 16.0 * per_nic).epsilon(1e-3));
}

TEST_CASE("collective: hierarchical all-reduce over 256 GPUs of a fat tree sends each rail's shard across nodes") {
    const Topology t(sim::config::load_cluster_file("dgx-h100-pod"), 256);
    auto r = request(CollectiveOp::all_reduce, first_gpus(256), Bytes{64 * kMiB});
    r.protocol_efficiency = 0.82;
    r.step_latency = Time::ns(3400);
    Simulation sim;
    FlowNetwork net(sim, t);
    CollectiveEngine e(sim, net, t);
    CHECK(e.resolve(r) == "hierarchical");
    bool done = false;
    e.start(r, [&done] { done = true; });
    sim.run();
    CHECK(done);
    CHECK(net.max_link_load() <= 1.0 + 1e-9);
    // 32 nodes of 8: the node's 64 MiB is reduce-scattered over NVLink, then
    // each GPU all-reduces its 8 MiB shard with its rail's 31 peers, a ring
    // that sends 2 x 31/32 x 8 MiB a GPU, 2 x 31 x 64 MiB from all 256. Each
    // byte crosses its NIC's uplink and the receiver's downlink, and at most
    // a leaf-spine-leaf detour besides: 2 to 4 network links. A plan that
    // skipped the inter-node phase (0) or sent whole buffers (8x) fails.
    const double per_direction = 2.0 * 31.0 * static_cast<double>(64 * kMiB);
    MESSAGE("network bytes ", net.class_bytes(LinkClass::network), " = ",
            net.class_bytes(LinkClass::network) / per_direction, " x the per-direction volume");
    CHECK(net.class_bytes(LinkClass::network) >= 2.0 * per_direction * (1 - 1e-9));
    CHECK(net.class_bytes(LinkClass::network) <= 4.0 * per_direction * (1 + 1e-9));
}

TEST_CASE("collective: a ring across nodes pays the network step latency only on the hops that leave a node") {
    // NCCL's ring latency (NVIDIA/nccl@5067397c src/graph/tuning.cc): of n-1
    // steps per pass, nodes-1 cross the network. 3 nodes x 2 GPUs, inside
    // 1 us, across 10 us: an all-gather's 5 steps carry 2 crossings, a mean
    // of 1 + 9 x 2/5 = 4.6 us; an all-reduce's 10 steps 4 crossings, the
    // same mean; with one GPU per node every hop crosses: 10 us.
    const Topology t(pcie_nodes(3, 2, gbps(32), gbps(50), Time::ns(500)), 6);
    const auto step_of = [&](CollectiveOp op, std::vector<int> gpus) {
        auto r = request(op, std::move(gpus), Bytes{6 * kMiB}, "ring");
        r.step_latency = Time::us(1);
        r.network_step_latency = Time::us(10);
        sim::net::CollectivePlan plan;
        sim::net::PlanBuilder b(t, r, plan);
        sim::net::find_collective_algorithm("ring")->plan(b);
        REQUIRE(plan.phases.size() == 1);
        return plan.phases[0].latency;
    };
    CHECK(step_of(CollectiveOp::all_gather, first_gpus(6)) == Time::ns(4600));
    CHECK(step_of(CollectiveOp::all_reduce, first_gpus(6)) == Time::ns(4600));
    CHECK(step_of(CollectiveOp::all_gather, {0, 2, 4}) == Time::us(10));
    CHECK(step_of(CollectiveOp::all_gather, {0, 1}) == Time::us(1));
}

TEST_CASE("collective: a step between nodes pays the network step latency, not the route's link latencies on top") {
    // NCCL's per-step latency between nodes (hwLat NET, NVIDIA/nccl@5067397c
    // src/graph/tuning.cc) is GPU to GPU: it holds the wire. 2 nodes x 1 GPU,
    // links of 0.5 us, the route GPU -> PCIe switch -> NIC -> switch -> NIC ->
    // PCIe switch -> GPU six links (3 us). Ring all-reduce of 2 MB: 2 steps of
    // 1 MB at the network's 25 GB/s (40 us). With the library's network step
    // latency (10 us) a step is 10 + 40 us; without one (an ideal library)
    // the route latency is all there is of the wire and stays: 1 + 3 + 40 us.
    const Topology t(pcie_nodes(2, 1, gbps(50), gbps(25), Time::ns(500)), 2);
    REQUIRE(t.route_latency(0, 1) == Time::us(3));
    auto r = request(CollectiveOp::all_reduce, first_gpus(2), Bytes{2'000'000}, "ring");
    r.step_latency = Time::us(1);
    r.network_step_latency = Time::us(10);
    CHECK(simulate_collective(t, r) == Time::us(2 * (10 + 40)));
    // The engine's estimate (its choice among algorithms) counts the same.
    Simulation sim;
    FlowNetwork net(sim, t);
    CollectiveEngine e(sim, net, t);
    r.protocols = {sim::net::Protocol{"Simple", 1.0, Time::us(1), Time::us(10), Time{}}};
    r.algorithm = "auto";
    const std::uint64_t predicted = e.choose(r).predicted.count_ps();  // rounded up from seconds
    CHECK(predicted >= Time::us(2 * (10 + 40)).count_ps());
    CHECK(predicted <= Time::us(2 * (10 + 40)).count_ps() + 1);
    r.protocols.clear();
    r.algorithm = "ring";
    r.network_step_latency = Time{};
    CHECK(simulate_collective(t, r) == Time::us(2 * (1 + 3 + 40)));
    // Inside a node nothing changes: an NVSwitch route's 2 x 0.6 us stays (the
    // first case of this file).
}

TEST_CASE("all-to-all across nodes: nccl-tests busbw is (n-1)/n x N/(N-1) x the NIC rate (NVIDIA/nccl-tests #130)") {
    // NCCL's maintainers: with one GPU a node the busbw is the NIC's rate; with N nodes of g GPUs
    // (one NIC each) the network carries (N-1)/N of a rank's S, so busbw -> N/(N-1) x NIC
    // (docs/moe.md section 3h). parasim's direct all-to-all, ideal library (e = 1, no step
    // latency), 50 GB/s NICs, S = 640 MB:
    const Bytes s{640'000'000};
    const auto busbw = [&](const Topology& t, int n) {
        const auto r = request(CollectiveOp::all_to_all, first_gpus(n), s, "direct");
        return bus_bandwidth(r.op, r.size, n, simulate_collective(t, r)) / 1e9;
    };
    // 2 nodes of 8: each NIC sends S / 2 = 320 MB in 6.4 ms; 15/16 x 640 MB / 6.4 ms = 93.75 GB/s.
    CHECK(busbw(eight_gpu_nodes(16), 16) == doctest::Approx(93.75).epsilon(0.01));
    // 8 nodes of 8: 7/8 S = 560 MB a NIC, 11.2 ms; 63/64 x 640 MB / 11.2 ms = 56.25 GB/s.
    CHECK(busbw(eight_gpu_nodes(64), 64) == doctest::Approx(56.25).epsilon(0.01));
    // 16 nodes of one GPU: 15/16 S a NIC; busbw = the NIC's 50 GB/s.
    CHECK(busbw(Topology(fat_tree(1, 1, 1, 64), 16), 16) == doctest::Approx(50.0).epsilon(0.01));
}

TEST_SUITE_END();
