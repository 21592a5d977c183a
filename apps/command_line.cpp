// The shared command-line options of parasim's commands (command_line.h).
#include "apps/command_line.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/program_options.hpp>

#include <algorithm>
#include <iostream>

namespace po = boost::program_options;

namespace parasim_cli {

namespace {

// "table, json or csv": the list as a message names it.
std::string spoken_list(const std::vector<std::string>& items) {
    if (items.size() == 1) return items.front();
    std::string out;
    for (std::size_t i = 0; i + 1 < items.size(); ++i) {
        if (i) out += ", ";
        out += items[i];
    }
    out += " or ";
    out += items.back();
    return out;
}

// "parasim run SCENARIO [options]".
std::string usage_line(const CommandSpec& spec) {
    std::string input = spec.input;
    for (char& c : input)
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    return fmt::format("parasim {} {} [options]", spec.command, input);
}

}  // namespace

CommandLine::CommandLine(CommandSpec spec) : spec_(std::move(spec)), options_(usage_line(spec_)) {
    options_.add_options()("help,h", "show this help");
    if (!spec_.formats.empty())
        options_.add_options()("format", po::value<std::string>()->default_value(spec_.formats.front()),
                               fmt::format("{}", fmt::join(spec_.formats, " | ")).c_str());
    if (spec_.output)
        options_.add_options()("output,o", po::value<std::string>()->default_value(""),
                               "write the report to FILE (atomically)");
    if (spec_.overrides)
        options_.add_options()("set", po::value<std::vector<std::string>>()->composing(),
                               "override a field: PATH=VALUE (repeatable)");
}

bool CommandLine::parse(const Args& args, const std::string& help_epilogue) {
    options_.add_options()(spec_.input.c_str(), po::value<std::string>(), spec_.input_help.c_str());
    if (spec_.limits) add_limit_option(options_);
    po::positional_options_description positional;
    positional.add(spec_.input.c_str(), 1);
    po::store(po::command_line_parser(args).options(options_).positional(positional).run(), vm_);
    if (spec_.limits) apply_limits(vm_);
    if (vm_.count("help")) {
        std::cout << options_ << "\n" << help_epilogue;
        return false;
    }
    if (!vm_.count(spec_.input))
        throw UsageError(
            fmt::format("{} needs {} (try 'parasim {} --help')", spec_.command, spec_.missing_input, spec_.command));
    input_ = vm_[spec_.input].as<std::string>();
    if (!spec_.formats.empty()) {
        format_ = vm_["format"].as<std::string>();
        if (std::find(spec_.formats.begin(), spec_.formats.end(), format_) == spec_.formats.end())
            throw UsageError(fmt::format("--format must be {}, not '{}'", spoken_list(spec_.formats), format_));
    }
    return true;
}

std::string CommandLine::output() const { return spec_.output ? vm_["output"].as<std::string>() : std::string(); }

std::vector<sim::config::Override> CommandLine::overrides() const {
    std::vector<sim::config::Override> out;
    if (spec_.overrides && vm_.count("set"))
        for (const auto& s : vm_["set"].as<std::vector<std::string>>()) out.push_back(sim::config::parse_override(s));
    return out;
}

int CommandLine::int_at_least(const char* name, int minimum) const {
    const int value = vm_[name].as<int>();
    if (value < minimum) throw UsageError(fmt::format("--{} must be at least {}, not {}", name, minimum, value));
    return value;
}

const sim::config::StrategySpec& find_strategy(const sim::config::ScenarioSpec& scenario, const std::string& name) {
    for (const auto& s : scenario.strategies)
        if (s.name == name) return s;
    std::vector<std::string> names;
    for (const auto& s : scenario.strategies) names.push_back(s.name);
    throw UsageError(fmt::format("--strategy: no strategy named '{}' in the scenario{}; it has: {}", name,
                                 sim::config::did_you_mean(name, names), fmt::join(names, ", ")));
}

}  // namespace parasim_cli
