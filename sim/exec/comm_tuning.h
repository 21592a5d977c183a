// NCCL-like parameters for the collectives and transfers a plan issues: the
// achievable fraction of link bandwidth and the per-step latency. The
// bandwidth fractions come from the GPU file (measured nccl-tests bus
// bandwidth over the link rate); the latencies and the NVLS factors are
// NCCL's own tuning-model constants (hardware.md section 6, [NCCL] tuning.cc).
#pragma once

#include "sim/hw/gpu.h"
#include "sim/net/cluster.h"
#include "sim/net/collective.h"

namespace sim::exec {

struct CommTuning {
    double protocol_efficiency = 1.0;  // flows inside a node
    double network_efficiency = 1.0;   // flows between nodes
    Time step_latency{};
    double in_switch_efficiency = 1.0;
    Time in_switch_latency{};
};

CommTuning tuning_for(const hw::GpuSpec& gpu, const net::ClusterSpec& cluster);
// A request with the tuning filled in; the caller sets op, gpus, size, algorithm.
net::CollectiveRequest make_request(const hw::GpuSpec& gpu, const net::ClusterSpec& cluster);

}  // namespace sim::exec
