// The GPU catalog: one YAML file per GPU under topologies/gpus/, loaded by
// name. A user adds a GPU by adding a file; the schema (every field, its unit
// and which ones are optional) is in docs/hardware-model.md §1.
//
// A malformed or incomplete file is refused with a ConfigError naming
// file:line:column and the field ("gpus/x.yaml:3:1: peak: missing required
// field 'bf16'"); unknown keys are errors with "did you mean".
#pragma once

#include "sim/config/yaml_reader.h"
#include "sim/hw/gpu.h"

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace sim::config {

// Parses one GPU description (the root map of a GPU file).
hw::GpuSpec load_gpu(const Node& root);
// Loads a file; its `name` must equal the file name without .yaml.
hw::GpuSpec load_gpu_file(const std::string& path);

// data_dir() + "/topologies/gpus".
std::string default_gpu_dir();
// A bare name ("h100-sxm") becomes <default_gpu_dir()>/h100-sxm.yaml; a path
// (containing '/' or ending in .yaml/.yml) is returned unchanged.
std::string gpu_path(const std::string& name_or_path);

// Loads GPUs on first use and keeps them; safe to share between threads.
class GpuCatalog {
public:
    explicit GpuCatalog(std::string dir = default_gpu_dir());
    // The same, every GPU taking its attention shape constants from the
    // kernel file `attention_fit_path` (format of topologies/kernels/
    // flash-attention.yaml) instead of the shipped one; "" = the shipped one.
    // tools/fit-kernel-constants.py fits those constants with it.
    GpuCatalog(std::string dir, const std::string& attention_fit_path);

    // The GPU called `name_or_path` (a bare name is looked up in dir()).
    // Unknown names: ConfigError listing the available ones, with a
    // did-you-mean. The reference stays valid for the catalog's lifetime.
    const hw::GpuSpec& get(const std::string& name_or_path);
    // The same, with errors located at `name`, the node that named the GPU
    // (e.g. a topology file's `gpu: h100-sxm`).
    const hw::GpuSpec& get(const Node& name);

    // Names of the *.yaml files in dir(), sorted.
    std::vector<std::string> names() const;
    bool contains(const std::string& name) const;
    const std::string& dir() const { return dir_; }

private:
    std::string path_of(const std::string& name_or_path) const;
    std::string unknown_message(const std::string& name) const;

    std::string dir_;
    std::optional<hw::AttentionFit> attention_fit_;  // replaces each spec's (constructor)
    std::mutex mutex_;
    std::map<std::string, hw::GpuSpec> cache_;  // by resolved path
};

}  // namespace sim::config
