// Collective tuning constants (sources in comm_tuning.h and docs/network-model.md).
#include "sim/exec/comm_tuning.h"

namespace sim::exec {

CommTuning tuning_for(const hw::GpuSpec& gpu, const net::ClusterSpec& cluster) {
    CommTuning t;
    const bool nvlink = cluster.intra_node != net::IntraNode::pcie && gpu.efficiency.nccl_nvlink > 0;
    t.protocol_efficiency = nvlink ? gpu.efficiency.nccl_nvlink : gpu.efficiency.nccl_pcie;
    // Between nodes, data crosses PCIe to the NIC: NCCL's PCIe model applies.
    t.network_efficiency = gpu.efficiency.nccl_pcie;
    // NCCL per-step latency of the Simple protocol (bandwidth-bound sizes):
    // NVLink 3.4 us, PCIe 5.7 us ([NCCL] tuning.cc hwLat).
    t.step_latency = nvlink ? Time::ns(3400) : Time::ns(5700);
    // NVLS: efficiency 0.85 on Hopper and a 25 us base latency ([NCCL] tuning.cc).
    t.in_switch_efficiency = 0.85;
    t.in_switch_latency = Time::us(25);
    return t;
}

net::CollectiveRequest make_request(const hw::GpuSpec& gpu, const net::ClusterSpec& cluster) {
    const CommTuning t = tuning_for(gpu, cluster);
    net::CollectiveRequest r;
    r.protocol_efficiency = t.protocol_efficiency;
    r.network_efficiency = t.network_efficiency;
    r.step_latency = t.step_latency;
    r.in_switch_efficiency = t.in_switch_efficiency;
    r.in_switch_latency = t.in_switch_latency;
    return r;
}

}  // namespace sim::exec
