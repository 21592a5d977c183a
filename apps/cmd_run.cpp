// parasim run SCENARIO: simulate every strategy and report.
#include "apps/cli.h"
#include "sim/config/scenario.h"
#include "sim/report/error_band.h"
#include "sim/report/runner.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>

namespace po = boost::program_options;

namespace parasim_cli {

int cmd_run(const Args& args) {
    po::options_description opts("parasim run SCENARIO [options]");
    opts.add_options()("help,h", "show this help")("format", po::value<std::string>()->default_value("table"),
                                                     "table | json | csv")(
        "output,o", po::value<std::string>()->default_value(""), "write the report to FILE (atomically)")(
        "set", po::value<std::vector<std::string>>()->composing(), "override a field: PATH=VALUE (repeatable)")(
        "trace", po::value<std::string>(), "write a Chrome trace (Perfetto) of the first feasible strategy to FILE")(
        "strategy", po::value<std::string>(), "run only the strategy of this name")(
        "no-collapse", "simulate every replica instead of one per symmetric group (slower)")(
        "scenario", po::value<std::string>(), "scenario file");
    add_limit_option(opts);
    po::positional_options_description pos;
    pos.add("scenario", 1);
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
    apply_limits(vm);
    if (vm.count("help")) {
        std::cout << opts << "\nExample: parasim run scenarios/partitioning-16xh100.yaml --set workload.batch=16\n";
        return 0;
    }
    if (!vm.count("scenario")) throw UsageError("run needs a scenario file (try 'parasim run --help')");
    const std::string format = vm["format"].as<std::string>();
    if (format != "table" && format != "json" && format != "csv")
        throw UsageError(fmt::format("--format must be table, json or csv, not '{}'", format));

    std::vector<sim::config::Override> overrides;
    if (vm.count("set"))
        for (const auto& s : vm["set"].as<std::vector<std::string>>()) overrides.push_back(sim::config::parse_override(s));
    auto scenario = sim::config::load_scenario(vm["scenario"].as<std::string>(), overrides);
    if (scenario.workload.serving)
        throw UsageError("the scenario's workload is 'mode: serving': run it with 'parasim serve'");
    if (vm.count("strategy")) {
        const std::string want = vm["strategy"].as<std::string>();
        std::vector<sim::config::StrategySpec> keep;
        for (const auto& s : scenario.strategies)
            if (s.name == want) keep.push_back(s);
        if (keep.empty()) {
            std::vector<std::string> names;
            for (const auto& s : scenario.strategies) names.push_back(s.name);
            throw UsageError(fmt::format("--strategy: no strategy named '{}' in the scenario{}; it has: {}", want,
                                         sim::config::did_you_mean(want, names), fmt::join(names, ", ")));
        }
        scenario.strategies = keep;
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
    outputs.add(vm["output"].as<std::string>(), text);
    outputs.commit();
    return 0;
}

}  // namespace parasim_cli
