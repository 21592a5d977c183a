// A dataset point -> the simulation that stands for it, built from the same
// specs `parasim run` uses: a net::ClusterSpec generated from the point's
// `hardware:`, the GPU from the catalog, the model and workload, and a
// StrategySpec from `parallelism:` (whole runs, simulated by
// report::run_strategy); or the kernels of a kernel point (run as a one-task
// plan by exec::execute). A point that parasim cannot simulate gets a skip
// reason instead.
#pragma once

#include "sim/config/gpu_loader.h"
#include "sim/config/scenario.h"
#include "sim/hw/kernel.h"
#include "sim/validate/dataset.h"

#include <optional>
#include <string>
#include <vector>

namespace sim::validate {

// The shipped clusters (topologies/*.yaml), whose link figures the generated
// clusters copy; loaded once, read-only afterwards.
class ShippedClusters {
public:
    // Loads every cluster file of `dir` (default data_dir()/topologies), sorted by name.
    explicit ShippedClusters(const std::string& dir = "");
    const std::vector<net::ClusterSpec>& all() const { return clusters_; }

private:
    std::vector<net::ClusterSpec> clusters_;
};

struct Setup {
    std::optional<std::string> skip;      // why the point cannot be simulated
    std::vector<std::string> defaults;    // defaults applied (the loader's, then the translation's)
    std::string link_source;              // the shipped cluster whose link figures were used, or the GPU file
    config::ScenarioSpec scenario;        // cluster, GPU and GPU count (all kinds); model and workload (runs, serving)
    config::StrategySpec strategy;        // runs and serving only
    std::vector<hw::KernelDesc> kernels;  // gemm, attention, memory: run one after another on GPU 0
};

// The cluster a point's hardware describes. Link bandwidths and latencies
// come from the first shipped cluster (by name) with the same GPU and
// intra-node kind, else from the GPU file with NCCL's per-step latencies
// (docs/validation.md §2). Appends defaults it applied; sets `source`.
net::ClusterSpec make_cluster(const HardwareSpec& hardware, const std::string& intra_node, const hw::GpuSpec& gpu,
                              const ShippedClusters& shipped, std::string& source);

// `software_dir`: where the software profiles are ("" = the shipped ones).
Setup translate(const Point& point, config::GpuCatalog& gpus, const ShippedClusters& shipped,
                const std::string& software_dir = "");

// A whole-run point's setup as a scenario file that `parasim run` accepts
// and simulates identically (the cluster, model, workload and strategy
// written out in full), headed by a comment naming the point; a serving
// point's, with its serving block, for `parasim serve`.
std::string scenario_yaml(const Point& point, const Setup& setup);

}  // namespace sim::validate
