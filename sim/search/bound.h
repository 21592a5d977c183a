// A lower bound on a training iteration's simulated time, cheap enough to
// compute for every candidate of a plan search (docs/planning.md, "Why the
// bound never drops the best plan"). It counts only work the simulation
// certainly does, each piece at a time the executor can never beat.
#pragma once

#include "sim/config/scenario.h"
#include "sim/hw/cost_model.h"
#include "sim/parallel/builder.h"

namespace sim::search {

// Seconds; 0 for inference (no bound: every inference candidate is simulated).
// `vstages` are the layers of each virtual stage (parallel::split_layers).
double iteration_lower_bound(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                             const parallel::ResolvedStrategy& rs, const std::vector<parallel::LayerRange>& vstages,
                             const hw::CostModel& cm);

// The least time the executor can give one kernel: its cost with every byte
// it reads already in L2 (no HBM reads), the software profile's kernel
// efficiency applied as the executor applies it, no interference.
double kernel_lower_bound(const config::ScenarioSpec& sc, const hw::KernelDesc& k, const hw::CostModel& cm);

}  // namespace sim::search
