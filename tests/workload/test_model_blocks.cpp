// Model blocks as variants (docs/workload-model.md, "Model blocks"): the
// bias map, the parallel attention/MLP block of GPT-J, partial rotary, and
// the file errors of each. Hand-computed counts, kernels and bytes.
#include "sim/config/data_dir.h"
#include "tests/test_util.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "sim/config/model_loader.h"
#include "sim/config/yaml_reader.h"
#include "sim/workload/footprint.h"
#include "sim/workload/model.h"
#include "sim/workload/operators.h"

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim::workload;

namespace {

ModelSpec shipped(const std::string& name) { return sim::config::load_model_file(sim::config::model_path(name)); }
ModelSpec from_text(const std::string& text) {
    return sim::config::load_model(sim::config::load_string(text, "bad.yaml"));
}
std::string error_of(const std::string& text) {
    return parasim_test::config_error_of([](const std::string& t) { from_text(t); }, text);
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const Operator* find(const std::vector<Operator>& ops, const std::string& name) {
    auto it = std::find_if(ops.begin(), ops.end(), [&](const Operator& o) { return o.kernel.name == name; });
    return it == ops.end() ? nullptr : &*it;
}

// A GPT-J-like model in text (two layers, the shipped file's block).
const char* kGptJLike = R"(name: tiny-j
layers: 2
hidden: 256
heads: 4
ffn: 1024
ffn_kind: gelu
vocab: 1000
max_seq: 512
norm: layernorm
tied_embeddings: false
position: rope
rotary_dim: 16
block: parallel
bias: {qkv: false, out: false, mlp: true}
)";

}  // namespace

