// parasim serve SCENARIO: the request-level serving simulation of a
// `mode: serving` workload (docs/serving.md): a summary table or JSON, and
// optionally the per-request CSV, written together or not at all.
#include "apps/cli.h"
#include "apps/command_line.h"
#include "sim/config/scenario.h"
#include "sim/report/error_band.h"
#include "sim/serve/serve_report.h"

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include <iostream>

namespace po = boost::program_options;

namespace parasim_cli {

int cmd_serve(const Args& args) {
    CommandLine cl({"serve", "scenario", "scenario file", "a scenario file", {"table", "json"}});
    cl.add()("requests-csv", po::value<std::string>(), "write one CSV row per request to FILE")(
        "strategy", po::value<std::string>(), "serve with the strategy of this name (default: the first)");
    if (!cl.parse(args,
                  "Example: parasim serve scenarios/serving-llama3-8b-h100.yaml "
                  "--set workload.serving.arrivals.rate=8\n"))
        return 0;
    const auto& vm = cl.vm();
    const std::string& format = cl.format();
    const auto scenario = sim::config::load_scenario(cl.input(), cl.overrides());
    if (!scenario.workload.serving)
        throw UsageError("serve needs a 'mode: serving' workload (docs/serving.md); use 'parasim run' for this one");
    const sim::config::StrategySpec* strategy = &scenario.strategies.front();
    if (vm.count("strategy")) strategy = &find_strategy(scenario, vm["strategy"].as<std::string>());
    const auto result = sim::serve::simulate_serving(scenario, *strategy, sim::serve::ServeOptions{});
    const auto summary = sim::serve::summarize(scenario, result);
    // How far published serving measurements were from parasim (docs/serving.md, "Validation status").
    const auto band = sim::report::expected_error(scenario, sim::report::shipped_bands());
    std::string text;
    if (format == "json") {
        text = sim::serve::serve_json(scenario, result, summary);
        std::string member(",");
        member.append(sim::report::error_band_json_member(band));
        text.insert(text.rfind('}'), member);  // a member of the report's object
    } else {
        text = sim::serve::serve_table(scenario, result, summary) + sim::report::format_error_band(band);
    }
    OutputSet outputs;  // report and CSV: both or neither
    outputs.add(cl.output(), text);
    if (vm.count("requests-csv"))
        outputs.add(vm["requests-csv"].as<std::string>(),
                    sim::serve::serve_requests_csv(result, scenario.workload.serving->warmup_requests));
    outputs.commit();
    return 0;
}

}  // namespace parasim_cli
