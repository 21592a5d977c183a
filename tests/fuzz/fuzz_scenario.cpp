// libFuzzer target: arbitrary bytes as a scenario file, through the whole
// loader (cluster, model, GPU resolution, workload, strategies, sweep), once
// as given and once with a --set override applied before validation.
// docs/testing.md says how to build and run it.
#include "fuzz_common.h"
#include "sim/config/scenario.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace {

const std::string& scratch_path() {
    static const std::string path = "/tmp/parasim-fuzz-scenario-" + std::to_string(::getpid()) + ".yaml";
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
    return 0;
}
