// Calibration files: fitted and sourced constants of the software parasim
// models, kept as data beside the GPU files.
//   topologies/collectives/<name>.yaml - a collective library (NCCL): its
//     protocols' bandwidth shares and latencies, NVLS, and what a running
//     collective takes from compute (net::CollectiveLibrary);
//   topologies/kernels/flash-attention.yaml - the shape factors of the
//     flash-attention cost (hw::AttentionFit), put into every GPU spec.
// Every number is {value, source | fitted_on} (provenance.h); unknown keys,
// missing evidence and implausible values are ConfigErrors at
// file:line:column. Schema: docs/hardware-model.md §5b.
#pragma once

#include "sim/config/yaml_reader.h"
#include "sim/hw/gpu.h"
#include "sim/net/collective_library.h"

#include <string>
#include <vector>

namespace sim::config {

// The library a run uses when it names none.
inline constexpr const char* kDefaultCollectiveLibrary = "nccl";

// Parses one library (the root map of a file); `expected_name`, when not
// empty, must equal its `name`.
net::CollectiveLibrary load_collective_library(const Node& root, const std::string& expected_name);
net::CollectiveLibrary load_collective_library_file(const std::string& path);
// data_dir() + "/topologies/collectives".
std::string default_collectives_dir();
// Names of the *.yaml files there, sorted.
std::vector<std::string> collective_library_names();
// The library `name` from default_collectives_dir(), loaded once and kept
// (thread-safe; the reference lives as long as the program). ConfigError
// when there is no such file.
const net::CollectiveLibrary& collective_library(const std::string& name = kDefaultCollectiveLibrary);

// Parses a flash-attention fit file.
hw::AttentionFit load_attention_fit(const Node& root);
// data_dir() + "/topologies/kernels/flash-attention.yaml".
std::string default_attention_fit_path();
// That file, loaded once and kept (thread-safe).
const hw::AttentionFit& attention_fit();

}  // namespace sim::config
