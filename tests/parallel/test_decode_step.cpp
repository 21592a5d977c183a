// A software profile's decode_step (docs/software-profiles.md §2g): each
// decode step of a static batch ends with the engine's small kernels and a
// host task the next step waits for (TurboMind v0.1's two host waits and its
// device-to-host copy of the output ids).
#include "sim/config/data_dir.h"
#include "sim/config/scenario.h"
#include "sim/parallel/strategy.h"
#include "sim/report/runner.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim;

namespace {
// Llama 3 8B on one H100, one micro-batch, 3 simulated decode steps; a host
// issue cost of 3 us in every variant, so only decode_step differs.
config::ScenarioSpec scenario(std::int64_t batch) {
    std::vector<config::Override> ov;
    for (const std::string s : {"model=llama3-8b", "cluster=dgx-h100", "gpus=1", "strategies=[{name: tp1, tp: 1}]",
                                "workload.output_tokens=8", "workload.prompt_tokens=128"})
        ov.push_back(config::parse_override(s));
    ov.push_back(config::parse_override("workload.batch=" + std::to_string(batch)));
    auto sc = config::load_scenario(
        std::string(sim::config::data_dir()) + "/scenarios/partitioning-16xh100-feasible.yaml", ov);
    sc.profile.kernel_issue = Time::us(3);
    return sc;
}

void turbomind_waits(config::ScenarioSpec& sc) {
    sc.profile.decode_step_host_syncs = 2;
    sc.profile.decode_step_sync_latency = Time::us(2);
    sc.profile.decode_step_copy_bytes = 16416;  // session_len 4104 x 4 bytes
    sc.gpu.pcie_bandwidth.bytes_per_s = 32e9;
}

double tpot_ms(const config::ScenarioSpec& sc) {
    return *report::run_strategy(sc, sc.strategies.front(), {}).metrics.tpot_ms;
}
}  // namespace

TEST_CASE("decode step host time: syncs x (latency + kernel_issue) + sequences x copy / PCIe rate") {
    auto sc = scenario(16);
    CHECK(parallel::decode_step_host_time(sc, 16) == Time{});  // no decode_step block: nothing
    CHECK(parallel::decode_step_kernels(sc, 16).empty());
    turbomind_waits(sc);
    // 2 x (2 + 3) us + 16 x 16416 B / 32 GB/s = 10 + 8.208 = 18.208 us
    CHECK(parallel::decode_step_host_time(sc, 16).seconds() == doctest::Approx(18.208e-6).epsilon(1e-9));
    // batch 1: 10 + 16416 / 32e9 s = 10.513 us
    CHECK(parallel::decode_step_host_time(sc, 1).seconds() == doctest::Approx(10.513e-6).epsilon(1e-9));
    sc.profile.decode_step_kernels = 4;
    const auto ops = parallel::decode_step_kernels(sc, 16);
    REQUIRE(ops.size() == 4);
    CHECK(ops.front().kernel.bytes_read.value == 64);  // 4 bytes a sequence
    CHECK(ops.front().kernel.bytes_written.value == 64);
}

TEST_CASE("decode step: the step grows by the host time, and by the small kernels' launches") {
    const auto plain = scenario(16);
    auto waits = scenario(16);
    turbomind_waits(waits);
    const double host_ms = parallel::decode_step_host_time(waits, 16).seconds() * 1e3;  // 0.018208
    // The GPU idles for the whole host task: the step is exactly that much longer.
    CHECK(tpot_ms(waits) - tpot_ms(plain) == doctest::Approx(host_ms).epsilon(1e-3));

    auto kernels = scenario(16);
    kernels.profile.decode_step_kernels = 4;
    // Four kernels of 64 bytes each way: their launch overhead, and next to nothing for the bytes.
    const double launch_ms = kernels.gpu.efficiency.launch_overhead.seconds() * 1e3;
    const double grown = tpot_ms(kernels) - tpot_ms(plain);
    CHECK(grown >= 4 * launch_ms);
    CHECK(grown <= 4 * launch_ms + 1e-3);  // under 1 us for 4 x 128 bytes
}

TEST_SUITE_END();
