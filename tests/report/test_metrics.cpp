// Report metrics against bounds a user can compute by hand.
#include "sim/config/data_dir.h"
#include "sim/config/scenario.h"
#include "sim/report/metrics.h"
#include "sim/report/runner.h"
#include "sim/workload/footprint.h"
#include "sim/workload/model.h"
#include "sim/workload/operators.h"

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim;

namespace {
const std::string kRoot = sim::config::data_dir();

config::ScenarioSpec load(const std::string& rel, const std::vector<std::string>& sets) {
    std::vector<config::Override> ov;
    for (const auto& s : sets) ov.push_back(config::parse_override(s));
    return config::load_scenario(kRoot + rel, ov);
}
}  // namespace

TEST_CASE("decode throughput never exceeds the HBM roofline: weights and KV cache read once per step at peak") {
    struct Case {
        const char* scenario;
        std::vector<std::string> sets;
    };
    const std::vector<Case> cases = {
        {"/scenarios/partitioning-16xh100-feasible.yaml", {}},
        {"/scenarios/partitioning-16xh100-feasible.yaml", {"workload.batch=64"}},
        {"/scenarios/partitioning-16xh100-feasible.yaml", {"model=dense16-h1024", "workload.batch=1"}},
        {"/scenarios/partitioning-16xh100-feasible.yaml", {"model=llama3-8b", "workload.batch=32"}},
        {"/scenarios/partitioning-16xh100-feasible.yaml",
         {"model=llama3-70b", "workload.batch=8", "cluster=dgx-h100", "gpus=8", "strategies=[{name: tp8, tp: 8}]"}},
    };
    for (const auto& c : cases) {
        const auto sc = load(c.scenario, c.sets);
        const auto& m = sc.model;
        workload::OperatorOptions opt;
        opt.precision = sc.workload.precision;
        const double weights = workload::count_parameters(m).total * hw::bytes_per_element(opt.precision.weights);
        const std::int64_t context = sc.workload.prompt_tokens + sc.workload.output_tokens / 2;
        const double kv =
            static_cast<double>(m.layers) * workload::layer_kv_bytes(m, sc.workload.batch, context, opt).as_double();
        const double step_floor_s = (weights + kv) / (sc.gpus * sc.gpu.memory_bandwidth.bytes_per_s);
        const double bound_tps = static_cast<double>(sc.workload.batch) / step_floor_s;
        for (const auto& s : sc.strategies) {
            const auto run = report::run_strategy(sc, s, {});
            REQUIRE(run.metrics.feasible);
            const double decode_tps = sc.workload.batch / (*run.metrics.tpot_ms / 1e3);
            INFO(sc.name << " " << m.name << " " << s.name << ": decode " << decode_tps << " tokens/s, roofline "
                         << bound_tps);
            CHECK(decode_tps <= bound_tps);
            CHECK(*run.metrics.tokens_per_s <= bound_tps);
        }
    }
}

TEST_CASE("a starved input pipeline shows up as idle GPU time") {
    const std::string s = "/tests/data/scenarios/pipeline-4stage-training.yaml";
    const auto fed = load(s, {"strategies=[{name: one, pp: 4}]"});
    const auto starved = load(s, {"strategies=[{name: one, pp: 4}]", "workload.host_time_per_batch=500 ms"});
    const auto a = report::run_strategy(fed, fed.strategies.front(), {});
    const auto b = report::run_strategy(starved, starved.strategies.front(), {});
    // Each micro-batch's forward waits for the host: 8 micro-batches x 500 ms
    // at least, far above the fed iteration.
    CHECK(*b.metrics.iteration_ms >= 8 * 500.0);
    CHECK(*b.metrics.frac_idle > *a.metrics.frac_idle + 0.3);
    CHECK(*b.metrics.iteration_ms > *a.metrics.iteration_ms);
}

namespace {
// Reads a gnuplot single-quoted literal the way gnuplot's scanner does ('' is a
// quote, a lone ' ends it) and returns its content and where it ended.
std::pair<std::string, std::size_t> read_gnuplot_literal(const std::string& s) {
    std::string content;
    std::size_t i = 1;
    for (; i < s.size(); ++i) {
        if (s[i] != '\'') content += s[i];
        else if (i + 1 < s.size() && s[i + 1] == '\'') content += s[i++];
        else break;
    }
    return {content, i};
}
}  // namespace

