// NCCL-like parameters for the collectives and transfers a plan issues: the
// achievable fraction of link bandwidth, NCCL's three protocols (LL, LL128,
// Simple) with their bandwidth shares and per-step latencies, and the NVLS
// (in-switch) factors. The bandwidth fractions come from the GPU file
// (measured nccl-tests bus bandwidth over the link rate); the per-step
// latencies are NCCL's hardware latencies per link ([NCCL] tuning.cc,
// hardware.md §6) plus a per-protocol overhead fitted to nccl-tests
// measurements; every constant and its data are in comm_tuning.cpp and
// docs/validation.md §3.
#pragma once

#include "sim/hw/gpu.h"
#include "sim/net/cluster.h"
#include "sim/net/collective.h"

#include <vector>

namespace sim::exec {

struct CommTuning {
    double protocol_efficiency = 1.0;  // flows inside a node (Simple protocol, large messages)
    double network_efficiency = 1.0;   // flows between nodes
    Time step_latency{};               // the Simple protocol's, for requests without the protocol table
    double in_switch_efficiency = 1.0;
    Time in_switch_latency{};
    std::vector<net::Protocol> protocols;  // LL, LL128, Simple
};

CommTuning tuning_for(const hw::GpuSpec& gpu, const net::ClusterSpec& cluster);
// NCCL's per-step hardware latency of a link class under the LL protocol
// ([NCCL] tuning.cc hwLat): what the shipped cluster files give their links,
// and what a cluster built without one (validate's) uses.
Time nccl_link_latency(net::LinkClass cls);
// A request with the tuning filled in; the caller sets op, gpus, size, algorithm.
net::CollectiveRequest make_request(const hw::GpuSpec& gpu, const net::ClusterSpec& cluster);

}  // namespace sim::exec
