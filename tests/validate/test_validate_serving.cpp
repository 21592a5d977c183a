// parasim validate, serving kind (docs/validation.md §2, "Serving points"):
// the loader reads the scenario's own serving block, the measured statistic
// and the max_seq default, rejects malformed points at file:line:column,
// and a serving point simulates exactly as the same workload under
// `parasim serve` (the metric and statistic it names, bit for bit).
#include "sim/config/scenario.h"
#include "sim/serve/serve_report.h"
#include "sim/serve/simulator.h"
#include "sim/validate/dataset.h"
#include "sim/validate/translate.h"
#include "sim/validate/validate.h"

#include "tests/test_util.h"

#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

TEST_SUITE_BEGIN("unit");

using sim::validate::Kind;
using sim::validate::Metric;
using sim::validate::Statistic;

namespace {

// A small model (2 layers) so that the simulations take milliseconds.
const char* const kModel =
    "{layers: 2, hidden: 1024, heads: 16, kv_heads: 4, ffn: 2816, ffn_kind: swiglu, vocab: 32000";

const std::string kServing = R"(
      arrivals: {process: poisson, rate: 40}
      prompt_tokens: {distribution: uniform, min: 64, max: 1024}
      output_tokens: {distribution: uniform, min: 8, max: 64}
      requests: 40
      scheduler: chunked-prefill
      max_batch: 64)";

std::string dataset_text(const std::string& metric) {
    return std::string(R"(points:
- id: serve-small
  kind: serving
  source: test
  hardware: {gpu: h100-sxm, gpus: 1, gpus_per_node: 8, intra_node: nvswitch}
  model: )") +
           kModel + R"(}
  workload:
    dtype: bf16
    serving:)" +
           kServing + R"(
  parallelism: {tp: 1}
  software: {name: vllm, version: '0.6.0'}
  measured: {metric: )" +
           metric + R"(, value: 10}
)";
}

sim::validate::Dataset parse(const std::string& text) {
    return sim::validate::parse_dataset(sim::config::load_string(text, "data.yaml"));
}

std::string error_of(const std::string& text) {
    return parasim_test::config_error_of([](const std::string& t) { parse(t); }, text);
}

constexpr auto replace = &parasim_test::replace_once;

}  // namespace

TEST_CASE("validate serving: a point carries the scenario's serving block and a measured statistic") {
    const auto d = parse(dataset_text("ttft_ms, statistic: p99"));
    REQUIRE(d.points.size() == 1);
    const auto& p = d.points[0];
    CHECK(p.kind == Kind::serving);
    CHECK(p.metric == Metric::ttft_ms);
    CHECK(p.statistic == Statistic::p99);
    REQUIRE(p.workload.serving);
    CHECK(p.workload.serving->rate == 40);
    CHECK(p.workload.serving->requests == 40);
    CHECK(p.workload.serving->scheduler->name() == "chunked-prefill");
    CHECK(p.workload.serving->prompt.max == 1024);
    // max_seq defaults to the longest sequence the lengths allow: 1024 + 64.
    CHECK(p.model.max_seq == 1088);
    CHECK(p.software.name == "vllm");
    // A throughput has no statistic.
    CHECK(parse(dataset_text("tokens_per_s")).points[0].statistic == Statistic::none);
    CHECK(parse(dataset_text("requests_per_s")).points[0].metric == Metric::requests_per_s);
}

