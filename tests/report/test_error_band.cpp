// The expected-error band a run prints: the narrowest validated band with
// enough runs, and a warning for a GPU or stack no validated run used.
#include "sim/report/error_band.h"

#include <doctest/doctest.h>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;
using report::ValidatedBand;

namespace {

config::ScenarioSpec run_of(config::Mode mode, const std::string& gpu, const std::string& software) {
    config::ScenarioSpec sc;
    sc.workload.mode = mode;
    sc.gpu.name = gpu;
    sc.software.name = software;
    return sc;
}

const report::Bands kBands{{
                               {"training", "h100-sxm", "megatron-core", 0.02, 2, true},  // too few runs
                               {"training", "", "megatron-core", 0.04, 5, true},
                               {"training", "h100-sxm", "", 0.07, 10, false},
                               {"training", "a100-sxm-80gb", "", 0.09, 12, false},
                               {"training", "", "", 0.08, 24, false},
                           },
                           "test"};

}  // namespace

TEST_CASE("the expected error is the narrowest band of at least 3 runs: GPU and stack, stack, GPU, kind") {
    using config::Mode;
    // megatron-core on H100: the GPU-and-stack band has 2 runs, so the stack's (5).
    auto e = report::expected_error(run_of(Mode::training, "h100-sxm", "megatron-core"), kBands);
    REQUIRE(e.band);
    CHECK(e.band->software == "megatron-core");
    CHECK(e.band->gpu.empty());
    CHECK(e.band->n == 5);
    CHECK(e.warnings.empty());
    CHECK(report::format_error_band(e) ==
          "expected error: training with megatron-core: MAPE 4.0% over 5 published runs, in-sample (the stack's "
          "efficiency was fitted on them) (docs/validation.md)\n");
    // No stack named: the GPU's band.
    e = report::expected_error(run_of(Mode::training, "a100-sxm-80gb", ""), kBands);
    REQUIRE(e.band);
    CHECK(e.band->gpu == "a100-sxm-80gb");
    CHECK(e.band->mape == doctest::Approx(0.09));
    // A GPU and a stack nobody validated: the kind's band, and two warnings.
    e = report::expected_error(run_of(Mode::training, "l4", "vllm"), kBands);
    REQUIRE(e.band);
    CHECK(e.band->n == 24);
    REQUIRE(e.warnings.size() == 2);
    CHECK(e.warnings[0].find("no published training run on l4") != std::string::npos);
    CHECK(e.warnings[1].find("no published training run with vllm") != std::string::npos);
    // Inference has no band at all here.
    e = report::expected_error(run_of(Mode::inference, "h100-sxm", ""), kBands);
    CHECK_FALSE(e.band);
    CHECK(report::format_error_band(e).find("no validated band") != std::string::npos);
    CHECK(report::error_band_json_member(e).find("\"band\":null") != std::string::npos);
}

TEST_SUITE_END();
