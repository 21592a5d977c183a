// Names of the cluster enums, as written in cluster files and reports.
#include "sim/net/cluster.h"

namespace sim::net {

const char* to_string(LinkClass c) {
    switch (c) {
        case LinkClass::nvlink: return "nvlink";
        case LinkClass::pcie: return "pcie";
        case LinkClass::network: return "network";
    }
    return "?";
}

const char* to_string(IntraNode k) {
    switch (k) {
        case IntraNode::nvswitch: return "nvswitch";
        case IntraNode::nvlink_mesh: return "nvlink-mesh";
        case IntraNode::nvlink_pairs: return "nvlink-pairs";
        case IntraNode::pcie: return "pcie";
    }
    return "?";
}

const char* to_string(InterNode k) {
    switch (k) {
        case InterNode::none: return "none";
        case InterNode::single_switch: return "single-switch";
        case InterNode::fat_tree: return "fat-tree";
        case InterNode::rail_optimized: return "rail-optimized";
    }
    return "?";
}

}  // namespace sim::net
