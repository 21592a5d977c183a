// A harness for executor tests: a cost model in which every kernel is
// compute-bound and takes its `flops` in microseconds (no memory time, no
// launch overhead), or, when it reads bytes, memory-bound and takes its
// `bytes_read` in microseconds, so what the executor adds (host issue,
// interference) shows exactly; a helper that appends such a kernel to a plan; and a run of
// a plan on H100s of a DGX H100 node.
#pragma once

#include "sim/config/cluster_loader.h"
#include "sim/config/gpu_loader.h"
#include "sim/exec/executor.h"
#include "sim/hw/cost_model.h"
#include "sim/net/topology.h"
#include "sim/parallel/plan.h"

#include <algorithm>
#include <vector>

namespace parasim_test {

class FixedCost final : public sim::hw::CostModel {
public:
    std::string name() const override { return "fixed"; }
    sim::hw::KernelCost cost(const sim::hw::GpuSpec&, const sim::hw::KernelDesc& k,
                             const sim::hw::L2Residency&) const override {
        sim::hw::KernelCost c;
        c.compute_time = sim::Time::ps(static_cast<std::uint64_t>(k.flops.value) * 1'000'000);
        c.memory_time = sim::Time::ps(k.bytes_read.value * 1'000'000);
        c.duration = std::max(c.compute_time, c.memory_time);
        return c;
    }
};

// A plan of `gpus` simulated GPUs (real ids 0..gpus-1) and no tasks yet.
inline sim::parallel::Plan empty_plan(std::uint32_t gpus) {
    sim::parallel::Plan plan;
    for (std::uint32_t g = 0; g < gpus; ++g) plan.simulated_gpus.push_back(static_cast<int>(g));
    plan.streams.resize(gpus);
    plan.gpus_represented = static_cast<int>(gpus);
    return plan;
}

// A compute-bound descriptor of `us` microseconds at FixedCost.
inline sim::hw::KernelDesc kernel_desc_us(const std::string& name, double us) {
    sim::hw::KernelDesc k;
    k.name = name;
    k.flops = sim::Flops{us};
    return k;
}

// Appends kernel `k` on GPU 0's compute stream after `deps`.
inline std::uint32_t add_kernel(sim::parallel::Plan& plan, const sim::hw::KernelDesc& k,
                                const std::vector<std::uint32_t>& deps) {
    sim::parallel::Task t;
    t.kind = sim::parallel::TaskKind::kernel;
    t.stream = sim::parallel::StreamKind::compute;
    t.kernel = plan.add_kernel(k);
    return plan.add(t, deps);
}

// A compute-bound kernel of `us` microseconds.
inline std::uint32_t add_kernel_us(sim::parallel::Plan& plan, double us, const std::vector<std::uint32_t>& deps) {
    sim::hw::KernelDesc k;
    k.name = "k";
    k.flops = sim::Flops{us};
    return add_kernel(plan, k, deps);
}

// A memory-bound kernel of `us` microseconds (FixedCost reads bytes_read as microseconds).
inline std::uint32_t add_memory_kernel_us(sim::parallel::Plan& plan, std::uint64_t us,
                                          const std::vector<std::uint32_t>& deps) {
    sim::hw::KernelDesc k;
    k.name = "m";
    k.bytes_read = sim::Bytes{us};
    return add_kernel(plan, k, deps);
}

// Runs `plan` (its simulated GPUs the first of a DGX H100) at FixedCost.
inline sim::exec::ExecResult run_on_dgx_h100(const sim::parallel::Plan& plan, const sim::exec::ExecOptions& options) {
    const auto cluster = sim::config::load_cluster_file(sim::config::cluster_path("dgx-h100"));
    sim::config::GpuCatalog gpus;
    const sim::net::Topology topo(cluster, static_cast<int>(plan.simulated_gpus.size()));
    return sim::exec::execute(plan, gpus.get("h100-sxm"), topo, FixedCost{}, options);
}

inline sim::Time us(double v) { return sim::Time::from_seconds_ceil(v * 1e-6); }

}  // namespace parasim_test
