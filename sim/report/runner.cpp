// Scenario runner.
#include "sim/report/runner.h"

#include "sim/core/limits.h"
#include "sim/exec/executor.h"
#include "sim/net/topology.h"
#include "sim/parallel/builder.h"
#include "sim/report/trace.h"

namespace sim::report {

StrategyRun run_strategy(const config::ScenarioSpec& sc, const config::StrategySpec& spec, const RunOptions& options) {
    StrategyRun out;
    const auto cost_model = hw::make_cost_model(options.cost_model);
    parallel::PlanBuild build;
    try {
        try {
            build = parallel::build_plan(sc, spec, *cost_model, parallel::BuildOptions{options.collapse});
        } catch (const ModelError& e) {  // a limit, or a duration past the clock (a cost the partitioner asks)
            throw ConfigError(spec.where, fmt::format("strategy '{}': {}", spec.name, e.what()));
        }
    } catch (const ConfigError& e) {
        if (!options.tolerate_unformable) throw;
        out.metrics.strategy = spec.name;
        out.metrics.gpus = sc.gpus;
        out.metrics.feasible = false;
        out.metrics.note = std::string("cannot be formed: ") + e.what();
        return out;
    }
    if (build.memory.oom) {
        out.metrics = compute_metrics(sc, build, nullptr);
        return out;
    }
    const net::Topology topo(sc.cluster, sc.gpus);
    exec::ExecOptions eo;
    eo.record_link_samples = options.want_trace;
    eo.record_intervals = options.want_trace;  // the metrics read the stream order instead
    eo.host_kernel_issue = sc.profile.kernel_issue;
    eo.launch_queue_depth = sc.profile.launch_queue_depth;
    eo.kernel_efficiency = sc.profile.kernel_efficiency;
    eo.collectives = sc.collectives;
    exec::ExecResult result;
    try {
        result = exec::execute(build.plan, sc.gpu, topo, *cost_model, eo);
    } catch (const ModelError& e) {
        // What the strategy asks for cannot run (e.g. a collective algorithm
        // without the operation the plan needs): point at the strategy.
        throw ConfigError(spec.where, fmt::format("strategy '{}': {}", spec.name, e.what()));
    }
    out.metrics = compute_metrics(sc, build, &result);
    if (options.want_trace) out.trace_json = chrome_trace(spec.name, build.plan, result);
    return out;
}

std::vector<StrategyRun> run_scenario(const config::ScenarioSpec& sc, const RunOptions& options) {
    std::vector<StrategyRun> runs;
    for (const auto& s : sc.strategies) runs.push_back(run_strategy(sc, s, options));
    return runs;
}

}  // namespace sim::report
