// overlap.two_batch through the serving loop (docs/serving.md, "Two-batch
// overlap"): a data-parallel-attention engine with the overlap serves
// prefilled requests; a rank of one sequence is not split, so its steps
// take what they take without the overlap; a rank of two is split and its
// steps change; a strategy whose serving engines are not DP attention's (a
// TP-2 replica) is refused at its line.
#include "sim/config/scenario.h"
#include "sim/core/error.h"
#include "sim/serve/serve_report.h"
#include "sim/serve/simulator.h"

#include "tests/serve/serve_fixture.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

TEST_SUITE_BEGIN("e2e");

using namespace sim;

namespace {

// 2 H200s, an MLA MoE model of 2 layers (the first dense), prefilled
// requests of `rows` (trace lines), a strategy of `strategy` (YAML lines,
// indented by 4); no software profile, host times off.
serve::ServeResult serve_trace(const std::string& rows, const std::string& strategy) {
    static int counter = 0;
    const auto dir = std::filesystem::temp_directory_path();
    const std::string tag = std::to_string(::getpid()) + "-" + std::to_string(counter++);
    const auto trace = dir / ("parasim-tbo-engine-" + tag + ".csv");
    const auto path = dir / ("parasim-tbo-engine-" + tag + ".yaml");
    {
        std::ofstream t(trace);
        t << "arrival_s,prompt_tokens,output_tokens\n" << rows;
        std::ofstream f(path);
        f << "name: tbo-engine\ncluster: h200-hgx\ngpus: 2\nmodel: {name: mini-mla-moe, layers: 2, hidden: 1024, "
             "heads: 8, ffn: 2048, ffn_kind: swiglu, vocab: 4096, max_seq: 8192, norm: rmsnorm, tied_embeddings: "
             "false, position: rope, bias: false, attention: {kind: mla, kv_lora_rank: 128, qk_nope_head_dim: 64, "
             "qk_rope_head_dim: 32, v_head_dim: 64}, moe: {experts: 8, top_k: 2, ffn: 512, first_dense_layers: 1}}\n"
             "workload:\n  mode: serving\n  dtype: bf16\n  serving:\n    arrivals: {process: trace, file: "
          << trace.string() << "}\n    prefilled: true\nstrategies:\n  - name: s\n"
          << strategy;
    }
    auto sc = config::load_scenario(path.string(), {});
    std::filesystem::remove(path);
    serve_test::no_host_times(sc);
    auto r = serve::simulate_serving(sc, sc.strategies.front(), {});
    std::filesystem::remove(trace);
    return r;
}

const std::string kDp2 = "    tp: 1\n    dp: 2\n    ep: 2\n    attention_dp: true\n";
const std::string kDp2Tbo = kDp2 + "    overlap: {two_batch: true}\n";

}  // namespace

TEST_CASE("serving two_batch: one sequence a rank is not split; two a rank are, and the steps change") {
    // One prefilled 1,024-token request a rank (round robin), 3 decode steps.
    const std::string one = "0,1024,4\n0,1024,4\n";
    const auto off1 = serve_trace(one, kDp2), on1 = serve_trace(one, kDp2Tbo);
    REQUIRE(on1.records.size() == 2);
    CHECK(on1.iterations == 3);
    CHECK(on1.records[0].finish_s == doctest::Approx(off1.records[0].finish_s).epsilon(1e-12));
    // Two a rank: each step's MoE layer runs as two halves of one sequence.
    const std::string two = "0,1024,4\n0,1024,4\n0,1024,4\n0,1024,4\n";
    const auto off2 = serve_trace(two, kDp2), on2 = serve_trace(two, kDp2Tbo);
    REQUIRE(on2.records.size() == 4);
    CHECK(on2.iterations == 3);
    CHECK(on2.records[0].finish_s != doctest::Approx(off2.records[0].finish_s).epsilon(1e-9));
}

TEST_CASE("serving two_batch: a tensor-parallel replica is refused at the strategy's line") {
    try {
        (void)serve_trace("0,1024,4\n", "    tp: 2\n    overlap: {two_batch: true}\n");
        FAIL("not refused");
    } catch (const ConfigError& e) {
        const std::string what = e.what();
        INFO(what);
        CHECK(what.find("data-parallel-attention engines") != std::string::npos);
        CHECK(what.find(".yaml:") != std::string::npos);
    }
}

TEST_SUITE_END();
