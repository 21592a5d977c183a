// One command's command line: the options that run, serve, sweep, plan,
// validate and bench share (help, the positional input, --format from a list,
// --output, --set, --limit), declared, parsed and checked in one place so the
// commands agree on their names, help texts and error messages. Each command
// adds its own options through add() and reads them through vm().
#pragma once

#include "apps/cli.h"
#include "sim/config/scenario.h"

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/variables_map.hpp>

#include <string>
#include <vector>

namespace parasim_cli {

struct CommandSpec {
    std::string command;               // "run": used in the usage line and messages
    std::string input;                 // the positional argument's option name: "scenario", "dataset"
    std::string input_help;            // its help text: "scenario file with a sweep: block"
    std::string missing_input;         // what a missing input is called: "a scenario file"
    std::vector<std::string> formats;  // --format's values, the first the default; empty: no --format
    bool output = true;                // --output/-o FILE (default: standard output)
    bool overrides = true;             // --set PATH=VALUE (repeatable)
    bool limits = true;                // --limit NAME=VALUE (repeatable)
};

class CommandLine {
public:
    explicit CommandLine(CommandSpec spec);

    // Adds the command's own options; they are listed after the shared
    // ones of the constructor and before the positional input.
    boost::program_options::options_description_easy_init add() { return options_.add_options(); }

    // Parses `args` and applies --limit. Returns false when --help was given,
    // after printing the options and `help_epilogue`; the command then exits 0.
    // Throws UsageError for a missing input or a --format outside the list.
    bool parse(const Args& args, const std::string& help_epilogue);

    const boost::program_options::variables_map& vm() const { return vm_; }
    const std::string& input() const { return input_; }
    const std::string& format() const { return format_; }
    std::string output() const;
    std::vector<sim::config::Override> overrides() const;
    // An int option that must be >= minimum: "--NAME must be at least M, not V".
    int int_at_least(const char* name, int minimum) const;

private:
    CommandSpec spec_;
    boost::program_options::options_description options_;
    boost::program_options::variables_map vm_;
    std::string input_;
    std::string format_;
};

// The strategy named `name` in the scenario; a UsageError with a suggestion
// and the names it has otherwise.
const sim::config::StrategySpec& find_strategy(const sim::config::ScenarioSpec& scenario, const std::string& name);

}  // namespace parasim_cli