TEST_CASE("validate serving: malformed serving points are errors at file:line:column") {
    CHECK(error_of(dataset_text("ttft_ms")) ==
          "data.yaml:18:13: points[0].measured: a serving latency (ttft_ms) needs 'statistic: p50 | p90 | p99 | mean'");
    CHECK(error_of(dataset_text("tokens_per_s, statistic: p50")) ==
          "data.yaml:18:47: points[0].measured.statistic: tokens_per_s is a throughput over the run: no statistic");
    CHECK(error_of(dataset_text("tpot_ms, statistic: p95")).find("'p95'") != std::string::npos);
    CHECK(error_of(dataset_text("iteration_s")).find("is not a metric of a serving point") != std::string::npos);
    // The serving block is the scenario's, with its checks.
    CHECK(error_of(replace(dataset_text("tokens_per_s"), "rate: 40", "rate: 0")).find("data.yaml:10:") == 0);
    CHECK(error_of(replace(dataset_text("tokens_per_s"), "scheduler: chunked-prefill", "scheduler: chunky"))
              .find("chunked-prefill") != std::string::npos);
    // Unbounded lengths need the model's max_seq.
    const std::string lognormal = replace(dataset_text("tokens_per_s"), "{distribution: uniform, min: 64, max: 1024}",
                                          "{distribution: lognormal, mean: 300, sigma: 0.5}");
    CHECK(error_of(lognormal).find("give the model's max_seq") != std::string::npos);
    CHECK(parse(replace(lognormal, "vocab: 32000}", "vocab: 32000, max_seq: 4096}")).points[0].model.max_seq == 4096);
    // Serving fields belong to serving points.
    const std::string in_inference =
        replace(replace(dataset_text("tokens_per_s"), "kind: serving", "kind: inference"), "dtype: bf16",
                "dtype: bf16\n    batch: 1\n    prompt_tokens: 8\n    output_tokens: 8");
    CHECK(error_of(in_inference).find("unknown key 'points[0].workload.serving'") != std::string::npos);
}

TEST_CASE("validate serving: a point simulates exactly as the same workload under parasim serve") {
    // The same workload as a scenario: the cluster the translation copies its
    // links from (dgx-h100), the same model shapes and max_seq, the same block.
    std::string block = kServing;  // its keys two spaces less deep than in the dataset
    for (std::size_t at = 0; (at = block.find("\n      ", at)) != std::string::npos; at += 5) block.erase(at + 1, 2);
    const std::string scenario = std::string("name: s\nsoftware: {name: vllm}\ncluster: dgx-h100\ngpus: 1\nmodel: ") +
                                 kModel +
                                 ", name: m, max_seq: 1088, norm: rmsnorm, position: rope, bias: false, "
                                 "tied_embeddings: false}\nworkload:\n  mode: serving\n  dtype: bf16\n  serving:" +
                                 block + "\nstrategies:\n  - {name: tp1, tp: 1}\n";
    const auto file =
        std::filesystem::temp_directory_path() / ("parasim-validate-serving-" + std::to_string(::getpid()) + ".yaml");
    {
        std::ofstream out(file);
        out << scenario;
    }
    const auto sc = sim::config::load_scenario(file.string(), {});
    std::filesystem::remove(file);
    const auto result = sim::serve::simulate_serving(sc, sc.strategies.front(), {});
    const auto s = sim::serve::summarize(sc, result);
    REQUIRE(s.measured == 40);
    // The lengths vary, so the statistics differ and picking the wrong one shows.
    REQUIRE(s.ttft_ms.p99 > s.ttft_ms.p50);
    REQUIRE(s.tpot_ms.p99 > s.tpot_ms.p50);
    const struct {
        const char* measured;
        double expect;
    } cases[] = {
        {"tokens_per_s", s.output_tokens_per_s},      {"tokens_per_s_per_gpu", s.output_tokens_per_s},
        {"requests_per_s", s.requests_per_s},         {"ttft_ms, statistic: p50", s.ttft_ms.p50},
        {"ttft_ms, statistic: p99", s.ttft_ms.p99},   {"tpot_ms, statistic: p90", s.tpot_ms.p90},
        {"tpot_ms, statistic: mean", s.tpot_ms.mean}, {"e2e_ms, statistic: p99", s.e2e_ms.p99},
    };
    for (const auto& c : cases) {
        CAPTURE(c.measured);
        const auto r = sim::validate::validate(parse(dataset_text(c.measured)), {});
        REQUIRE(r.outcomes.size() == 1);
        REQUIRE_MESSAGE(!r.outcomes[0].skipped, r.outcomes[0].reason);
        CHECK(r.outcomes[0].simulated == c.expect);  // bit for bit: the same engine
        CHECK(r.outcomes[0].error == doctest::Approx((c.expect - 10) / 10));
    }
}

