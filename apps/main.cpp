// parasim: the command line. Dispatches to subcommands and turns every error
// into one line on stderr and an exit code: 2 for bad input (command line,
// scenario, model or topology files), 3 for an internal error.
#include "apps/cli.h"
#include "sim/core/error.h"
#include "sim/core/limits.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/exceptions.h>
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>

namespace po = boost::program_options;
using namespace parasim_cli;

void parasim_cli::add_limit_option(po::options_description& opts) {
    opts.add_options()("limit", po::value<std::vector<std::string>>()->composing(),
                       fmt::format("raise a resource limit: NAME=VALUE, NAME one of {} (repeatable)",
                                   fmt::join(sim::limit_names(), ", "))
                           .c_str());
}

void parasim_cli::apply_limits(const po::variables_map& vm) {
    if (!vm.count("limit")) return;
    for (const auto& l : vm["limit"].as<std::vector<std::string>>()) sim::set_limit(l);
}

namespace {

constexpr const char* kUsage = R"(parasim - discrete-event simulator of multi-GPU clusters running transformers

Usage: parasim [--help] [--version] COMMAND [ARGS...]

Commands:
  run SCENARIO        simulate every strategy of a scenario and report metrics
  sweep SCENARIO      run a scenario's sweep (cross product of overrides) in parallel
  serve SCENARIO      simulate requests arriving over time (a 'mode: serving' workload)
  plan SCENARIO       find the best parallel plans of a scenario's search: block
  validate DATASET    simulate published measurements and report the error
  bench WHICH         benchmark: engine (event queue), scale (whole simulations),
                      serving (the serving loop) or plan (the plan search of GPT-3 175B on 1024 A100s)
  list WHAT           what is available: gpus, clusters, models, schedules,
                      partitioners, schedulers, collectives, cost-models, software ('parasim list --help')

Run 'parasim COMMAND --help' for the options of a command.
)";

int dispatch(int argc, char** argv) {
    // Global options are those before the command; everything after the
    // command name belongs to the command (so 'parasim run --help' is the
    // command's help).
    int command_at = 1;
    while (command_at < argc && argv[command_at][0] == '-') ++command_at;
    po::options_description global("Global options");
    global.add_options()("help,h", "show this help")("version", "print the version");
    po::variables_map vm;
    po::store(po::command_line_parser(std::vector<std::string>(argv + 1, argv + command_at)).options(global).run(), vm);
    po::notify(vm);
    if (vm.count("version")) {
        fmt::print("parasim {}\n", PARASIM_VERSION);
        return 0;
    }
    if (vm.count("help")) {
        fmt::print("{}", kUsage);
        return 0;
    }
    if (command_at >= argc) throw UsageError("no command given (try 'parasim --help')");
    const std::string command = argv[command_at];
    const Args rest(argv + command_at + 1, argv + argc);
    if (command == "run") return cmd_run(rest);
    if (command == "sweep") return cmd_sweep(rest);
    if (command == "serve") return cmd_serve(rest);
    if (command == "plan") return cmd_plan(rest);
    if (command == "validate") return cmd_validate(rest);
    if (command == "bench") return cmd_bench(rest);
    if (command == "list") return cmd_list(rest);
    throw UsageError(
        fmt::format("unknown command '{}' (expected run, sweep, serve, plan, validate, bench or list)", command));
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return dispatch(argc, argv);
    } catch (const UsageError& e) {
        fmt::print(stderr, "parasim: {}\n", e.what());
        return 2;
    } catch (const po::error& e) {
        fmt::print(stderr, "parasim: {}\n", e.what());
        return 2;
    } catch (const sim::ConfigError& e) {
        fmt::print(stderr, "{}\n", e.what());
        return 2;
    } catch (const sim::ModelError& e) {
        fmt::print(stderr, "parasim: {}\n", e.what());
        return 2;
    } catch (const YAML::Exception& e) {
        fmt::print(stderr, "parasim: YAML error: {}\n", e.what());
        return 2;
    } catch (const sim::InternalError& e) {
        fmt::print(stderr, "parasim: {}\n", e.what());
        return 3;
    } catch (const std::bad_alloc&) {
        fmt::print(stderr, "parasim: out of host memory\n");
        return 3;
    } catch (const std::exception& e) {
        fmt::print(stderr, "parasim: {}\n", e.what());
        return 3;
    }
}
