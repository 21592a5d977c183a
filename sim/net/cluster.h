// A cluster description as loaded from topologies/<name>.yaml: plain data.
// sim/net/topology builds the graph from it.
#pragma once

#include "sim/core/error.h"
#include "sim/core/units.h"

#include <array>
#include <optional>
#include <string>

namespace sim::net {

enum class LinkClass { nvlink = 0, pcie = 1, network = 2 };
inline constexpr std::size_t kLinkClassCount = 3;
const char* to_string(LinkClass c);

enum class IntraNode { nvswitch, nvlink_mesh, nvlink_pairs, pcie };
// fat_tree: two levels, NICs packed onto leaves in order. rail_optimized:
// NIC k of every node on rail k's leaves (docs/network-model.md, "Rails").
enum class InterNode { none, single_switch, fat_tree, rail_optimized };
// The spellings used in cluster files ("nvlink-mesh", "fat-tree", "rail-optimized").
const char* to_string(IntraNode k);
const char* to_string(InterNode k);

struct LinkClassSpec {
    Bandwidth bandwidth;  // per direction
    Time latency;
};

struct ClusterSpec {
    std::string name;
    std::string gpu;  // catalog name (topologies/gpus/<gpu>.yaml)
    int nodes = 1;    // 0 = auto: as many as the GPU count needs
    int gpus_per_node = 8;
    IntraNode intra_node = IntraNode::nvswitch;
    bool in_switch_reduction = false;
    int pcie_switches_per_node = 1;
    InterNode inter_node = InterNode::none;
    int nics_per_node = 0;
    int leaf_switch_ports = 64;
    // Leaf downlinks per uplink (1 = full bisection; 2 = 2:1). Two-level fabrics only.
    int spine_oversubscription = 1;
    // Rail-optimised fabrics: a transfer to a GPU on another rail first
    // crosses NVLink to the local GPU on the destination's rail and leaves
    // through that GPU's NIC (NCCL's PXN, on unless NCCL_PXN_DISABLE=1).
    bool pxn = true;
    // Independent network planes (two-level fabrics only): NIC k of every
    // node is on plane k mod planes, and each plane is a fat tree or a
    // rail-optimised fabric of its own, with its own leaves and spines; no
    // switch joins two planes, so traffic changes plane inside a node
    // (DeepSeek's multi-plane fat tree; docs/network-model.md §3b).
    int planes = 1;
    // Indexed by LinkClass; nullopt when the cluster has no link of that class.
    std::array<std::optional<LinkClassSpec>, kLinkClassCount> links{};
    SourceLocation where;  // for messages that point at the cluster file

    const LinkClassSpec* link(LinkClass c) const {
        const auto& l = links[static_cast<std::size_t>(c)];
        return l ? &*l : nullptr;
    }
};

}  // namespace sim::net
