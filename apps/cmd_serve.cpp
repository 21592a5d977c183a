// parasim serve SCENARIO: the request-level serving simulation of a
// `mode: serving` workload (docs/serving.md): a summary table or JSON, and
// optionally the per-request CSV, written together or not at all.
#include "apps/cli.h"
#include "sim/config/scenario.h"
#include "sim/report/error_band.h"
#include "sim/serve/serve_report.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include <iostream>

namespace po = boost::program_options;

namespace parasim_cli {

int cmd_serve(const Args& args) {
    po::options_description opts("parasim serve SCENARIO [options]");
    opts.add_options()("help,h", "show this help")("format", po::value<std::string>()->default_value("table"),
                                                     "table | json")(
        "output,o", po::value<std::string>()->default_value(""), "write the report to FILE (atomically)")(
        "requests-csv", po::value<std::string>(), "write one CSV row per request to FILE")(
        "set", po::value<std::vector<std::string>>()->composing(), "override a field: PATH=VALUE (repeatable)")(
        "strategy", po::value<std::string>(), "serve with the strategy of this name (default: the first)")(
        "scenario", po::value<std::string>(), "scenario file");
    add_limit_option(opts);
    po::positional_options_description pos;
    pos.add("scenario", 1);
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
    apply_limits(vm);
    if (vm.count("help")) {
        std::cout << opts
                  << "\nExample: parasim serve scenarios/serving-llama3-8b-h100.yaml "
                     "--set workload.serving.arrivals.rate=8\n";
        return 0;
    }
    if (!vm.count("scenario")) throw UsageError("serve needs a scenario file (try 'parasim serve --help')");
    const std::string format = vm["format"].as<std::string>();
    if (format != "table" && format != "json")
        throw UsageError(fmt::format("--format must be table or json, not '{}'", format));
    std::vector<sim::config::Override> overrides;
    if (vm.count("set"))
        for (const auto& s : vm["set"].as<std::vector<std::string>>()) overrides.push_back(sim::config::parse_override(s));
    const auto scenario = sim::config::load_scenario(vm["scenario"].as<std::string>(), overrides);
    if (!scenario.workload.serving)
        throw UsageError("serve needs a 'mode: serving' workload (docs/serving.md); use 'parasim run' for this one");
    const sim::config::StrategySpec* strategy = &scenario.strategies.front();
    if (vm.count("strategy")) {
        strategy = nullptr;
        for (const auto& s : scenario.strategies)
            if (s.name == vm["strategy"].as<std::string>()) strategy = &s;
        if (!strategy) throw UsageError(fmt::format("--strategy: no strategy named '{}'", vm["strategy"].as<std::string>()));
    }
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
    outputs.add(vm["output"].as<std::string>(), text);
    if (vm.count("requests-csv"))
        outputs.add(vm["requests-csv"].as<std::string>(),
                    sim::serve::serve_requests_csv(result, scenario.workload.serving->warmup_requests));
    outputs.commit();
    return 0;
}

}  // namespace parasim_cli
