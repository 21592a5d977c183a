// Software profiles: one YAML file per framework stack under
// topologies/software/ (docs/software-profiles.md), loaded by the stack's
// name (`software: {name: ...}` of a scenario or a validation point). A
// profile says what the stack costs the host per kernel it issues, how many
// launches may be pending, whether it fuses elementwise chains, and which
// overlaps it can do. Every value carries its evidence: `source:` (code,
// profiles, benchmarks) or `fitted_on:` (whole runs, tools/fit-profiles.py);
// the loader refuses a value with neither, and unknown keys, at
// file:line:column.
#pragma once

#include "sim/config/provenance.h"
#include "sim/config/yaml_reader.h"

#include <string>
#include <vector>

namespace sim::config {

struct SoftwareProfile {
    std::string name;         // file name without .yaml; "default" when a run names no stack
    std::string description;
    // CPU time the framework spends issuing one kernel (Python, dispatcher,
    // cudaLaunchKernel). The executor's host thread per GPU issues kernels in
    // compute-stream order at this cost; a kernel cannot start before it is
    // issued (docs/software-profiles.md). 0 = never host-bound.
    Time kernel_issue{};
    Provenance kernel_issue_from;
    // Kernels issued but not finished before a launch blocks the host.
    int launch_queue_depth = 1024;
    Provenance launch_queue_depth_from;
    // Fused elementwise chains (bias+GeLU, bias+dropout+add, ...), the
    // default of a scenario's workload.fuse_elementwise.
    bool fuse_elementwise = true;
    Provenance fuse_elementwise_from;
    // The GPU time of a kernel in this stack's whole runs relative to
    // parasim's kernel model (which kernel and collective benchmarks set):
    // each kernel's time past its launch overhead is divided by it. 1 = the
    // benchmarks' speed. Fitted on whole runs where a profile has them
    // (tools/fit-profiles.py): a residual for what the model leaves out
    // (sustained clocks, library choices, framework work on the GPU), not a
    // mechanism.
    double kernel_efficiency = 1.0;
    Provenance kernel_efficiency_from;
    // MoE token dispatch in FP8 when the workload's dtype is fp8 (DeepSeek-V3
    // report section 3.3, DeepEP): the dispatch all-to-all and the backward
    // one that feeds the experts carry 1 byte an element plus an FP32 scale
    // per 128 (docs/moe.md section 3b); combines stay BF16. Optional key,
    // default false.
    bool moe_fp8_dispatch = false;
    Provenance moe_fp8_dispatch_from;
    // Overlaps the stack can do (documentation: the run says which it used).
    std::vector<std::string> overlaps;
    Provenance overlaps_from;
};

// The name of the profile used when a run names no software stack.
inline constexpr const char* kDefaultSoftware = "default";

// Parses one profile (the root map of a file); `expected_name`, when not
// empty, must equal its `name`.
SoftwareProfile load_software_profile(const Node& root, const std::string& expected_name);
SoftwareProfile load_software_file(const std::string& path);

// PARASIM_DATA_DIR "/topologies/software".
std::string default_software_dir();
// The profile of stack `name` ("" = kDefaultSoftware) from `dir`
// (default_software_dir() when empty). A stack without a file is an error.
SoftwareProfile software_profile(const std::string& name, const std::string& dir = "");
// Names of the *.yaml files in `dir`, sorted.
std::vector<std::string> software_profile_names(const std::string& dir = "");

}  // namespace sim::config
