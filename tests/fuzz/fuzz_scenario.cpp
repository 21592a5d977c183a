// libFuzzer target: arbitrary bytes as a scenario file, through the whole
// loader (cluster, model, GPU resolution, workload, strategies, sweep), once
// as given, once with fixed --set overrides applied before validation, once
// with the input's last line as a --set argument (PATH=VALUE, any bytes), and
// once per sweep field with its first value, as `parasim sweep` expands it.
// docs/testing.md says how to build and run it.
#include "fuzz_common.h"
#include "sim/config/scenario.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

const std::string& scratch_path() {
    static const std::string path =
        (std::filesystem::temp_directory_path() / ("parasim-fuzz-scenario-" + std::to_string(::getpid()) + ".yaml"))
            .string();
    return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string& path = scratch_path();
    {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    }
    parasim_fuzz::expect_clean([&] { sim::config::load_scenario(path, {}); });
    // Overrides are applied to the parsed tree before validation: a second,
    // different path through the same loader.
    parasim_fuzz::expect_clean([&] {
        sim::config::load_scenario(path, {sim::config::parse_override("workload.batch=2"),
                                          sim::config::parse_override("cluster.links.nvlink.bandwidth=100 GB/s")});
    });
    // The last line as a command-line override: path syntax, YAML values,
    // aliases, huge indexes.
    const std::string text(reinterpret_cast<const char*>(data), size);
    const std::size_t nl = text.find_last_of('\n', text.empty() ? 0 : text.size() - 2);
    const std::string last = nl == std::string::npos ? text : text.substr(nl + 1);
    parasim_fuzz::expect_clean([&] { sim::config::load_scenario(path, {sim::config::parse_override(last)}); });
    // Sweep expansion: each field's first value as a sweep point.
    parasim_fuzz::expect_clean([&] {
        const auto base = sim::config::load_scenario(path, {});
        std::vector<sim::config::Override> point;
        for (const auto& [field, values] : base.sweep)
            if (!values.empty()) point.push_back(sim::config::make_override(field, values.front(), false));
        if (!point.empty()) sim::config::load_scenario(path, point);
    });
    return 0;
}
