// Shared by the parallelism tests: the scenario folders and loading a
// scenario (with --set style overrides) and one of its strategies by name.
#pragma once

#include "sim/config/data_dir.h"
#include "sim/config/scenario.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace parasim_test {

inline const std::string kData = std::string(sim::config::data_dir()) + "/tests/data/scenarios/";
inline const std::string kScenarios = std::string(sim::config::data_dir()) + "/scenarios/";

inline sim::config::ScenarioSpec scenario(const std::string& path, const std::vector<std::string>& sets = {}) {
    std::vector<sim::config::Override> ov;
    for (const auto& s : sets) ov.push_back(sim::config::parse_override(s));
    return sim::config::load_scenario(path, ov);
}

inline const sim::config::StrategySpec& strategy(const sim::config::ScenarioSpec& sc, const std::string& name) {
    for (const auto& s : sc.strategies)
        if (s.name == name) return s;
    FAIL("no strategy " << name);
    return sc.strategies.front();
}

}  // namespace parasim_test
