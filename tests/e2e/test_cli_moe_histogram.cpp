// End-to-end: `parasim run` on a scenario whose MoE routing is a measured
// histogram (docs/moe.md section 2): a flat histogram is the balanced run to
// the byte, a hot expert makes its rank the straggler, and a bad row stops
// the run with exit 2 at the CSV's file:line.
#include "tests/e2e/cli_process.h"

#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <string>

TEST_SUITE_BEGIN("e2e");  // ctest label (docs/testing.md); a case may override it

namespace {

// Mixtral 8x7B prefill of 8 x 512 tokens over ep 8 (one expert a GPU),
// routed as `routing`; the histogram file `rows` beside it as loads/h.csv.
std::filesystem::path write_scenario(const std::filesystem::path& dir, const std::string& routing,
                                     const std::string& rows) {
    std::filesystem::create_directories(dir / "loads");
    std::ofstream(dir / "loads" / "h.csv") << rows;
    const auto path = dir / "s.yaml";
    std::ofstream(path) << "name: h\ncluster: dgx-h100\nmodel: mixtral-8x7b\n"
                           "workload:\n  mode: inference\n  dtype: bf16\n  batch: 8\n  prompt_tokens: 512\n"
                           "  output_tokens: 4\n  moe: {routing: "
                        << routing << "}\nstrategies:\n  - {name: ep8, tp: 1, dp: 8, ep: 8}\n";
    return path;
}

std::string rows(int hot) {
    std::string s = "expert,tokens\n";
    for (int e = 0; e < 8; ++e) s += std::to_string(e) + "," + std::to_string(e == 0 ? hot : 1) + "\n";
    return s;
}

double ttft_ms(const std::string& json) { return YAML::Load(json)["runs"][0]["metrics"]["ttft_ms"].as<double>(); }

}  // namespace

TEST_CASE("parasim run with routing: histogram(FILE): flat is balanced, a hot expert slows the prefill") {
    using parasim_e2e::parasim;
    const auto dir = parasim_e2e::scratch("moe-histogram");
    const auto balanced = parasim("run " + write_scenario(dir, "balanced", rows(1)).string() + " --format json");
    REQUIRE(balanced.code == 0);
    // 1 each: R = 8 x 512 x 2 = 8192 copies, 1024 an expert, as balanced.
    const auto flat =
        parasim("run " + write_scenario(dir, "histogram(loads/h.csv)", rows(1)).string() + " --format json");
    REQUIRE(flat.code == 0);
    CHECK(flat.out == balanced.out);
    // 8, 1, ..., 1: expert 0 asks 8/15 of 8192 = 4369, capped at the group's
    // 4096 tokens: GPU 0 computes 4x the balanced 1024 tokens and paces the layer.
    const auto hot =
        parasim("run " + write_scenario(dir, "histogram(loads/h.csv)", rows(8)).string() + " --format json");
    REQUIRE(hot.code == 0);
    CHECK(ttft_ms(hot.out) > 2.0 * ttft_ms(balanced.out));
    // A bad row: exit 2, one line naming the CSV's line and the row.
    const auto bad =
        parasim("run " + write_scenario(dir, "histogram(loads/h.csv)", "expert,tokens\n0,1\n1,oops\n").string());
    CHECK(bad.code == 2);
    CHECK(bad.out.empty());
    CHECK(bad.err.find("h.csv:3:1: row '1,oops': 'oops' is not a finite number >= 0") != std::string::npos);
    std::filesystem::remove_all(dir);
}

namespace {

// `layer,expert,tokens` for Mixtral's 32 MoE layers: expert 0 weighs `hot`
// in layers below `hot_layers`, every other weight 1.
std::string layer_rows(int hot, int hot_layers) {
    std::string s = "layer,expert,tokens\n";
    for (int l = 0; l < 32; ++l)
        for (int e = 0; e < 8; ++e)
            s += std::to_string(l) + "," + std::to_string(e) + "," +
                 std::to_string(e == 0 && l < hot_layers ? hot : 1) + "\n";
    return s;
}

}  // namespace

TEST_CASE("parasim run with a per-layer histogram: flat is balanced to the byte, each hot layer adds its own time") {
    using parasim_e2e::parasim;
    const auto dir = parasim_e2e::scratch("moe-histogram-layers");
    const auto run = [&](const std::string& routing, const std::string& rows) {
        const auto r = parasim("run " + write_scenario(dir, routing, rows).string() + " --format json");
        REQUIRE(r.code == 0);
        return r.out;
    };
    const std::string balanced = run("balanced", rows(1));
    CHECK(run("histogram(loads/h.csv)", layer_rows(1, 32)) == balanced);
    // Every layer hot (8, 1, ..., 1: expert 0 capped at the group's 4096
    // tokens, as the one-histogram case above) is the one histogram's run.
    const std::string hot = run("histogram(loads/h.csv)", layer_rows(8, 32));
    CHECK(hot == run("histogram(loads/h.csv)", rows(8)));
    // Half the layers hot: each layer's exchanges and experts take their own
    // load, so the prefill's excess over balanced is half the all-hot one's
    // (the layers run one after another; replayed exchanges of one size are
    // not taken for the other's).
    const double flat = ttft_ms(balanced), all = ttft_ms(hot);
    const double half = ttft_ms(run("histogram(loads/h.csv)", layer_rows(8, 16)));
    CHECK(half - flat == doctest::Approx((all - flat) / 2).epsilon(0.01));
    std::filesystem::remove_all(dir);
}
