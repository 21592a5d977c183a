// Collective tuning constants. Each fitted value names its data: the
// nccl-tests points of ../shared/validation/published.yaml (kind:
// collective) and hardware.md §6-7. Whole training and inference runs are
// never used here (docs/validation.md §3).
#include "sim/exec/comm_tuning.h"

namespace sim::exec {

namespace {

// NCCL's per-step hardware latency of a ring step, by link class and
// protocol LL / LL128 / Simple, in ns ([NCCL] tuning.cc hwLat, hardware.md §6).
constexpr std::uint64_t kHwLatencyNvlink[3] = {600, 1900, 3400};
constexpr std::uint64_t kHwLatencyPcie[3] = {1000, 2500, 5700};
constexpr std::uint64_t kHwLatencyNetwork[3] = {2700, 4000, 14000};

// Per-step overhead on top of the hardware latency, per protocol, in ns:
// fitted (least mean absolute error of busbw) to the 8 x A100 nccl-tests
// all-reduce at 32 KiB, 1 MiB, 64 MiB, 256 MiB and 16 GiB, and the 8 x H200
// points (reduce-scatter 16 GiB; NVLS all-reduce 16 MiB, 256 MiB, 16 GiB)
// of published.yaml. With the route latency of an NVSwitch hop pair
// (2 x 0.6 us) the NVLink step costs 1.3 / 8.0 / 12.0 us + 1.2 us. The
// LL128 and Simple overheads stand for NCCL's chunk pipelining, which keeps
// mid-size messages (1-256 MiB) well below the large-message bus bandwidth
// (A100: 171.5 GB/s at 64 MiB, 194 at 256 MiB, 234.9 at 16 GiB). Mean
// absolute busbw error on those 9 points: 2.1% (the grid's optimum, Simple at
// 21.6 us, gives 1.7%; the less extreme value was kept).
constexpr std::uint64_t kStepOverhead[3] = {700, 6100, 8600};

// NCCL's base latency per collective (Ring: LL / LL128 / Simple), in ns
// ([NCCL] tuning.cc baseLat, hardware.md §6).
constexpr std::uint64_t kBaseLatency[3] = {6600, 14000, 8400};

// Bandwidth of each protocol relative to Simple. LL: fitted to the 8 x A100
// all-reduce at 32 KiB and 1 MiB (published.yaml: 43.7 us and 102 us, both
// LL in NCCL's choice), 0.13. LL128: its wire format, 120 payload bytes per
// 128-byte line ([NCCL] prims_ll128), 0.9375.
constexpr double kShare[3] = {0.13, 0.9375, 1.0};
constexpr const char* kNames[3] = {"LL", "LL128", "Simple"};

// NVLS (in-switch all-reduce): efficiency 0.85 on Hopper ([NCCL] tuning.cc,
// hardware.md §5.3; the 8 x H200 16 GiB point gives 0.84); fixed latency
// 60 us, fitted to the 8 x H200 NVLS all-reduce at 16 MiB (121 us) and
// 256 MiB (1062 us) of published.yaml (NCCL's own model constant is 25 us).
constexpr double kNvlsEfficiency = 0.85;
constexpr std::uint64_t kNvlsLatencyNs = 60000;

}  // namespace

Time nccl_link_latency(net::LinkClass cls) {
    switch (cls) {
        case net::LinkClass::nvlink: return Time::ns(kHwLatencyNvlink[0]);
        case net::LinkClass::pcie: return Time::ns(kHwLatencyPcie[0]);
        case net::LinkClass::network: return Time::ns(kHwLatencyNetwork[0]);
    }
    return Time::ns(kHwLatencyNetwork[0]);
}

CommTuning tuning_for(const hw::GpuSpec& gpu, const net::ClusterSpec& cluster) {
    CommTuning t;
    const bool nvlink = cluster.intra_node != net::IntraNode::pcie && gpu.efficiency.nccl_nvlink > 0;
    t.protocol_efficiency = nvlink ? gpu.efficiency.nccl_nvlink : gpu.efficiency.nccl_pcie;
    // Between nodes, data crosses PCIe to the NIC: NCCL's PCIe model applies.
    t.network_efficiency = gpu.efficiency.nccl_pcie;
    const auto* intra = nvlink ? kHwLatencyNvlink : kHwLatencyPcie;
    for (int p = 0; p < 3; ++p) {
        net::Protocol proto;
        proto.name = kNames[p];
        proto.bandwidth_share = kShare[p];
        proto.step_latency = Time::ns(intra[p] + kStepOverhead[p]);
        proto.network_step_latency = Time::ns(kHwLatencyNetwork[p] + kStepOverhead[p]);
        proto.base_latency = Time::ns(kBaseLatency[p]);
        t.protocols.push_back(proto);
    }
    t.step_latency = t.protocols.back().step_latency;
    t.in_switch_efficiency = kNvlsEfficiency;
    t.in_switch_latency = Time::ns(kNvlsLatencyNs);
    return t;
}

net::CollectiveRequest make_request(const hw::GpuSpec& gpu, const net::ClusterSpec& cluster) {
    const CommTuning t = tuning_for(gpu, cluster);
    net::CollectiveRequest r;
    r.protocol_efficiency = t.protocol_efficiency;
    r.network_efficiency = t.network_efficiency;
    r.step_latency = t.step_latency;
    r.network_step_latency = t.protocols.back().network_step_latency;
    r.in_switch_efficiency = t.in_switch_efficiency;
    r.in_switch_latency = t.in_switch_latency;
    r.protocols = t.protocols;
    return r;
}

}  // namespace sim::exec
