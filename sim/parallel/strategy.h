// Inside the plan builder: resolving a strategy against a scenario (the
// degrees, micro-batching and every refusal with its numbers), splitting the
// layers into (virtual) pipeline stages, and the memory of each stage. The
// task emission (emitter.h, builder.cpp, emit_training.cpp) builds on these.
#pragma once

#include "sim/parallel/builder.h"
#include "sim/workload/operators.h"

#include <optional>
#include <string>
#include <vector>

namespace sim::parallel {

// ConfigError at the strategy's location, naming it.
[[noreturn]] void refuse(const config::StrategySpec& spec, const std::string& why);
workload::OperatorOptions operator_options(const config::ScenarioSpec& sc, const ResolvedStrategy& rs);
// The resolved degrees, or (strategy empty) why the strategy cannot be
// formed, in the words `run` reports.
struct Resolution {
    std::optional<ResolvedStrategy> strategy;
    std::string why_not;
};
// tp/cp/pp/dp, schedule, overlaps and micro-batches, without throwing: the
// rules `run` enforces, which the plan search (sim/search/) also applies.
Resolution try_resolve_degrees(const config::ScenarioSpec& sc, const config::StrategySpec& spec);
// The same, refusing (ConfigError at the strategy) what cannot be formed.
ResolvedStrategy resolve_degrees(const config::ScenarioSpec& sc, const config::StrategySpec& spec);
// The layers of each virtual stage (vs = chunk x pp + stage), from the
// strategy's partitioner; fills rs.stage_layers (and the cache-aware fields).
std::vector<LayerRange> split_layers(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                                     ResolvedStrategy& rs, const hw::CostModel& cm);
// The summed duration of `ops` at the cost model, L2 cold (partitioners
// compare layers with it).
double ops_time(const std::vector<workload::Operator>& ops, const hw::GpuSpec& gpu, const hw::CostModel& cm);
// The pass shapes a micro-batch of `mb_size` sequences runs: prefill and a
// mid-generation decode step (inference), or a training pass.
struct Shapes {
    workload::PassShape prefill, decode_mid, train;
};
// The prefill shape is one sub-batch of prefill_sub_batch's size.
Shapes shapes_for(const config::ScenarioSpec& sc, std::int64_t mb_size);
// Inference: the sequences of a micro-batch of `mb_size` that one prefill
// pass takes, floor(T / max(1, prompt - 1)) clamped to [1, mb_size] for the
// profile's prefill_max_tokens T, or mb_size when T is 0
// (docs/software-profiles.md §2f).
std::int64_t prefill_sub_batch(const config::ScenarioSpec& sc, std::int64_t mb_size);
// Inference, the profile's decode_step (docs/software-profiles.md §2g): the
// time a decode step of `sequences` sequences leaves the GPU idle while its
// host waits, host_syncs x (sync_latency + kernel_issue) + sequences x
// copy_per_sequence / the GPU's PCIe rate; and the step's small kernels
// beside the model's (each reads and writes 4 bytes a sequence).
Time decode_step_host_time(const config::ScenarioSpec& sc, std::int64_t sequences);
std::vector<workload::Operator> decode_step_kernels(const config::ScenarioSpec& sc, std::int64_t sequences);
// Per-GPU memory of pipeline stage `s` (every TP rank of a stage is alike).
hw::MemoryBreakdown stage_memory(const config::ScenarioSpec& sc, const ResolvedStrategy& rs, int s,
                                 const std::vector<LayerRange>& vstages);

}  // namespace sim::parallel
