// A measured router load, `routing: histogram(FILE)` (docs/moe.md section 2):
// hand-computed expert loads from a histogram (the shares, the one-copy-per-token
// cap, capacity dropping, the straggler under contiguous placement), the CSV
// reader's checks with their file:line messages, and a scenario that names one.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "sim/config/expert_histogram.h"
#include "sim/config/scenario.h"
#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/workload/moe.h"
#include "tests/test_util.h"

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim::workload;

namespace {

MoeRouting histogram(std::vector<double> weights, double cf = 0) {
    auto h = std::make_shared<ExpertHistogram>();
    h->file = "h.csv";
    h->weight = std::move(weights);
    h->line.assign(h->weight.size(), 1);
    h->row.assign(h->weight.size(), "");
    MoeRouting r;
    r.kind = MoeRouting::Kind::histogram;
    r.histogram = h;
    r.capacity_factor = cf;
    return r;
}

// A CSV file of this process's own with `text`; returns its path.
std::string csv(const std::string& name, const std::string& text) {
    const auto p = parasim_test::private_temp(name);
    std::ofstream(p) << text;
    return p.string();
}

// The message read_expert_histogram, then check_expert_histogram against a
// model of `experts` experts, raise for `text` ("no error" when none).
std::string error_of(const std::string& text, std::int64_t experts = 4) {
    const std::string path = csv("bad-histogram.csv", text);
    try {
        MoeRouting r;
        r.kind = MoeRouting::Kind::histogram;
        r.histogram = std::make_shared<const ExpertHistogram>(sim::config::read_expert_histogram(path));
        ModelSpec m;
        m.name = "m";
        m.experts = experts;
        sim::config::check_expert_histogram(r, m);
    } catch (const sim::ConfigError& e) {
        std::string what = e.what();
        // The path is this process's temp file: keep what follows its name.
        const auto at = what.find("bad-histogram.csv");
        return at == std::string::npos ? what : what.substr(at);
    }
    return "no error";
}

}  // namespace

TEST_CASE("histogram 3,1,1,0 over 4 experts, top-1, ep 2, 50 tokens a rank: 60, 20, 20, 0; rank 0 computes 80") {
    // R = ep x T x k = 100 copies; shares 3/5, 1/5, 1/5, 0. Rank 0 holds
    // experts 0 and 1 (contiguous placement): 80 tokens, rank 1 20.
    const ExpertLoad l = expert_load(4, 1, 2, 50, histogram({3, 1, 1, 0}));
    CHECK(l.routed == 100);
    CHECK(l.per_expert == std::vector<std::int64_t>{60, 20, 20, 0});
    CHECK(l.hot_rank == 0);
    CHECK(l.hot_tokens == 80);
    CHECK(l.hot_local == std::vector<std::int64_t>{60, 20});
    CHECK(l.dropped == 0);
    // Shares instead of counts: the same load (the weights are normalised).
    CHECK(expert_load(4, 1, 2, 50, histogram({0.6, 0.2, 0.2, 0})).per_expert == l.per_expert);
    CHECK(to_string(histogram({1})) == "histogram(h.csv)");
}

TEST_CASE("histogram of zipf's weights is zipf: the same shares, cap and rounding") {
    // 16 experts, top 4, ep 4, 300 tokens a rank: zipf(1.2)'s cap binds on expert 0.
    std::vector<double> w(16);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::pow(static_cast<double>(i + 1), -1.2);
    MoeRouting z;
    z.kind = MoeRouting::Kind::zipf;
    z.zipf_s = 1.2;
    const ExpertLoad a = expert_load(16, 4, 4, 300, z), b = expert_load(16, 4, 4, 300, histogram(w));
    CHECK(a.per_expert.front() == 1200);  // capped at ep x T
    CHECK(b.per_expert == a.per_expert);
    CHECK(b.hot_tokens == a.hot_tokens);
}

TEST_CASE("histogram: the hot experts' rank is the straggler, wherever they are") {
    // 0, 1, 1, 3: experts 2 and 3 (rank 1) get 20 + 60 = 80 of 100.
    const ExpertLoad l = expert_load(4, 1, 2, 50, histogram({0, 1, 1, 3}));
    CHECK(l.per_expert == std::vector<std::int64_t>{0, 20, 20, 60});
    CHECK(l.hot_rank == 1);
    CHECK(l.hot_tokens == 80);
    CHECK(l.hot_local == std::vector<std::int64_t>{20, 60});
}

