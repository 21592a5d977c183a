// The serving validation set (tests/data/validation/serving.yaml), simulated
// by `parasim validate`'s own path (load_dataset, validate: the serving kind
// runs the engine of `parasim serve`): the mean absolute error of the 36
// TensorRT-LLM throughput points is held to the 10%.
// docs/serving-validation.sh regenerates the tables of docs/serving.md from
// the same runs.
#include "sim/config/data_dir.h"
#include "sim/validate/validate.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>

namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(sim::config::data_dir()) / "tests" / "data" / "validation";

// The MAPE by class (0: throughput, 1: median-like, 2: P99) of the points of
// `file` (the serving set by default) whose id `keep` accepts; `count` of
// them are expected.
struct ByClass {
    double sum[3] = {0, 0, 0};
    int n[3] = {0, 0, 0};
    double mape(int c) const { return sum[c] / n[c]; }
};

ByClass by_class(const std::function<bool(const std::string&)>& keep, std::size_t count,
                 const char* file = "serving.yaml") {
    const auto dataset = sim::validate::load_dataset((kDir / file).string());
    sim::validate::ValidateOptions options;
    for (const auto& p : dataset.points)
        if (keep(p.id)) options.ids.push_back(p.id);
    REQUIRE(options.ids.size() == count);
    ByClass b;
    for (const auto& o : sim::validate::validate(dataset, options).outcomes) {
        REQUIRE_MESSAGE(!o.skipped, o.id, ": ", o.reason);
        const int c = o.statistic == sim::validate::Statistic::none  ? 0
                      : o.statistic == sim::validate::Statistic::p99 ? 2
                                                                     : 1;
        b.sum[c] += std::abs(o.error);
        ++b.n[c];
    }
    return b;
}

bool starts(const std::string& id, const char* prefix) { return id.rfind(prefix, 0) == 0; }

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
    // The 36 vLLM points of the first four sources, with the vLLM profile's
    // serving host times, which were fitted on them and on the six kvcached
    // points (docs/serving.md, "Host time of the serving engine"): in-sample
    // figures, held at their November 2026 values (5.7%, 25.8%, 5.5%; the
    // first fit's were 5.3%, 24.7%, 7.6%) plus a margin; lowered as the
    // model improves, never raised to let a change pass. The six kvcached
    // points (Poisson and burst arrivals, added later) are held separately.
    const auto b = by_class(
        [](const std::string& id) {
            return !starts(id, "trtllm-") && !starts(id, "vllm-0.19-qwen3-") && !starts(id, "vllm-0.11-qwen3-8b-");
        },
        36);
    CHECK(b.n[0] == 12);
    CHECK(b.n[1] == 19);
    CHECK(b.n[2] == 5);
    CHECK(b.mape(0) <= 0.06);  // throughput
    CHECK(b.mape(1) <= 0.26);  // median-like: the 10% is not met
    CHECK(b.mape(2) <= 0.07);  // P99
}

TEST_CASE("the kvcached vLLM points (Poisson 16 req/s and 500 at once) stay within their guarded MAPE") {
    // docs/serving.md, "Validation status": 18.6% (throughput, 2 points) and
    // 21.6% (mean TTFT and TPOT, 4 points) in November 2026, plus a margin.
    const auto b = by_class([](const std::string& id) { return starts(id, "vllm-0.19-qwen3-"); }, 6);
    CHECK(b.n[0] == 2);
    CHECK(b.n[1] == 4);
    CHECK(b.mape(0) <= 0.20);  // throughput
    CHECK(b.mape(1) <= 0.23);  // mean TTFT and TPOT
}

TEST_CASE("the GPUStack vLLM points (Qwen3-8B, H100, ShareGPT, 4 clients) stay within their guarded MAPE") {
    // docs/serving.md, "Validation status": an unseen source, added after the
    // host times were fitted: 2.9% (throughput, 1 point) and 11.4% (median
    // TTFT and mean TPOT, 2 points) in November 2026, plus a margin.
    const auto b = by_class([](const std::string& id) { return starts(id, "vllm-0.11-qwen3-8b-"); }, 3);
    CHECK(b.n[0] == 1);
    CHECK(b.n[1] == 2);
    CHECK(b.mape(0) <= 0.05);  // throughput
    CHECK(b.mape(1) <= 0.13);  // median TTFT and mean TPOT
}

TEST_CASE("the disaggregated vLLM points (P2pNcclConnector, 1P1D on H100) stay within their guarded MAPE") {
    // tests/data/validation/serving-disagg.yaml, unseen (docs/serving.md,
    // "Validation of disaggregation"): mean and median TTFT and TPOT of one
    // run, 9.8% in November 2026 with the serial dispatch of vLLM's demo
    // proxy (15.5% without it), plus a margin.
    const auto b = by_class([](const std::string&) { return true; }, 4, "serving-disagg.yaml");
    CHECK(b.n[1] == 4);
    CHECK(b.mape(1) <= 0.11);
}

TEST_SUITE_END();
