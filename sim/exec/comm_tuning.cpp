// Collective tuning: the GPU's NCCL bandwidth fractions combined with the
// collective library's protocol calibration. No constant lives here; the
// library file cites each value's data (docs/validation.md §3).
#include "sim/exec/comm_tuning.h"

#include <algorithm>

namespace sim::exec {

// Between nodes a transfer crosses PCIe to the NIC (GPUDirect RDMA). NCCL's
// topology gives that path the smaller of its PCIe link's figure (nccl_pcie of
// the PCIe rate: Gen5 x16 is 48 GB/s) and the NIC's line rate (400 Gb/s: 50
// GB/s), NVIDIA/nccl@5067397c src/graph/topo.cc. A flow drains at e x its
// physical bottleneck, min(PCIe, NIC), so e is NCCL's path rate over that:
// e = min(nccl_pcie x B_pcie, B_nic) / min(B_pcie, B_nic) (docs/network-model.md
// §6). Applying nccl_pcie to the NIC's rate instead counted the PCIe
// model's loss on a link that is not the bottleneck (0.76 x 50 GB/s).
double network_efficiency(const hw::GpuSpec& gpu, const net::ClusterSpec& cluster) {
    const net::LinkClassSpec* nic = cluster.link(net::LinkClass::network);
    const net::LinkClassSpec* pcie = cluster.link(net::LinkClass::pcie);
    const double e = gpu.efficiency.nccl_pcie;
    if (!nic || !pcie || nic->bandwidth.bytes_per_s <= 0.0 || pcie->bandwidth.bytes_per_s <= 0.0) return e;
    const double b_pcie = pcie->bandwidth.bytes_per_s, b_nic = nic->bandwidth.bytes_per_s;
    return std::min(e * b_pcie, b_nic) / std::min(b_pcie, b_nic);
}

CommTuning tuning_for(const hw::GpuSpec& gpu, const net::ClusterSpec& cluster, const net::CollectiveLibrary& lib) {
    CommTuning t;
    const bool nvlink = cluster.intra_node != net::IntraNode::pcie && gpu.efficiency.nccl_nvlink > 0;
    t.protocol_efficiency = nvlink ? gpu.efficiency.nccl_nvlink : gpu.efficiency.nccl_pcie;
    t.network_efficiency = network_efficiency(gpu, cluster);
    // A step inside a node costs the hardware latency of its link class
    // (NVLink, or PCIe where the GPUs talk over it) plus the protocol's overhead.
    const auto intra = static_cast<std::size_t>(nvlink ? net::LinkClass::nvlink : net::LinkClass::pcie);
    const auto network = static_cast<std::size_t>(net::LinkClass::network);
    for (const auto& p : lib.protocols) {
        net::Protocol proto;
        proto.name = p.name;
        proto.bandwidth_share = p.bandwidth_share;
        proto.step_latency = p.link_latency[intra] + p.step_overhead;
        proto.network_step_latency = p.link_latency[network] + p.step_overhead;
        proto.base_latency = p.base_latency;
        t.protocols.push_back(proto);
    }
    const net::ProtocolCalibration& simple = lib.simple();
    t.step_latency = simple.link_latency[intra] + simple.step_overhead;
    t.in_switch_efficiency = lib.in_switch_efficiency;
    t.in_switch_latency = lib.in_switch_latency;
    t.in_switch_channels = lib.in_switch_channels;
    t.in_switch_chunk = lib.in_switch_chunk;
    t.in_switch_fill = lib.in_switch_fill;
    return t;
}

net::CollectiveRequest make_request(const hw::GpuSpec& gpu, const net::ClusterSpec& cluster,
                                    const net::CollectiveLibrary& lib) {
    const CommTuning t = tuning_for(gpu, cluster, lib);
    const net::ProtocolCalibration& simple = lib.simple();
    net::CollectiveRequest r;
    r.protocol_efficiency = t.protocol_efficiency;
    r.network_efficiency = t.network_efficiency;
    r.step_latency = t.step_latency;
    r.network_step_latency =
        simple.link_latency[static_cast<std::size_t>(net::LinkClass::network)] + simple.step_overhead;
    r.in_switch_efficiency = t.in_switch_efficiency;
    r.in_switch_latency = t.in_switch_latency;
    r.in_switch_channels = t.in_switch_channels;
    r.in_switch_chunk = t.in_switch_chunk;
    r.in_switch_fill = t.in_switch_fill;
    r.protocols = t.protocols;
    return r;
}

}  // namespace sim::exec
