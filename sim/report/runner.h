// Runs a scenario end to end: for each strategy, build the plan, check
// memory, execute on the engine, compute the metrics. The one path that
// `parasim run`, `sweep`, `validate` and `bench` all use.
#pragma once

#include "sim/config/scenario.h"
#include "sim/report/metrics.h"

#include <string>
#include <vector>

namespace sim::report {

struct RunOptions {
    bool collapse = true;     // symmetry collapsing of identical replicas
    bool want_trace = false;  // keep a Chrome trace per strategy
    // A strategy that cannot be formed for this GPU count is reported as such
    // (sweeps) instead of being an input error (run).
    bool tolerate_unformable = false;
    std::string cost_model = "roofline";
};

struct StrategyRun {
    RunMetrics metrics;
    std::string trace_json;
};

StrategyRun run_strategy(const config::ScenarioSpec& scenario, const config::StrategySpec& strategy,
                         const RunOptions& options);
std::vector<StrategyRun> run_scenario(const config::ScenarioSpec& scenario, const RunOptions& options);

}  // namespace sim::report
