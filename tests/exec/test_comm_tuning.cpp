// The collective engine's choice of NCCL's algorithm and protocol by predicted
// time, and the shipped clusters' link latencies against NCCL's table
// (docs/network-model.md §5; sim/exec/comm_tuning).
#include "sim/config/calibration_loader.h"
#include "sim/config/cluster_loader.h"
#include "sim/config/gpu_loader.h"
#include "sim/core/simulation.h"
#include "sim/exec/comm_tuning.h"
#include "sim/net/collective.h"
#include "sim/net/flow_network.h"
#include "sim/net/topology.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

TEST_CASE("comm tuning: the collective engine picks NCCL's protocol and algorithm by predicted time") {
    sim::config::GpuCatalog gpus;
    const auto choice = [&](const char* cluster_name, int n, std::uint64_t bytes) {
        const auto c = sim::config::load_cluster_file(cluster_name);
        const sim::net::Topology topo(c, n);
        sim::Simulation sim;
        sim::net::FlowNetwork flows(sim, topo);
        const sim::net::CollectiveEngine e(sim, flows, topo);
        auto r = sim::exec::make_request(gpus.get(c.gpu), c, sim::config::collective_library());
        r.op = sim::net::CollectiveOp::all_reduce;
        for (int i = 0; i < n; ++i) r.gpus.push_back(i);
        r.size = sim::Bytes{bytes};
        const auto ch = e.choose(r);
        return ch.algorithm + "/" + ch.protocol;
    };
    CHECK(choice("dgx-a100", 8, 32768) == "ring/LL");
    CHECK(choice("dgx-a100", 8, 64ULL << 20) == "ring/LL128");
    CHECK(choice("dgx-a100", 8, 16ULL << 30) == "ring/Simple");
    CHECK(choice("dgx-h100", 8, 32768) == "ring/LL");
    CHECK(choice("dgx-h100", 8, 16ULL << 20) == "in-switch/Simple");  // NCCL: NVLS from 2 MiB on 8 x H200
    CHECK(choice("dgx-h100-x2", 16, 1ULL << 30).find("/Simple") != std::string::npos);
}

TEST_CASE("comm tuning: the shipped NVSwitch clusters' link latencies are NCCL's LL hardware latencies") {
    // The cluster files cite the same NCCL table that validate's clusters
    // take from the collective library's file (checked against its copies here).
    const auto& lib = sim::config::collective_library();
    for (const char* name : {"dgx-h100", "dgx-a100", "dgx-h100-pod", "dgx-h100-superpod"}) {
        CAPTURE(name);
        const auto c = sim::config::load_cluster_file(name);
        for (auto cls : {sim::net::LinkClass::nvlink, sim::net::LinkClass::pcie, sim::net::LinkClass::network})
            if (const auto* l = c.link(cls)) CHECK(l->latency == lib.link_latency(cls));
    }
    CHECK(lib.link_latency(sim::net::LinkClass::nvlink) == sim::Time::ns(600));
}

TEST_SUITE_END();
