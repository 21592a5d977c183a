// NCCL-like parameters for the collectives and transfers a plan issues: the
// achievable fraction of link bandwidth, the library's protocols (NCCL: LL,
// LL128, Simple) with their bandwidth shares and per-step latencies, and the
// NVLS (in-switch) factors. The bandwidth fractions come from the GPU file
// (measured nccl-tests bus bandwidth over the link rate); the protocol
// latencies and shares from the collective library's file
// (topologies/collectives/<name>.yaml, each value with its source or the
// data it was fitted on; docs/validation.md §3). This file only combines them.
#pragma once

#include "sim/hw/gpu.h"
#include "sim/net/cluster.h"
#include "sim/net/collective.h"
#include "sim/net/collective_library.h"

#include <vector>

namespace sim::exec {

struct CommTuning {
    double protocol_efficiency = 1.0;  // flows inside a node (Simple protocol, large messages)
    double network_efficiency = 1.0;   // flows between nodes
    Time step_latency{};               // the Simple protocol's, for requests without the protocol table
    double in_switch_efficiency = 1.0;
    Time in_switch_latency{};
    int in_switch_channels = 0;  // NVLS's pipeline (the library's)
    Bytes in_switch_chunk{};
    double in_switch_fill = 0.0;
    std::vector<net::Protocol> protocols;  // the library's, in its order
};

// The efficiency of a flow between nodes: NCCL's rate for the GPU -> PCIe ->
// NIC path over the path's physical bottleneck (comm_tuning.cpp).
double network_efficiency(const hw::GpuSpec& gpu, const net::ClusterSpec& cluster);
CommTuning tuning_for(const hw::GpuSpec& gpu, const net::ClusterSpec& cluster, const net::CollectiveLibrary& lib);
// A request with the tuning filled in; the caller sets op, gpus, size, algorithm.
net::CollectiveRequest make_request(const hw::GpuSpec& gpu, const net::ClusterSpec& cluster,
                                    const net::CollectiveLibrary& lib);

}  // namespace sim::exec