TEST_CASE("histogram: no expert gets a token twice (cap ep x T), the excess water-fills the others") {
    // top-2: R = 200, cap 100. 3,1,1,0 asks 120, 40, 40, 0: expert 0 stops at
    // 100, the other 100 go 1 : 1 : 0 to experts 1, 2 (50 each).
    const ExpertLoad a = expert_load(4, 2, 2, 50, histogram({3, 1, 1, 0}));
    CHECK(a.per_expert == std::vector<std::int64_t>{100, 50, 50, 0});
    CHECK(a.hot_tokens == 150);
    // 1,0,0,0: expert 0 takes its 100; every weighted expert is at the cap,
    // so the other 100 copies (a token's second, distinct expert) spread
    // evenly over the three of weight 0: 33.3 each, the rounding unit to the
    // lowest index: 34, 33, 33. Rank 0: 134.
    const ExpertLoad b = expert_load(4, 2, 2, 50, histogram({1, 0, 0, 0}));
    CHECK(b.per_expert == std::vector<std::int64_t>{100, 34, 33, 33});
    CHECK(b.hot_tokens == 134);
    // Largest remainder: 1,1,1,0 of 100 is 33.3 each, the unit to expert 0.
    CHECK(expert_load(4, 1, 2, 50, histogram({1, 1, 1, 0})).per_expert == std::vector<std::int64_t>{34, 33, 33, 0});
}

TEST_CASE("histogram with capacity factor 1.0: C = 25, expert 0 keeps 25 of 60, rank 0 computes 45") {
    const ExpertLoad l = expert_load(4, 1, 2, 50, histogram({3, 1, 1, 0}, 1.0));
    CHECK(l.per_expert == std::vector<std::int64_t>{25, 20, 20, 0});
    CHECK(l.dropped == 35);
    CHECK(l.hot_tokens == 45);
}

TEST_CASE("histogram: expert_load refuses one that does not give every expert a load") {
    CHECK_THROWS_AS(expert_load(4, 1, 2, 50, histogram({1, 1, 1})), sim::ModelError);
    CHECK_THROWS_AS(expert_load(4, 1, 2, 50, histogram({0, 0, 0, 0})), sim::ModelError);
    MoeRouting none;
    none.kind = MoeRouting::Kind::histogram;
    CHECK_THROWS_AS(expert_load(4, 1, 2, 50, none), sim::ModelError);
}

TEST_CASE("routing: histogram(FILE) parses to its file; histogram() is an error") {
    double s = 0;
    std::string err, file;
    CHECK(parse_routing("histogram(loads/experts.csv)", s, err, &file) == MoeRouting::Kind::histogram);
    CHECK(err.empty());
    CHECK(file == "loads/experts.csv");
    parse_routing("histogram()", s, err, &file);
    CHECK(err.find("names no file") != std::string::npos);
    parse_routing("histogram", s, err, &file);
    CHECK(err.find("histogram(FILE)") != std::string::npos);
}

TEST_CASE("an expert histogram file: rows in any order, comments, blank lines, either header") {
    const std::string path =
        csv("good-histogram.csv", "# measured tokens per expert\nexpert,tokens\n2, 1\n\n0,3\n3,0\n1,1.0\n");
    const ExpertHistogram h = sim::config::read_expert_histogram(path);
    CHECK(h.weight == std::vector<double>{3, 1, 1, 0});
    CHECK(h.line == std::vector<int>{5, 7, 3, 6});
    CHECK(h.last_line == 7);
    const ExpertHistogram s =
        sim::config::read_expert_histogram(csv("share-histogram.csv", "expert,share\n0,0.5\n1,0.5\n"));
    CHECK(s.weight == std::vector<double>{0.5, 0.5});
    CHECK(error_of("expert,tokens\n1,2\n0,1\n2,0\n3,0\n") == "no error");
}

