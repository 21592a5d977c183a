// Cluster files (topologies/<name>.yaml) -> sim::net::ClusterSpec.
//
// Schema (every quantity carries its unit; bandwidths are per direction):
//   name: dgx-h100-x2
//   gpu: h100-sxm                 # catalog name, topologies/gpus/<gpu>.yaml
//   nodes: 2                      # or `auto`: as many as the GPU count needs
//   gpus_per_node: 8
//   intra_node: nvswitch          # nvswitch | nvlink-mesh | nvlink-pairs | pcie
//   in_switch_reduction: true     # optional, default false (NVLink SHARP)
//   pcie_switches_per_node: 4     # optional, default 1
//   inter_node: fat-tree          # none | single-switch | fat-tree
//   nics_per_node: 8              # required unless inter_node is none
//   leaf_switch_ports: 64         # optional, default 64; fat-tree only
//   links:                        # classes nvlink | pcie | network
//     nvlink:  {bandwidth: 450 GB/s, latency: 1 us}
//     pcie:    {bandwidth: 63 GB/s, latency: 1 us}
//     network: {bandwidth: 400 Gb/s, latency: 2 us}
//
// Unknown keys, missing fields, bad enum values, bare numbers where a unit is
// due and contradictions between fields are ConfigErrors naming file:line:column.
#pragma once

#include "sim/config/yaml_reader.h"
#include "sim/net/cluster.h"

#include <string>

namespace sim::config {

// The most GPUs a cluster may hold (nodes x gpus_per_node) and a scenario may
// use: every count and index of GPUs then fits an int, and products of
// parallel degrees that must equal it are checked against it.
constexpr int kMaxGpus = 1 << 20;

// Reads a parsed cluster map (the whole file, or a `cluster:` map inline in a scenario).
net::ClusterSpec load_cluster(const Node& node);

// Loads a cluster file; a bare name is resolved with cluster_path().
net::ClusterSpec load_cluster_file(const std::string& path);

// "dgx-h100" -> data_dir() + "/topologies/dgx-h100.yaml"; anything with a
// '/' or a .yaml/.yml suffix is returned unchanged.
std::string cluster_path(const std::string& name_or_path);

}  // namespace sim::config
