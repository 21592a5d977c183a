// parasim run SCENARIO: simulate every strategy and report.
#include "apps/cli.h"
#include "apps/command_line.h"
#include "sim/config/scenario.h"
#include "sim/report/error_band.h"
#include "sim/report/runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/program_options.hpp>

#include <iostream>

namespace po = boost::program_options;

namespace parasim_cli {

int cmd_run(const Args& args) {
    CommandLine cl({"run", "scenario", "scenario file", "a scenario file", {"table", "json", "csv"}});
    cl.add()("trace", po::value<std::string>(),
             "write a Chrome trace (Perfetto) of the first feasible strategy to FILE")(
        "strategy", po::value<std::string>(), "run only the strategy of this name")(
        "no-collapse", "simulate every replica instead of one per symmetric group (slower)");
    if (!cl.parse(args, "Example: parasim run scenarios/partitioning-16xh100.yaml --set workload.batch=16\n")) return 0;
    const auto& vm = cl.vm();
    const std::string& format = cl.format();
    auto scenario = sim::config::load_scenario(cl.input(), cl.overrides());
    if (scenario.workload.serving)
        throw UsageError("the scenario's workload is 'mode: serving': run it with 'parasim serve'");
    if (vm.count("strategy")) {
        const sim::config::StrategySpec chosen = find_strategy(scenario, vm["strategy"].as<std::string>());
        scenario.strategies = {chosen};
    }
    sim::report::RunOptions ro;
    ro.collapse = !vm.count("no-collapse");
    ro.want_trace = vm.count("trace") > 0;
    const auto runs = sim::report::run_scenario(scenario, ro);
    std::vector<sim::report::RunMetrics> metrics;
    for (const auto& r : runs) metrics.push_back(r.metrics);

    // How sure the figures are: the validated error of runs like this one.
    const auto band = sim::report::expected_error(scenario, sim::report::shipped_bands());
    std::string text;
    if (format == "json")
        text = sim::report::format_json(scenario.name, metrics, sim::report::error_band_json_member(band));
    else if (format == "csv") text = sim::report::format_csv(metrics);
    else text = sim::report::format_table(scenario, metrics) + sim::report::format_error_band(band);
    OutputSet outputs;  // the report and the trace: both or neither
    if (vm.count("trace")) {
        const std::string* trace = nullptr;
        for (const auto& r : runs)
            if (!r.trace_json.empty()) {
                trace = &r.trace_json;
                break;
            }
        if (!trace) throw UsageError("--trace: no strategy of the scenario is feasible, so there is nothing to trace");
        outputs.add(vm["trace"].as<std::string>(), *trace);
    }
    outputs.add(cl.output(), text);
    outputs.commit();
    return 0;
}

}  // namespace parasim_cli
