// The expected-error band a run prints: the narrowest validated band with
// enough runs, of the reference set and of the unseen sets, MoE runs judged by
// MoE bands, and a warning for a GPU or stack no validated run used.
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
                               {"training", "h100-sxm", "megatron-core", 0.02, 2, true, ""},  // too few runs
                               {"training", "", "megatron-core", 0.04, 5, true, ""},
                               {"training", "h100-sxm", "", 0.07, 10, false, ""},
                               {"training", "a100-sxm-80gb", "", 0.09, 12, false, ""},
                               {"training", "", "", 0.08, 24, false, ""},
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

TEST_CASE("a serving run gets one band per metric class: throughput, median, p99") {
    using config::Mode;
    auto sc = run_of(Mode::inference, "h100-sxm", "tensorrt-llm");
    sc.workload.serving.emplace();
    const report::Bands bands{{
                                  {"inference", "h100-sxm", "", 0.20, 12, false, ""},  // not a serving band
                                  {"serving", "h100-sxm", "tensorrt-llm", 0.07, 18, false, "throughput"},
                                  {"serving", "", "", 0.08, 40, false, "throughput"},
                                  {"serving", "h100-sxm", "tensorrt-llm", 0.30, 2, false, "median"},  // too few
                                  {"serving", "", "", 0.25, 9, false, "median"},
                              },
                              "test"};
    const auto e = report::expected_error(sc, bands);
    CHECK(e.serving);
    REQUIRE(e.by_metric.size() == 2);
    CHECK(e.by_metric[0].metric == "throughput");
    CHECK(e.by_metric[0].n == 18);  // the narrowest: GPU and stack
    CHECK(e.by_metric[1].metric == "median");
    CHECK(e.by_metric[1].n == 9);  // the GPU-and-stack median band has 2 points
    REQUIRE(e.band);
    CHECK(e.band->metric == "throughput");
    REQUIRE(e.warnings.size() == 1);
    CHECK(e.warnings[0] == "no band for serving p99 metrics: too few published points were validated");
    CHECK(report::format_error_band(e) ==
          "expected error: serving on h100-sxm with tensorrt-llm (throughput): MAPE 7.0% over 18 published points "
          "(docs/serving.md)\n"
          "expected error: serving (median): MAPE 25.0% over 9 published points (docs/serving.md)\n"
          "warning: no band for serving p99 metrics: too few published points were validated\n");
    const std::string json = report::error_band_json_member(e);
    CHECK(json.find("\"by_metric\":[{\"metric\":\"throughput\"") != std::string::npos);
    // Runs never see serving bands, nor serving runs the runs' bands.
    const auto run = report::expected_error(run_of(Mode::inference, "h100-sxm", ""), bands);
    REQUIRE(run.band);
    CHECK(run.band->kind == "inference");
    CHECK_FALSE(run.serving);
    CHECK(report::error_band_json_member(run).find("by_metric") == std::string::npos);
}

TEST_CASE("a run gets the unseen sets' band beside the reference one, and a MoE run only MoE bands") {
    using config::Mode;
    // {kind, gpu, software, mape, n, fitted, metric, unseen, moe}
    const report::Bands bands{{
                                  {"training", "", "", 0.04, 24, false, "", false, false},
                                  {"training", "h100-sxm", "", 0.05, 6, false, "", true, false},
                                  {"training", "", "", 0.06, 9, false, "", true, false},
                                  {"training", "h100-sxm", "", 0.30, 1, false, "", true, true},  // too few
                                  {"training", "", "", 0.20, 3, false, "", true, true},
                                  {"training", "gb200", "", 0.01, 1, false, "", true, false},
                              },
                              "test"};
    // A dense run on H100: the reference kind band, and the unseen GPU band (6 runs).
    auto dense = run_of(Mode::training, "h100-sxm", "");
    auto e = report::expected_error(dense, bands);
    REQUIRE(e.band);
    CHECK(e.band->mape == doctest::Approx(0.04));
    REQUIRE(e.unseen_band);
    CHECK(e.unseen_band->gpu == "h100-sxm");
    CHECK(report::format_error_band(e) ==
          "expected error: training: MAPE 4.0% over 24 published runs (docs/validation.md)\n"
          "expected error: training on h100-sxm: MAPE 5.0% over 6 published runs parasim was never fitted to "
          "(docs/validation.md section 5)\n");
    // The same with routed experts on GB200: no reference MoE band, the unseen MoE kind band (the
    // GPU's MoE band has 1 run), and no warning: an unseen run on gb200 was validated.
    auto moe = run_of(Mode::training, "gb200", "");
    moe.model.experts = 128;
    e = report::expected_error(moe, bands);
    CHECK_FALSE(e.band);
    REQUIRE(e.unseen_band);
    CHECK(e.unseen_band->moe);
    CHECK(e.unseen_band->mape == doctest::Approx(0.20));
    CHECK(e.warnings.empty());
    CHECK(report::format_error_band(e) ==
          "expected error: training (MoE): MAPE 20.0% over 3 published runs parasim was never fitted to "
          "(docs/validation.md section 5)\n");
    const std::string json = report::error_band_json_member(e);
    CHECK(json.find("\"band\":null,\"unseen_band\":{\"kind\":\"training\",\"moe\":true") != std::string::npos);
}

TEST_CASE("the shipped bands have serving bands from the serving validation set") {
    const auto& bands = report::shipped_bands();
    bool throughput = false;
    for (const auto& b : bands.bands)
        if (b.kind == "serving") {
            CHECK_FALSE(b.metric.empty());
            throughput = throughput || (b.metric == "throughput" && b.gpu.empty() && b.software.empty());
        }
    CHECK(throughput);
}

TEST_SUITE_END();
