// Runs a Plan on the discrete-event engine: a task starts when its
// dependencies are done and it is at the head of its stream(s); kernels take
// the cost model's time given the L2 residency of their GPU at that moment;
// transfers and collectives become flows on the topology. Every interval is
// recorded per GPU and stream for the report and the trace.
#pragma once

#include "sim/hw/cost_model.h"
#include "sim/net/collective_library.h"
#include "sim/net/flow_network.h"
#include "sim/net/topology.h"
#include "sim/parallel/plan.h"

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace sim::exec {

enum class IntervalKind : std::uint8_t { compute_kernel, memory_kernel, communication, host };

struct Interval {
    Time start, end;
    std::uint32_t task;
    IntervalKind kind;
};

struct TimeBreakdown {
    // Seconds of the wall time. compute/memory: the compute stream runs a
    // compute-bound / memory-bound kernel (communication overlapped with it
    // counts here); communication: only communication runs (exposed);
    // idle: nothing runs (bubbles, waits, input stalls). They sum to the wall.
    double compute = 0, memory = 0, communication = 0, idle = 0;
};

struct GpuRecord {
    int real_gpu = 0;
    std::array<std::vector<Interval>, parallel::kStreamCount> intervals;
    double l2_requested_bytes = 0;  // bytes the kernels requested from L2
    double l2_hit_bytes = 0;        // of those, served by L2
    double hbm_bytes = 0;
    double flops = 0;
    TimeBreakdown breakdown;
};

// What one kernel task did, for metrics that weight phases differently.
struct KernelStats {
    float l2_requested_bytes = 0, l2_hit_bytes = 0, hbm_bytes = 0, flops = 0;
};

struct ExecResult {
    Time makespan;
    std::vector<Time> task_start, task_end;
    // What each task's kernel did: kernel_stats[kernel_stats_index[t]]. The
    // entries are distinct (one per kernel descriptor and L2 hits), entry 0
    // is zero (every non-kernel task): 4 bytes per task instead of 16, at
    // tens of millions of tasks.
    std::vector<std::uint32_t> kernel_stats_index;
    std::vector<KernelStats> kernel_stats;
    const KernelStats& kernel_stats_of(std::size_t task) const { return kernel_stats[kernel_stats_index[task]]; }
    // Per task: what its interval counts as (a kernel's bound, communication
    // or host); with the plan's stream order and the start and end times it
    // gives every GPU's intervals without storing them (breakdown_in below).
    std::vector<IntervalKind> task_kind;
    std::vector<GpuRecord> gpus;                     // per simulated GPU (intervals: see ExecOptions::record_intervals)
    std::array<double, 3> link_class_bytes{};        // nvlink, pcie, network
    std::array<double, 3> link_class_utilization{};  // average over links that carried traffic
    double max_link_load = 0;
    std::uint64_t events = 0;
    std::vector<net::ClassSample> link_samples;  // when ExecOptions::record_link_samples
};

struct ExecOptions {
    // The collective library's calibration (protocols, NVLS, interference;
    // topologies/collectives/<name>.yaml): the scenario's. Null: the default
    // library (config::collective_library()).
    const net::CollectiveLibrary* collectives = nullptr;
    // SMs a concurrently running collective takes from compute kernels (NCCL
    // runs one thread block per channel). Unset: the library's comm_sms.
    std::optional<int> comm_sms;
    // Record per-class link utilisation over time (for trace counters).
    bool record_link_samples = false;
    // Fill GpuRecord::intervals (for traces). They are derived after the run
    // from the plan's stream order, so a run that only needs metrics can
    // leave them out: 24 bytes per task stream entry.
    bool record_intervals = true;
    // The host thread of each GPU (the software profile's cost,
    // docs/software-profiles.md): it issues the compute stream's tasks in
    // stream order, each kernel taking host_kernel_issue of CPU time, and
    // blocks while launch_queue_depth kernels are issued but not finished; a
    // kernel starts no earlier than its issue ends. The host runs ahead of
    // the GPU, so this shows only where kernels are shorter than their issue.
    // It is CPU time; GpuSpec::efficiency.launch_overhead stays what the GPU
    // spends per kernel once it runs it, so neither counts the other. 0 (the
    // default, kernel and collective benchmarks) = never host-bound.
    Time host_kernel_issue{};
    int launch_queue_depth = 1024;  // 0: unbounded
    // The software profile's kernel_efficiency: a kernel's time past its
    // launch overhead is divided by it (1 = the kernel model as calibrated).
    double kernel_efficiency = 1.0;
};

// The breakdown of GPU `g`'s time within the window [from, to].
TimeBreakdown breakdown_in(const GpuRecord& g, Time from, Time to);
// The same from the plan's stream order of simulated GPU `local` and the
// result's per-task times and kinds (whether or not intervals were recorded);
// the same arithmetic, so the same numbers.
TimeBreakdown breakdown_in(const parallel::Plan& plan, const ExecResult& r, std::uint32_t local, Time from, Time to);

ExecResult execute(const parallel::Plan& plan, const hw::GpuSpec& gpu, const net::Topology& topo,
                   const hw::CostModel& cost_model, const ExecOptions& options = {});

}  // namespace sim::exec
