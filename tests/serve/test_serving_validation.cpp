// The serving validation set (tests/data/validation/serving.yaml), simulated
// by `parasim validate`'s own path (load_dataset, validate: the serving kind
// runs the engine of `parasim serve`): the mean absolute error of the 36
// TensorRT-LLM throughput points is held to the 10%.
// docs/serving-validation.sh regenerates the tables of docs/serving.md from
// the same runs.
#include "sim/validate/validate.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <string>

namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(PARASIM_DATA_DIR) / "tests" / "data" / "validation";

}  // namespace

TEST_SUITE_BEGIN("slow");

TEST_CASE("the published serving throughputs stay within the guarded MAPE") {
    const auto dataset = sim::validate::load_dataset((kDir / "serving.yaml").string());
    sim::validate::ValidateOptions options;
    for (const auto& p : dataset.points)
        if (p.id.rfind("trtllm-1.0-", 0) == 0) options.ids.push_back(p.id);
    // 36 TensorRT-LLM 1.0 points (docs/serving.md, "Validation status").
    REQUIRE(options.ids.size() == 36);
    const auto report = sim::validate::validate(dataset, options);
    std::string table;
    for (const auto& o : report.outcomes) {
        CHECK_MESSAGE(!o.skipped, o.id, ": ", o.reason);
        CHECK(o.metric == sim::validate::Metric::tokens_per_s);
        table += fmt::format("{} {:.0f} {:.0f} {:+.1f}%\n", o.id, o.measured, o.simulated, 100 * o.error);
    }
    const auto& serving = report.kinds[static_cast<std::size_t>(sim::validate::Kind::serving)];
    REQUIRE(serving.mape);
    CAPTURE(table);
    CAPTURE(*serving.mape);
    CHECK(serving.simulated == 36);
    // The target for throughput; lowered as the model improves,
    // never raised to let a change pass.
    CHECK(*serving.mape <= 0.10);
}

TEST_CASE("the vLLM serving points stay within the guarded MAPE per metric class") {
    // 36 vLLM points of four sources, with the vLLM profile's serving host
    // times, which were fitted on them (docs/serving.md, "Host time of the
    // serving engine"): in-sample figures, held at their November 2026
    // values (5.3%, 24.7%, 7.6%) plus a margin; lowered as the model
    // improves, never raised to let a change pass.
    const auto dataset = sim::validate::load_dataset((kDir / "serving.yaml").string());
    sim::validate::ValidateOptions options;
    for (const auto& p : dataset.points)
        if (p.id.rfind("trtllm-", 0) != 0) options.ids.push_back(p.id);
    REQUIRE(options.ids.size() == 36);
    const auto report = sim::validate::validate(dataset, options);
    double sum[3] = {0, 0, 0};
    int n[3] = {0, 0, 0};
    for (const auto& o : report.outcomes) {
        REQUIRE_MESSAGE(!o.skipped, o.id, ": ", o.reason);
        const int c = o.statistic == sim::validate::Statistic::none  ? 0
                      : o.statistic == sim::validate::Statistic::p99 ? 2
                                                                     : 1;
        sum[c] += std::abs(o.error);
        ++n[c];
    }
    CHECK(n[0] == 12);
    CHECK(n[1] == 19);
    CHECK(n[2] == 5);
    CHECK(sum[0] / n[0] <= 0.06);  // throughput
    CHECK(sum[1] / n[1] <= 0.26);  // median-like: the 10% is not met
    CHECK(sum[2] / n[2] <= 0.09);  // P99
}

TEST_SUITE_END();
