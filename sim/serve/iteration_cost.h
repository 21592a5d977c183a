// The time of one serving iteration: the iteration's plan
// (parallel::build_iteration_plan) run by the same executor, cost model and
// software profile as `parasim run`, with a cache keyed by the exact batch
// shape, the only input the plan depends on that varies within a
// simulation: the strategy (its overlap.two_batch included) is fixed per
// instance (docs/serving.md, "Iteration cost and its cache").
#pragma once

#include "sim/config/scenario.h"
#include "sim/exec/executor.h"
#include "sim/hw/cost_model.h"
#include "sim/net/topology.h"
#include "sim/parallel/builder.h"
#include "sim/serve/engine_state.h"
#include "sim/serve/memo_cost_model.h"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace sim::serve {

class IterationCost {
public:
    // stage >= 0: the time of that pipeline stage's part of the iteration
    // alone (parallel::build_iteration_plan's `stage`); -1: the whole.
    IterationCost(const config::ScenarioSpec& sc, const parallel::PlanBuild& base, const hw::CostModel& cm,
                  int stage = -1);
    Time time(const parallel::IterationBatch& batch);
    std::uint64_t hits() const { return hits_; }
    std::uint64_t misses() const { return misses_; }
    const MemoCostModel& kernel_costs() const { return memo_cm_; }

private:
    struct KeyHash {
        std::size_t operator()(const std::vector<std::int64_t>& k) const;
    };
    const config::ScenarioSpec& sc_;
    const parallel::PlanBuild& base_;
    int stage_ = -1;
    MemoCostModel memo_cm_;
    net::Topology topo_;
    exec::ExecOptions eo_;
    std::vector<std::int64_t> key_;  // reused: no allocation on a hit
    std::unordered_map<std::vector<std::int64_t>, Time, KeyHash> cache_;
    std::uint64_t hits_ = 0, misses_ = 0;
};

// The iteration's shape, canonical, from the work a scheduler chose: every
// decode in one group of its mean context (rounded up to `bucket`), each
// prefill chunk a group of its own, equal chunks merged, groups sorted
// (docs/serving.md says why the mean). `prefills` is scratch.
void batch_shape(const EngineState& st, const std::vector<Work>& work, std::int64_t bucket, parallel::IterationBatch& b,
                 std::vector<parallel::IterationGroup>& prefills);

}  // namespace sim::serve
