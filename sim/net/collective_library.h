// The calibration of a collective library (NCCL): its protocols with their
// bandwidth shares and latencies, its in-switch (NVLS) factors, and what a
// running collective takes from the compute kernels beside it. Plain data,
// loaded from topologies/collectives/<name>.yaml by sim/config
// (calibration_loader.h), where every value carries its source or the data
// it was fitted on; nothing here holds a number of its own.
#pragma once

#include "sim/core/units.h"
#include "sim/net/cluster.h"

#include <array>
#include <string>
#include <vector>

namespace sim::net {

struct ProtocolCalibration {
    std::string name;              // LL | LL128 | Simple (NCCL's names)
    double bandwidth_share = 0.0;  // of the link rate Simple reaches, (0, 1]
    // The library's per-step hardware latency of a link, per LinkClass.
    std::array<Time, kLinkClassCount> link_latency{};
    Time step_overhead{};  // per step, on top of link_latency (fitted)
    Time base_latency{};   // once per collective
};

struct CollectiveLibrary {
    std::string name;  // the file name without .yaml
    std::string description;
    // In the file's order; the first is the lowest-latency protocol (its
    // link latency is what a cluster built without link figures uses), and
    // one is named "Simple" (in-switch reduction runs it only).
    std::vector<ProtocolCalibration> protocols;
    double in_switch_efficiency = 0.0;  // NVLS: of the protocol efficiency
    Time in_switch_latency{};           // NVLS: its single step
    // NVLS's pipeline (docs/network-model.md §5, "NVLS pipeline fill"): its
    // channels, its largest chunk, and the chunk rounds its fill costs.
    int in_switch_channels = 0;
    Bytes in_switch_chunk{};
    double in_switch_fill = 0.0;
    // Interference with compute (docs/hardware-model.md §5a): SMs a running
    // collective holds, and the share of its link's rate it streams through HBM.
    int comm_sms = 0;
    double comm_hbm_share = 0.0;

    // The first protocol's link latency of `cls`.
    Time link_latency(LinkClass cls) const { return protocols.front().link_latency[static_cast<std::size_t>(cls)]; }
    // The protocol named "Simple" (the loader guarantees one).
    const ProtocolCalibration& simple() const {
        for (const auto& p : protocols)
            if (p.name == "Simple") return p;
        return protocols.back();
    }
};

}  // namespace sim::net
