// Serving test scenarios: Llama 3 8B on one H100 with a serving block the
// test writes, loaded from a file in the system temp folder.
#pragma once

#include "sim/config/scenario.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace serve_test {

// A scenario whose workload.serving block is `serving` (YAML lines indented
// by 4 spaces), with the given extra workload lines.
inline sim::config::ScenarioSpec scenario(const std::string& serving, const std::string& name = "s") {
    static int counter = 0;
    const auto path = std::filesystem::temp_directory_path() /
                      ("parasim-serve-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".yaml");
    {
        std::ofstream f(path);
        f << "name: " << name << "\nsoftware: {name: vllm}\ncluster: dgx-h100\ngpus: 1\nmodel: llama3-8b\n"
          << "workload:\n  mode: serving\n  dtype: bf16\n  serving:\n"
          << serving << "strategies:\n  - name: tp1\n    tp: 1\n";
    }
    auto sc = sim::config::load_scenario(path.string(), {});
    std::filesystem::remove(path);
    return sc;
}

}  // namespace serve_test