TEST_CASE("validate serving: serving points have their own MAPE row, JSON member and statistic") {
    sim::validate::Report r;
    const auto add = [&](const char* id, Kind k, Metric m, Statistic st, double err) {
        sim::validate::Outcome o;
        o.id = id;
        o.kind = k;
        o.metric = m;
        o.statistic = st;
        o.error = err;
        r.outcomes.push_back(o);
    };
    add("t", Kind::training, Metric::iteration_s, Statistic::none, 0.02);
    add("s1", Kind::serving, Metric::ttft_ms, Statistic::p99, -0.3);
    add("s2", Kind::serving, Metric::tokens_per_s, Statistic::none, 0.1);
    sim::validate::summarise(r);
    const auto& s = r.kinds[static_cast<std::size_t>(Kind::serving)];
    CHECK(s.simulated == 2);
    CHECK(*s.mape == doctest::Approx(0.2));
    CHECK(s.worst_id == "s1");
    CHECK(*r.kinds[static_cast<std::size_t>(Kind::training)].mape == doctest::Approx(0.02));
    const YAML::Node j = YAML::Load(sim::validate::format_json(r));
    CHECK(j["mape"]["serving"].as<double>() == doctest::Approx(0.2));
    CHECK(j["counts"]["serving"]["simulated"].as<int>() == 2);
    CHECK(j["points"][1]["statistic"].as<std::string>() == "p99");
    CHECK_FALSE(j["points"][2]["statistic"]);
    const std::string table = sim::validate::format_table(r);
    CHECK(table.find("ttft_ms p99") != std::string::npos);
    CHECK(table.find("serving / unstated") != std::string::npos);
}

TEST_CASE("validate serving: --scenarios writes a serving point as a scenario that parasim serve runs identically") {
    namespace fs = std::filesystem;
    // A trace beside the dataset (read relative to it), the scenario in another folder.
    const fs::path dir = fs::temp_directory_path() / ("parasim-validate-serving-" + std::to_string(::getpid()));
    fs::create_directories(dir / "out");
    {
        std::ofstream trace(dir / "trace.csv");
        trace << "arrival_s,prompt_tokens,output_tokens\n0.0,300,20\n0.01,900,40\n0.02,120,8\n0.5,600,30\n";
        std::ofstream data(dir / "data.yaml");
        data << replace(replace(dataset_text("ttft_ms, statistic: p99"), "arrivals: {process: poisson, rate: 40}",
                                "arrivals: {process: trace, file: trace.csv}"),
                        "      prompt_tokens: {distribution: uniform, min: 64, max: 1024}\n"
                        "      output_tokens: {distribution: uniform, min: 8, max: 64}\n"
                        "      requests: 40\n",
                        "");
    }
    const auto d = sim::validate::load_dataset((dir / "data.yaml").string());
    const auto& p = d.points.at(0);
    CHECK(p.model.max_seq == 940);  // the trace's longest row
    sim::config::GpuCatalog gpus;
    const sim::validate::ShippedClusters shipped;
    const auto setup = sim::validate::translate(p, gpus, shipped);
    REQUIRE_FALSE(setup.skip);
    const fs::path file = dir / "out" / "s.yaml";
    {
        std::ofstream out(file);
        out << sim::validate::scenario_yaml(p, setup);
    }
    const auto sc = sim::config::load_scenario(file.string(), {});
    const auto result = sim::serve::simulate_serving(sc, sc.strategies.front(), {});
    const double via_file = sim::serve::summarize(sc, result).ttft_ms.p99;
    const auto r = sim::validate::validate(d, {});
    fs::remove_all(dir);
    REQUIRE(r.outcomes.size() == 1);
    REQUIRE_MESSAGE(!r.outcomes[0].skipped, r.outcomes[0].reason);
    CHECK(result.records.size() == 4);
    CHECK(r.outcomes[0].simulated == via_file);  // bit for bit
}

TEST_SUITE_END();