TEST_CASE("GPT-J 6B: parallel block, one LayerNorm, biases on the MLP only: 6.051 B parameters") {
    // By hand (h 4096, f 16384, vocab 50400, 28 layers): attention 4 h^2 =
    // 67 108 864 (no biases); MLP 2 h f + f + h = 134 238 208; one
    // LayerNorm 2 h = 8 192: 201 355 264 a layer, x 28 = 5 637 947 392;
    // embedding and LM head 2 x 50400 x 4096 = 412 876 800; final norm
    // 8 192: 6 050 832 384. The model card says 6 053 381 344 (0.04% more);
    // the old flat schema (biases on every linear, two norms) gave
    // 6 051 520 512.
    const ModelSpec m = shipped("gpt-j-6b");
    CHECK(m.block == BlockLayout::parallel);
    CHECK(m.rotary_dim == 64);
    CHECK_FALSE(m.bias.qkv);
    CHECK_FALSE(m.bias.out);
    CHECK(m.bias.mlp);
    const auto c = count_parameters(m);
    CHECK(c.per_layer == doctest::Approx(201'355'264.0));
    CHECK(c.total == doctest::Approx(6'050'832'384.0));
    CHECK(c.total == doctest::Approx(6'053'381'344.0).epsilon(0.0005));
    // The per-shard count agrees with the closed form (tp 1), and the
    // bias-free attention halves exactly under tp 2 (the MLP's down bias and
    // the norm stay whole).
    OperatorOptions o;
    CHECK(layer_params_per_shard(m, o) == doctest::Approx(201'355'264.0));
    o.tp = 2;
    CHECK(layer_params_per_shard(m, o) == doctest::Approx(201'355'264.0 / 2 + (4096 + 8192) / 2.0));
}

TEST_CASE("a GPT-J config.json gives the shipped file's block and count") {
    const ModelSpec hf =
        sim::config::load_model_file(std::string(sim::config::data_dir()) + "/tests/data/hf/gpt-j-6b/config.json");
    const ModelSpec file = shipped("gpt-j-6b");
    CHECK(hf.block == BlockLayout::parallel);
    CHECK(hf.rotary_dim == 64);
    CHECK((hf.bias.qkv == file.bias.qkv && hf.bias.out == file.bias.out && hf.bias.mlp == file.bias.mlp));
    CHECK(hf.head_dim == 256);
    CHECK(count_parameters(hf).total == doctest::Approx(count_parameters(file).total));
}

TEST_CASE("the parallel block: both branches read one norm, one kernel adds both to the stream") {
    const ModelSpec m = from_text(kGptJLike);
    OperatorOptions o;
    const PassShape s{2, 64, 64};  // T = 128 tokens
    const auto fwd = layer_forward(m, 0, 0, s, o);
    CHECK(find(fwd, "norm2") == nullptr);
    CHECK(find(fwd, "residual_add_norm2") == nullptr);
    const Operator* qkv = find(fwd, "qkv");
    const Operator* up = find(fwd, "mlp_up");
    const Operator* add = find(fwd, "bias_parallel_residual_add");
    REQUIRE(qkv != nullptr);
    REQUIRE(up != nullptr);
    REQUIRE(add != nullptr);
    // The MLP reads the tensor the QKV projection reads: the one norm output.
    CHECK(up->kernel.tensors.front().id == qkv->kernel.tensors.front().id);
    // No bias on the QKV or output projections; the MLP's up bias (f = 1024
    // x 2 bytes) in the activation kernel's read.
    CHECK(qkv->kernel.epilogue_read.value == 0);
    CHECK(find(fwd, "out_proj")->kernel.epilogue_read.value == 0);
    // x + attn + mlp + the down bias: reads 3 x 128 x 256 x 2 bytes plus the
    // bias 256 x 2; writes 128 x 256 x 2; 2 adds + 1 bias add per element.
    CHECK(add->kernel.bytes_read.value == 3 * 128 * 256 * 2 + 256 * 2);
    CHECK(add->kernel.bytes_written.value == 128 * 256 * 2);
    CHECK(add->kernel.flops.value == doctest::Approx(3.0 * 128 * 256));
    // Backward: no second norm; the first norm's backward also reads the MLP
    // branch's share of its output gradient (4 activations + weights 2 x 256 x 2).
    const auto bwd = layer_backward(m, 0, 0, s, o, Recompute::none);
    CHECK(find(bwd, "norm2_bwd_residual_add") == nullptr);
    const Operator* n1 = find(bwd, "norm1_bwd_residual_add");
    REQUIRE(n1 != nullptr);
    CHECK(n1->kernel.bytes_read.value == 4 * 128 * 256 * 2 + 2 * 256 * 2);
    // Stored activations: one norm input and one norm output less than the
    // sequential block's 2 norm inputs + QKV input + MLP input (each
    // tokens x h x 2 bytes).
    ModelSpec seq = m;
    seq.block = BlockLayout::sequential;
    CHECK(layer_activation_bytes(seq, s, o, Recompute::none).as_double() -
              layer_activation_bytes(m, s, o, Recompute::none).as_double() ==
          doctest::Approx(2.0 * 128 * 256 * 2));
}

TEST_CASE("the bias map: Qwen2's q/k/v biases only, each linear's own flag") {
    const ModelSpec q = shipped("qwen2.5-7b");
    CHECK(q.bias.qkv);
    CHECK_FALSE(q.bias.out);
    CHECK_FALSE(q.bias.mlp);
    ModelSpec m = from_text(kGptJLike);
    const double base = count_parameters(m).per_layer;
    m.bias.out = true;  // + h
    CHECK(count_parameters(m).per_layer - base == doctest::Approx(256.0));
    m.bias.qkv = true;  // + 3 x heads x head_dim
    CHECK(count_parameters(m).per_layer - base == doctest::Approx(256.0 + 3 * 256));
    const ModelSpec all =
        from_text(parasim_test::replace_once(kGptJLike, "bias: {qkv: false, out: false, mlp: true}", "bias: true"));
    CHECK((all.bias.qkv && all.bias.out && all.bias.mlp));
}

TEST_CASE("model block errors name the line") {
    using parasim_test::replace_once;
    CHECK(contains(error_of(replace_once(kGptJLike, "mlp: true}", "mlp: true, norm: true}")),
                   "unknown key 'bias.norm' (valid keys: mlp, out, qkv)"));
    CHECK(error_of(replace_once(kGptJLike, "rotary_dim: 16", "rotary_dim: 65")) ==
          "bad.yaml:12:13: rotary_dim: rotary_dim (65) must be even and at most head_dim (64)");
    CHECK(contains(error_of(replace_once(kGptJLike, "block: parallel", "block: paralel")), "bad.yaml:13:8"));
    const std::string moe = std::string(kGptJLike) + "moe: {experts: 4, top_k: 2}\n";
    CHECK(error_of(moe) ==
          "bad.yaml:13:8: block: block: parallel with a moe: block (experts beside attention) is "
          "not modelled");
    CHECK(contains(error_of(replace_once(kGptJLike, "position: rope", "position: learned")),
                   "rotary_dim needs position: rope"));
    const std::string mla = replace_once(replace_once(kGptJLike, "rotary_dim: 16\n", ""), "block: parallel\n",
                                         "attention: {kind: mla, kv_lora_rank: 32, qk_nope_head_dim: 32, "
                                         "qk_rope_head_dim: 16, v_head_dim: 32}\n");
    CHECK(from_text(mla).head_dim == 48);
    CHECK(contains(error_of(mla + "kv_heads: 4\n"), "kv_heads does not apply to multi-head latent attention"));
    CHECK(contains(error_of(replace_once(mla, "kv_lora_rank: 32, ", "")), "missing required field 'kv_lora_rank'"));
    CHECK(contains(error_of(replace_once(mla, "qkv: false", "qkv: true")),
                   "biases on the projections of multi-head latent attention are not modelled"));
    CHECK(contains(error_of(replace_once(mla, "kind: mla", "kind: mqa")), "bad.yaml:12:"));
}

TEST_SUITE_END();
