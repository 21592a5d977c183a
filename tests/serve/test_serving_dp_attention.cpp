// Data-parallel attention (strategy `attention_dp`, docs/serving.md "Data-parallel
// attention", docs/moe.md section 8) with answers known in advance: each rank's KV
// pool holds MLA's whole latent for its own requests only, so the engine holds dp
// pools; the ranks step in lockstep, so a rank with a short request waits for the
// rank with a long one; and the layouts SGLang does not run are refused.
#include "sim/config/scenario.h"
#include "sim/core/error.h"
#include "sim/hw/cost_model.h"
#include "sim/parallel/builder.h"
#include "sim/parallel/strategy.h"
#include "sim/serve/serve_report.h"
#include "sim/serve/simulator.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

TEST_SUITE_BEGIN("e2e");

using namespace sim;

namespace {

// A small MLA MoE model (DeepSeek-V3's blocks, scaled down): 2 layers, the
// first dense, MLA with a 128-wide latent and a 32-wide rope key, 8 experts top 2.
const std::string kModel =
    "{name: mini-mla-moe, layers: 2, hidden: 1024, heads: 8, ffn: 2048, ffn_kind: swiglu, vocab: 4096, "
    "max_seq: 8192, norm: rmsnorm, tied_embeddings: false, position: rope, bias: false, "
    "attention: {kind: mla, kv_lora_rank: 128, qk_nope_head_dim: 64, qk_rope_head_dim: 32, v_head_dim: 64}, "
    "moe: {experts: 8, top_k: 2, ffn: 512, first_dense_layers: 1}}";

// A serving scenario of `gpus` H200s running `strategy` (YAML lines of the
// strategy map, indented by 4) with the serving block's `arrivals` line;
// host times off so the answers stay the GPUs' own.
config::ScenarioSpec scenario(int gpus, const std::string& strategy, const std::string& arrivals,
                              const std::string& mode = "serving") {
    static int counter = 0;
    const auto path = std::filesystem::temp_directory_path() /
                      ("parasim-dp-attn-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".yaml");
    {
        std::ofstream f(path);
        f << "name: dpa\nsoftware: {name: vllm}\ncluster: h200-hgx\ngpus: " << gpus << "\nmodel: " << kModel
          << "\nworkload:\n  mode: " << mode << "\n  dtype: bf16\n";
        if (mode == "serving") f << "  serving:\n" << arrivals << "    max_tokens_per_iteration: 4096\n";
        else if (mode == "training") f << "  seq_len: 128\n  global_batch: 8\n";
        else f << "  batch: 9\n  prompt_tokens: 128\n  output_tokens: 8\n";
        f << "strategies:\n  - name: s\n" << strategy;
    }
    auto sc = config::load_scenario(path.string(), {});
    std::filesystem::remove(path);
    sc.profile.serving_sequence_overhead = Time{};
    sc.profile.serving_request_overhead = Time{};
    sc.profile.serving_token_overhead = Time{};
    sc.profile.serving_request_latency = Time{};
    return sc;
}

const std::string kFewRequests =
    "    arrivals: {process: fixed, rate: 100}\n    prompt_tokens: {distribution: fixed, value: 64}\n"
    "    output_tokens: {distribution: fixed, value: 4}\n    requests: 4\n";
const std::string kDp2 = "    tp: 1\n    dp: 2\n    ep: 2\n    attention_dp: true\n";

// The memory a rank's KV pool had: 0.9 of HBM less weights and workspace.
double left_for_kv(const config::ScenarioSpec& sc, const serve::ServeResult& r) {
    return 0.9 * sc.gpu.memory_capacity.as_double() - r.pool.memory.weights - r.pool.memory.workspace -
           r.pool.non_torch_bytes;
}

}  // namespace

TEST_CASE("attention_dp: each rank's pool holds the whole MLA latent of its own requests; the engine holds dp pools") {
    const auto sc = scenario(2, kDp2, kFewRequests);
    const auto r = serve::simulate_serving(sc, sc.strategies.front(), {});
    CHECK(r.attention_dp == 2);
    CHECK(r.replicas == 2);  // one rank a GPU, each with its own scheduler and pool
    // 2 layers x (kv_lora_rank 128 + rope 32) x 2 bytes (BF16) = 640 bytes a token,
    // as under TP (MLA's one latent is never split over ranks).
    CHECK(r.pool.bytes_per_token == doctest::Approx(2.0 * (128 + 32) * 2));
    CHECK(r.pool.blocks == static_cast<std::int64_t>(std::floor(left_for_kv(sc, r) / (16 * 640.0))));
    // TP 2 on the same GPUs: one replica whose pool (the same blocks on both
    // GPUs) is the engine's whole capacity.
    const auto tp = scenario(2, "    tp: 2\n", kFewRequests);
    const auto t = serve::simulate_serving(tp, tp.strategies.front(), {});
    CHECK(t.replicas == 1);
    CHECK(t.pool.bytes_per_token == doctest::Approx(2.0 * (128 + 32) * 2));
    CHECK(t.pool.blocks == static_cast<std::int64_t>(std::floor(left_for_kv(tp, t) / (16 * 640.0))));
    // Tokens the engine can cache: dp x a rank's blocks against one TP pool.
    // The small model's weights are a sliver of HBM, so the ratio is dp = 2 to
    // within the weights' share (each attention rank holds all the attention
    // weights, TP ranks half).
    const double dp_tokens = 2.0 * static_cast<double>(r.pool.blocks) * 16;
    const double tp_tokens = static_cast<double>(t.pool.blocks) * 16;
    CHECK(dp_tokens / tp_tokens == doctest::Approx(2.0).epsilon(0.01));
}

TEST_CASE("attention_dp: the ranks step in lockstep, a short request waits for the long one on the other rank") {
    // Two requests at t = 0 on an engine of two ranks: round robin sends the
    // 2,000-token prompt to rank 0 and the 16-token one to rank 1. Each wants
    // one token, so each ends with its prefill step; in lockstep the step ends
    // when the slower rank's batch does: t(2000-token prefill) for both.
    const auto dir = std::filesystem::temp_directory_path();
    const auto trace = dir / ("parasim-dp-attn-" + std::to_string(::getpid()) + ".csv");
    const auto alone = dir / ("parasim-dp-attn-alone-" + std::to_string(::getpid()) + ".csv");
    {
        std::ofstream f(trace);
        f << "arrival_s,prompt_tokens,output_tokens\n0,2000,1\n0,16,1\n";
        std::ofstream g(alone);
        g << "arrival_s,prompt_tokens,output_tokens\n0,2000,1\n";
    }
    const auto both = scenario(2, kDp2, "    arrivals: {process: trace, file: " + trace.string() + "}\n");
    const auto one = scenario(2, kDp2, "    arrivals: {process: trace, file: " + alone.string() + "}\n");
    const auto rb = serve::simulate_serving(both, both.strategies.front(), {});
    const auto ro = serve::simulate_serving(one, one.strategies.front(), {});
    std::filesystem::remove(trace);
    std::filesystem::remove(alone);
    REQUIRE(rb.records.size() == 2);
    CHECK(rb.records[0].replica == 0);
    CHECK(rb.records[1].replica == 1);
    CHECK(rb.records[1].finish_s == doctest::Approx(rb.records[0].finish_s));
    // The long rank's step is the same whether the other rank is idle or not
    // (the symmetric plan times each rank's batch on every rank).
    CHECK(rb.records[0].finish_s == doctest::Approx(ro.records[0].finish_s));
    CHECK(rb.iterations == 1);
}

TEST_CASE("attention_dp in a static batch: a rank caches its own sequences, the step runs the largest rank's batch") {
    // batch 9 over dp 2: the ranks hold 5 and 4 sequences; every rank is
    // simulated with the largest, 5, since the MoE layers' all-to-alls make
    // the others wait for it. Its KV cache: 2 layers x 5 sequences x
    // (128 + 8) tokens x (128 + 32) x 2 bytes = 435 200 bytes. Under TP 2 each
    // GPU caches the whole latent of all 9: 2 x 9 x 136 x 320 = 783 360.
    const auto cm = hw::make_cost_model("roofline");
    const auto dp = scenario(2, kDp2, "", "inference");
    const auto b = parallel::build_plan(dp, dp.strategies.front(), *cm, parallel::BuildOptions{});
    CHECK(b.strategy.microbatch_sizes == std::vector<std::int64_t>{5});
    CHECK(b.memory.breakdown.kv_cache == doctest::Approx(435200.0));
    const auto tp = scenario(2, "    tp: 2\n", "", "inference");
    const auto t = parallel::build_plan(tp, tp.strategies.front(), *cm, parallel::BuildOptions{});
    CHECK(t.memory.breakdown.kv_cache == doctest::Approx(783360.0));
}

TEST_CASE("attention_dp: the layouts SGLang does not run are refused at the strategy") {
    const auto refused = [](int gpus, const std::string& strategy, const std::string& mode, const std::string& why) {
        CAPTURE(strategy);
        const auto sc = scenario(gpus, strategy, kFewRequests, mode);
        try {
            if (mode == "serving") serve::simulate_serving(sc, sc.strategies.front(), {});
            else (void)parallel::resolve_degrees(sc, sc.strategies.front());
            FAIL("not refused");
        } catch (const ConfigError& e) {
            CHECK(std::string(e.what()).find(why) != std::string::npos);
        }
    };
    refused(4, "    tp: 2\n    dp: 2\n    ep: 2\n    attention_dp: true\n", "serving", "tp=2");
    refused(2, "    tp: 1\n    dp: 2\n    ep: 1\n    attention_dp: true\n", "serving", "ep = dp");
    refused(2, "    tp: 1\n    dp: 2\n    ep: 2\n    attention_dp: true\n", "training", "not training");
    refused(4, "    tp: 1\n    pp: 2\n    dp: 2\n    ep: 2\n    attention_dp: true\n", "inference", "pp=2");
}

TEST_SUITE_END();
