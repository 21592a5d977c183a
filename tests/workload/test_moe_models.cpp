// MoE-era models: parameter counts of the shipped DeepSeek-V3, Qwen2.5 and
// Qwen3 files against their published totals (each tolerance worked out in
// the case), and the Hugging Face loader for their architectures giving
// the same counts as the shipped files.
#include <doctest/doctest.h>
#include "sim/config/data_dir.h"

#include <string>

#include "sim/config/model_loader.h"
#include "sim/workload/footprint.h"
#include "sim/workload/model.h"
#include "sim/workload/operators.h"

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim::workload;

namespace {
const std::string kHf = std::string(sim::config::data_dir()) + "/tests/data/hf/";
ModelSpec load(const std::string& path) { return sim::config::load_model_file(path); }
ModelSpec shipped(const std::string& name) { return load(sim::config::model_path(name)); }
}  // namespace

TEST_CASE("DeepSeek-V3: 671 B total, 37 B active per token") {
    // By hand (arXiv:2412.19437 gives 671B total, 37B activated):
    //   MLA per layer: q 7168 x 1536 + 1536 + 1536 x 128 x 192 = 48 760 320;
    //   kv 7168 x 576 + 512 + 512 x 128 x 256 = 20 906 496; out 128 x 128 x
    //   7168 = 117 440 512; total 187 107 328. Expert 3 x 7168 x 2048 =
    //   44 040 192; router 7168 x 256. MoE layer: MLA + 2 norms (14 336) +
    //   router (1 835 008) + 257 experts = 11 507 286 016; dense layer: MLA +
    //   norms + 3 x 7168 x 18432 = 583 483 392. 58 MoE + 3 dense layers +
    //   2 x 129280 x 7168 (embedding, head) + 7168 = 671 026 404 352.
    //   Active: 9 experts (8 routed + 1 shared): 585 318 400 per MoE layer,
    //   37 552 282 624 in all: 1.5% above the rounded 37B, so 2% tolerance.
    const ModelSpec m = shipped("deepseek-v3");
    const auto c = count_parameters(m);
    CHECK(c.total == doctest::Approx(671'026'404'352.0));
    CHECK(c.total == doctest::Approx(671e9).epsilon(0.001));
    CHECK(c.total_active == doctest::Approx(37'552'282'624.0));
    CHECK(c.total_active == doctest::Approx(37e9).epsilon(0.02));
    CHECK(c.dense_layer == doctest::Approx(583'483'392.0));
    CHECK(layer_parameters(c, m, 2) == c.dense_layer);
    CHECK(layer_parameters(c, m, 3) == c.per_layer);
    // Its MLA head: queries and keys of 128 + 64.
    CHECK(m.head_dim == 192);
    // Node-limited routing: 8 groups of 32 experts, a token's top 8 from 4 of them.
    CHECK(m.expert_groups == 8);
    CHECK(m.expert_group_limit == 4);
}

TEST_CASE("Qwen3-30B-A3B: 30.5 B total, 3.3 B active; Qwen3-235B-A22B: 235 B / 22 B") {
    // 30B-A3B by hand: attention 2048 x (4096 + 1024) + 4096 x 2048 + q/k
    // norms 256 = 18 874 624; 128 experts of 3 x 2048 x 768 = 603 979 776;
    // router 262 144; norms 4096: 623 120 640 x 48 layers + 2 x 151936 x
    // 2048 + 2048 = 30 532 122 624 (the card's 30.5B). Active: 8 experts,
    // 56 889 600 a layer, 3 353 032 448 in all (the card's 3.3B, 1.6%).
    const auto a = count_parameters(shipped("qwen3-30b-a3b"));
    CHECK(a.total == doctest::Approx(30'532'122'624.0));
    CHECK(a.total == doctest::Approx(30.5e9).epsilon(0.002));
    CHECK(a.total_active == doctest::Approx(3.3e9).epsilon(0.02));
    // 235B-A22B: 2 487 755 008 a layer x 94 + 1 244 659 712 embeddings +
    // 4096 = 235.09 B (0.04% over 235B); active 222 830 848 a layer,
    // 22.19 B (0.9% over 22B).
    const auto b = count_parameters(shipped("qwen3-235b-a22b"));
    CHECK(b.total == doctest::Approx(235e9).epsilon(0.001));
    CHECK(b.total_active == doctest::Approx(22e9).epsilon(0.01));
}

TEST_CASE("Qwen2.5-7B has 7.61 B parameters (6.53 B without embeddings); Qwen3-8B 8.19 B (6.95 B)") {
    // Qwen2.5-7B: attention 3584 x 4608 + 3584 x 3584 + q/k/v biases 4608 =
    // 29 364 736; MLP 3 x 3584 x 18944 = 203 685 888; norms 7168:
    // 233 057 792 x 28 = 6 525 618 176, + 2 x 152064 x 3584 + 3584 =
    // 7 615 616 512 (the card's 7.61B and 6.53B non-embedding).
    const auto q25 = count_parameters(shipped("qwen2.5-7b"));
    CHECK(q25.total == doctest::Approx(7'615'616'512.0));
    CHECK(q25.total - q25.embedding - q25.lm_head == doctest::Approx(6.53e9).epsilon(0.001));
    // Qwen3-8B: attention 4096 x 6144 + 4096 x 4096 + 256 = 41 943 296; MLP
    // 150 994 944; norms 8192: 192 946 432 x 36 = 6 946 071 552, + 2 x
    // 151936 x 4096 + 4096 = 8 190 735 360 (the card's 8.2B and 6.95B).
    const auto q3 = count_parameters(shipped("qwen3-8b"));
    CHECK(q3.total == doctest::Approx(8'190'735'360.0));
    CHECK(q3.total - q3.embedding - q3.lm_head == doctest::Approx(6.95e9).epsilon(0.001));
}

TEST_CASE("Hugging Face configs of DeepSeek-V3, Qwen2, Qwen3 and Qwen3-MoE give the shipped files' counts") {
    for (const std::string name : {"deepseek-v3", "qwen2.5-7b", "qwen3-8b", "qwen3-30b-a3b"}) {
        CAPTURE(name);  // the config's folder and the model file share the name
        const ModelSpec hf = load(kHf + name + "/config.json");
        const ModelSpec file = shipped(name);
        const auto a = count_parameters(hf), b = count_parameters(file);
        CHECK(a.total == doctest::Approx(b.total));
        CHECK(a.total_active == doctest::Approx(b.total_active));
        CHECK(hf.experts == file.experts);
        CHECK(hf.expert_ffn() == file.expert_ffn());
        CHECK(hf.first_dense_layers == file.first_dense_layers);
        CHECK(hf.expert_groups == file.expert_groups);
        CHECK(hf.expert_group_limit == file.expert_group_limit);
        CHECK(hf.bias.qkv == file.bias.qkv);
        CHECK(hf.qk_norm() == file.qk_norm());
        CHECK(hf.head_dim == file.head_dim);
    }
}

TEST_SUITE_END();

TEST_SUITE_BEGIN("unit");

TEST_CASE("DeepSeek-V3 on one GPU holds its parameter count; MLA caches 576 values a token a layer") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o;
    // Sum over the 61 layers of the per-shard counts (tp 1) equals the
    // layers' share of the total: 671 026 404 352 - 2 x 129280 x 7168 - 7168.
    double layers = 0;
    for (std::int64_t l = 0; l < m.layers; ++l) layers += layer_params_per_shard(m, o, l);
    CHECK(layers == doctest::Approx(671'026'404'352.0 - 2.0 * 129280 * 7168 - 7168));
    // KV cache: (512 + 64) x 2 bytes per token per layer, for 4 x 1000 tokens.
    CHECK(layer_kv_bytes(m, 4, 1000, o).as_double() == doctest::Approx(4.0 * 1000 * 576 * 2));
    o.tp = 8;  // the latent is replicated over TP ranks
    CHECK(layer_kv_bytes(m, 4, 1000, o).as_double() == doctest::Approx(4.0 * 1000 * 576 * 2));
}

TEST_SUITE_END();