TEST_CASE("a bad expert histogram stops at its file:line with the row") {
    const std::string head = "expert,tokens\n";
    CHECK(error_of("expert,count\n0,1\n") ==
          "bad-histogram.csv:1:1: expected the header 'expert,tokens', 'expert,share', 'layer,expert,tokens' or "
          "'layer,expert,share', got 'expert,count'");
    CHECK(error_of("") ==
          "bad-histogram.csv:1:1: empty histogram: expected the header 'expert,tokens', 'expert,share', "
          "'layer,expert,tokens' or 'layer,expert,share' and rows");
    CHECK(error_of("# only a comment\nexpert,tokens\n") ==
          "bad-histogram.csv:2:1: the histogram has a header but no experts");
    CHECK(error_of(head + "0,1\n1,x\n") ==
          "bad-histogram.csv:3:1: row '1,x': 'x' is not a finite number >= 0 (the tokens or share of expert 1)");
    CHECK(error_of(head + "0,-1\n") ==
          "bad-histogram.csv:2:1: row '0,-1': '-1' is not a finite number >= 0 (the tokens or share of expert 0)");
    CHECK(error_of(head + "0,nan\n").find("bad-histogram.csv:2:1: row '0,nan': 'nan' is not a finite number") == 0);
    CHECK(error_of(head + "0,inf\n").find("bad-histogram.csv:2:1: row '0,inf': 'inf' is not a finite number") == 0);
    CHECK(error_of(head + "0,1e999\n").find("bad-histogram.csv:2:1: row '0,1e999'") == 0);
    CHECK(error_of(head + "0,1,2\n") == "bad-histogram.csv:2:1: row '0,1,2': expected 2 fields, got 3");
    // A line of 100 000 commas: counted, not split into 100 001 strings.
    CHECK(error_of(head + "0" + std::string(100000, ',') + "\n").find("expected 2 fields, got 100001") !=
          std::string::npos);
    CHECK(error_of(head + "0,1\n1,1\n0,2\n") ==
          "bad-histogram.csv:4:1: row '0,2': expert 0 has a row already, at line 2");
    CHECK(error_of(head + "x,1\n") ==
          "bad-histogram.csv:2:1: row 'x,1': expert 'x' is not a whole number from 0 to 999");
    CHECK(error_of(head + "-1,1\n").find("bad-histogram.csv:2:1: row '-1,1': expert '-1' is not") == 0);
    CHECK(error_of(head + "1.5,1\n").find("bad-histogram.csv:2:1: row '1.5,1': expert '1.5' is not") == 0);
    CHECK(error_of(head + "1000,1\n").find("bad-histogram.csv:2:1: row '1000,1': expert '1000' is not") == 0);
    // Against the model's 4 experts:
    CHECK(error_of(head + "0,1\n1,1\n2,1\n3,1\n4,1\n") ==
          "bad-histogram.csv:6:1: row '4,1': expert 4 is past the 4 experts of model 'm' (ids 0 to 3)");
    CHECK(error_of(head + "0,1\n2,1\n") ==
          "bad-histogram.csv:3:1: no row for experts 1, 3: model 'm' has 4 experts, each needs one row");
    CHECK(error_of(head + "0,0\n1,0\n2,0\n3,0\n") ==
          "bad-histogram.csv:5:1: the experts' loads sum to 0: the histogram routes no token");
    CHECK(error_of(head + "0,1e308\n1,1e308\n2,0\n3,0\n") ==
          "bad-histogram.csv:5:1: the experts' loads sum past the largest number");
}

TEST_CASE("an expert histogram must be a regular file within the input-bytes limit") {
    const auto dir = parasim_test::private_temp("histogram-dir");
    std::filesystem::create_directories(dir);
    CHECK_THROWS_AS(sim::config::read_expert_histogram(dir.string()), sim::ConfigError);
    std::filesystem::remove_all(dir);
    CHECK_THROWS_AS(sim::config::read_expert_histogram("/dev/null"), sim::ConfigError);
    CHECK_THROWS_AS(sim::config::read_expert_histogram(parasim_test::private_temp("absent.csv").string()),
                    sim::ConfigError);
    const auto saved = sim::limits().input_bytes;
    sim::limits().input_bytes = 16;
    CHECK_THROWS_AS(sim::config::read_expert_histogram(csv("big-histogram.csv", "expert,tokens\n0,1\n1,1\n2,1\n")),
                    sim::LimitError);
    sim::limits().input_bytes = saved;
}

TEST_CASE("a scenario names a histogram beside it; the model's experts check it") {
    const auto dir = parasim_test::private_temp("histogram-scenario");
    std::filesystem::create_directories(dir / "loads");
    std::string rows = "expert,tokens\n";
    for (int e = 0; e < 8; ++e) rows += fmt::format("{},{}\n", e, e == 0 ? 7 : 1);
    std::ofstream(dir / "loads" / "mixtral.csv") << rows;
    std::ofstream(dir / "loads" / "short.csv") << "expert,tokens\n0,1\n";
    const std::string scenario =
        "name: h\ncluster: dgx-h100\nmodel: mixtral-8x7b\n"
        "workload:\n  mode: inference\n  dtype: bf16\n  batch: 8\n  prompt_tokens: 512\n"
        "  output_tokens: 4\n  moe: {routing: histogram(loads/mixtral.csv)}\n"
        "strategies:\n  - {name: ep8, tp: 1, dp: 8, ep: 8}\n";
    std::ofstream(dir / "s.yaml") << scenario;
    const auto sc = sim::config::load_scenario((dir / "s.yaml").string(), {});
    REQUIRE(sc.workload.moe.kind == MoeRouting::Kind::histogram);
    CHECK(sc.workload.moe.histogram->weight == std::vector<double>{7, 1, 1, 1, 1, 1, 1, 1});
    CHECK(sc.workload.moe.histogram->file == (dir / "loads" / "mixtral.csv").string());
    std::ofstream(dir / "s.yaml") << parasim_test::replace_once(scenario, "mixtral.csv", "short.csv");
    const std::string err = parasim_test::config_error_of(
        [&](const std::string&) { sim::config::load_scenario((dir / "s.yaml").string(), {}); }, "");
    CHECK(err.find("short.csv:2:1: no row for experts 1, 2, 3, 4, 5, 6, 7: model 'mixtral-8x7b' has 8 experts") !=
          std::string::npos);
    std::filesystem::remove_all(dir);
}
