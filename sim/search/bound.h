// Lower bounds on a training iteration's simulated time and on an
// inference run's TTFT and TPOT, cheap enough to compute for every
// candidate of a plan search (docs/planning.md, "The bound, and why it
// never drops the best plan"). They count only work the simulation
// certainly does, each piece at a time the executor can never beat.
#pragma once

#include "sim/config/scenario.h"
#include "sim/hw/cost_model.h"
#include "sim/parallel/builder.h"

namespace sim::search {

// Seconds; 0 for inference (inference_lower_bound below).
// `vstages` are the layers of each virtual stage (parallel::split_layers).
double iteration_lower_bound(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                             const parallel::ResolvedStrategy& rs, const std::vector<parallel::LayerRange>& vstages,
                             const hw::CostModel& cm);

// Inference (mode: inference; not serving runs): lower bounds, in seconds,
// on the time to first token and on the decode period (TPOT) that
// report::RunMetrics reports; zeros otherwise. tpot_s is 0 when the run
// simulates fewer than two decode steps (it then reports no TPOT).
struct InferenceBound {
    double ttft_s = 0, tpot_s = 0;
};
InferenceBound inference_lower_bound(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                                     const parallel::ResolvedStrategy& rs,
                                     const std::vector<parallel::LayerRange>& vstages, const hw::CostModel& cm);

// The least time the executor can give one kernel: its cost with every byte
// it reads already in L2 (no HBM reads), the software profile's kernel
// efficiency applied as the executor applies it, no interference.
double kernel_lower_bound(const config::ScenarioSpec& sc, const hw::KernelDesc& k, const hw::CostModel& cm);

}  // namespace sim::search