TEST_CASE("gnuplot_string keeps any text inside one literal: quotes, backslashes, newlines and system( cannot end it") {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"plain", "plain"},
        {"x'; system(\"touch MARK\"); print '", "x'; system(\"touch MARK\"); print '"},
        {"'", "'"},
        {"''", "''"},
        {"a\\", "a\\"},
        {"\\'", "\\'"},
        {"line\nsystem(\"id\")\n", "line system(\"id\") "},
        {"cr\r\ttab", "cr  tab"},
        {"`id` @macro \"dq\"", "`id` @macro \"dq\""},
        {std::string("nul\0x", 5), "nul x"},
        {"", ""},
    };
    for (const auto& [text, shown] : cases) {
        const std::string lit = report::gnuplot_string(text);
        CAPTURE(lit);
        REQUIRE(lit.size() >= 2);
        CHECK(lit.front() == '\'');
        const auto [content, end] = read_gnuplot_literal(lit);
        CHECK(end == lit.size() - 1);  // the literal ends at its last character, not before
        CHECK(content == shown);
        for (const char c : lit) CHECK(static_cast<unsigned char>(c) >= 0x20);
    }
}

TEST_CASE("json_string writes valid UTF-8 JSON for any bytes: bad sequences become U+FFFD, good ones stay") {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"plain", "\"plain\""},
        {"q\"b\\n\n", "\"q\\\"b\\\\n\\n\""},
        {"\x01", "\"\\u0001\""},
        {"caf\xc3\xa9", "\"caf\xc3\xa9\""},            // é, 2 bytes
        {"\xe2\x82\xac", "\"\xe2\x82\xac\""},          // €, 3 bytes
        {"\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\""},  // 😀, 4 bytes
        {"a\xff"
         "b",
         "\"a\\ufffdb\""},                                         // never valid
        {"\xc3", "\"\\ufffd\""},                                   // truncated
        {"\xc0\xaf", "\"\\ufffd\\ufffd\""},                        // overlong '/'
        {"\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""},             // a UTF-16 surrogate
        {"\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""},  // above U+10FFFF
    };
    for (const auto& c : cases) {  // (no structured binding: clang 14 cannot capture one in CAPTURE)
        CAPTURE(c.first);
        CHECK(report::json_string(c.first) == c.second);
    }
}

TEST_CASE("csv_field quotes by RFC 4180: only fields with a comma, quote or line break, quotes doubled") {
    CHECK(report::csv_field("tp8-pp2") == "tp8-pp2");
    CHECK(report::csv_field("") == "");
    CHECK(report::csv_field("[1, 2]") == "\"[1, 2]\"");
    CHECK(report::csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
    CHECK(report::csv_field("two\nlines") == "\"two\nlines\"");
    CHECK(report::csv_field("cr\r") == "\"cr\r\"");
}

TEST_CASE("the run table marks ratios better or worse by the metric's direction, flags tight memory, says 1 GPU") {
    auto sc = load("/tests/data/scenarios/one-layer-tp2.yaml", {"gpus=1", "strategies[0].tp=1"});
    // (Strategy names via std::string(n, c): GCC 12's -Wrestrict misfires on
    // assigning short literals here.)
    report::RunMetrics a, b;
    a.strategy = std::string(1, 'a');
    b.strategy = std::string(1, 'b');
    a.gpus = b.gpus = 1;
    a.memory.capacity = b.memory.capacity = Bytes{100};
    a.memory.breakdown.weights = 50;  // 50% of the GPU
    b.memory.breakdown.weights = 95;  // 95%: above the 90% planning share
    a.tokens_per_s = 100;
    b.tokens_per_s = 200;  // higher is better
    a.ttft_ms = 10;
    b.ttft_ms = 20;  // lower is better
    a.gpu_busy = 0.5;
    b.gpu_busy = 0.8;  // neither
    const std::string t = report::format_table(sc, {a, b});
    CAPTURE(t);
    CHECK(t.find("(1 GPU of") != std::string::npos);
    const auto line = [&](const std::string& label) {
        const auto at = t.find(label);
        REQUIRE(at != std::string::npos);
        return t.substr(at, t.find('\n', at) - at);
    };
    CHECK(line("tokens/s").find("2.00x better") != std::string::npos);
    CHECK(line("TTFT").find("2.00x worse") != std::string::npos);
    CHECK(line("memory per GPU").find("1.90x worse") != std::string::npos);
    CHECK(line("GPU busy").find("1.60x") != std::string::npos);
    CHECK(line("GPU busy").find("better") == std::string::npos);
    CHECK(line("GPU busy").find("worse") == std::string::npos);
    CHECK(line("b: memory is tight").find("(95%)") != std::string::npos);
    CHECK(t.find("a: memory is tight") == std::string::npos);
}
TEST_SUITE_END();
