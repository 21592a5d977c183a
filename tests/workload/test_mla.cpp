// Multi-head latent attention simulated (docs/workload-model.md, "Multi-head
// latent attention"): DeepSeek-V3's projections, its compressed KV cache
// and the absorbed decode path, each against a hand computation; and what
// vLLM 0.7 ran beyond it (docs/moe.md section 7b): the MLA decode on matrices
// absorbed at load with their memory, and the fused-MoE kernel's chunked
// buffers in the workspace of the engine's memory profile.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>

#include "sim/config/model_loader.h"
#include "sim/workload/footprint.h"
#include "sim/workload/model.h"
#include "sim/workload/operators.h"

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim::workload;
using sim::hw::KernelKind;

namespace {

ModelSpec shipped(const std::string& name) { return sim::config::load_model_file(sim::config::model_path(name)); }

const Operator& find(const std::vector<Operator>& ops, const std::string& name) {
    auto it = std::find_if(ops.begin(), ops.end(), [&](const Operator& o) { return o.kernel.name == name; });
    REQUIRE(it != ops.end());
    return *it;
}
bool has(const std::vector<Operator>& ops, const std::string& name) {
    return std::any_of(ops.begin(), ops.end(), [&](const Operator& o) { return o.kernel.name == name; });
}

double gemm_flops(const std::vector<Operator>& ops) {
    double f = 0;
    for (const auto& op : ops)
        if (op.kernel.kind == KernelKind::gemm) f += op.kernel.flops.value;
    return f;
}

// DeepSeek-V3 in FP8 (weights and GEMMs; BF16 activations and cache) under TP 8.
OperatorOptions fp8_tp8() {
    OperatorOptions o;
    o.precision.compute = sim::hw::DType::fp8;
    o.precision.weights = sim::hw::DType::fp8;
    o.tp = 8;
    o.inference = true;
    return o;
}

// The kernels of `ops` whose name starts with `prefix`.
std::ptrdiff_t count_prefixed(const std::vector<Operator>& ops, const std::string& prefix) {
    return std::count_if(ops.begin(), ops.end(),
                         [&prefix](const Operator& op) { return op.kernel.name.rfind(prefix, 0) == 0; });
}

// Where the kernel `name` is in `ops` (end() when absent).
std::vector<Operator>::const_iterator position(const std::vector<Operator>& ops, const std::string& name) {
    return std::find_if(ops.begin(), ops.end(), [&name](const Operator& op) { return op.kernel.name == name; });
}

// DeepSeek-V3's training layout of the two NeMo tests: TP 2 with sequence
// parallelism, one sequence of 4096 tokens.
OperatorOptions tp2_sp() {
    OperatorOptions o;
    o.tp = 2;
    o.sequence_parallel = true;
    return o;
}
const PassShape kSequence4096{1, 4096, 4096};

}  // namespace

TEST_CASE("DeepSeek-V3 caches 61 x (512 + 64) x 2 = 70 272 bytes a token in BF16") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o;  // kv bf16
    double per_token = 0;
    for (std::int64_t l = 0; l < m.layers; ++l) per_token += layer_kv_bytes(m, 1, 1, o).as_double();
    CHECK(per_token == doctest::Approx(61.0 * (512 + 64) * 2));
    // An MHA cache of the same heads would hold 2 x 128 x 192 values a
    // token a layer: 85 x the latent's 576 (49 152 / 576 = 85.3).
    o.precision.kv = sim::hw::DType::fp8;
    CHECK(layer_kv_bytes(m, 1, 1, o).as_double() == doctest::Approx(576.0));
}

TEST_CASE("DeepSeek-V3 training: every projection's GEMM FLOPs and the MLA core, by hand") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o;
    const std::int64_t s = 4096;
    const PassShape shape{1, s, s};
    const auto fwd = layer_forward(m, 0, 0, shape, o);  // a dense layer
    // Matrices (= dense_layer less its 16 384 norm weights): q down 7168 x
    // 1536, q up 1536 x 128 x 192, kv down 7168 x 576, kv up 512 x 128 x
    // (128 + 128), out 128 x 128 x 7168, MLP 3 x 7168 x 18432.
    const double matrices =
        7168.0 * 1536 + 1536.0 * 128 * 192 + 7168.0 * 576 + 512.0 * 128 * 256 + 128.0 * 128 * 7168 + 3.0 * 7168 * 18432;
    CHECK(matrices == doctest::Approx(583'483'392.0 - 16'384));
    CHECK(gemm_flops(fwd) == doctest::Approx(2.0 * s * matrices));
    // The core: scores over 192 and values of 128 per head, causal: 2 x 128
    // heads x s^2 / 2 pairs x (192 + 128).
    const Operator& core = find(fwd, "attention");
    CHECK(core.kernel.flops.value == doctest::Approx(2.0 * 128 * (double(s) * s / 2) * (192 + 128)));
    // It reads Q (s x 128 x 192) and K + V (s x 128 x 320), writes O (s x 128 x 128) and the LSE, BF16.
    CHECK(core.kernel.bytes_read.value == doctest::Approx(2.0 * s * 128 * (192 + 320)));
    CHECK(core.kernel.bytes_written.value == doctest::Approx(2.0 * s * 128 * 128 + 4.0 * s * 128));
    // The projections run in order, then the out projection of 128 x 128 inputs.
    for (const char* name : {"norm1", "q_down", "q_norm", "q_up", "kv_down", "kv_norm", "kv_up", "out_proj"})
        CHECK(has(fwd, name));
    CHECK(find(fwd, "out_proj").kernel.k == 128 * 128);
    // The backward: a dgrad and a wgrad per projection, the latent norms'
    // backward, and twice the forward's GEMM FLOPs.
    const auto bwd = layer_backward(m, 0, 0, shape, o, Recompute::none);
    CHECK(gemm_flops(bwd) == doctest::Approx(4.0 * s * matrices));
    for (const char* name :
         {"kv_up_dgrad", "kv_norm_bwd", "kv_down_wgrad", "q_up_dgrad", "q_norm_bwd", "q_down_dgrad", "mla_dx_add"})
        CHECK(has(bwd, name));
}

TEST_CASE(
    "Megatron-Core's MLA joins queries and keys by copies: 5 passes of 100.7, 67.6, 67.1, 100.7, 167.8 MB at TP 2") {
    // NeMo 25.04's Megatron-Core (64cb6bd7, multi_latent_attention.py):
    // query = cat(q_nope, q_rope), key = cat(k_nope, rope key x heads),
    // value.contiguous(), and their split backward (docs/moe.md section 7).
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o = tp2_sp();
    o.mla_qkv_concat = true;
    const PassShape shape = kSequence4096;
    // e: the sequence's 4096 tokens x 64 heads a rank x 2 bytes.
    const double e = 4096.0 * 64 * 2;
    const auto fwd = layer_forward(m, 0, 0, shape, o);
    CHECK(find(fwd, "mla_q_concat").kernel.bytes_read.value == doctest::Approx(e * 192));  // 100 663 296
    CHECK(find(fwd, "mla_q_concat").kernel.bytes_written.value == doctest::Approx(e * 192));
    // k_nope (128 a head) and the shared rope key (64 a token) in, 192 a head out.
    CHECK(find(fwd, "mla_k_concat").kernel.bytes_read.value ==
          doctest::Approx(e * 128 + 4096.0 * 64 * 2));  // 67 633 152
    CHECK(find(fwd, "mla_k_concat").kernel.bytes_written.value == doctest::Approx(e * 192));
    CHECK(find(fwd, "mla_v_copy").kernel.bytes_read.value == doctest::Approx(e * 128));  // 67 108 864
    CHECK(find(fwd, "mla_v_copy").kernel.bytes_written.value == doctest::Approx(e * 128));
    // After kv_up, before the core.
    CHECK(position(fwd, "kv_up") < position(fwd, "mla_q_concat"));
    CHECK(position(fwd, "mla_v_copy") < position(fwd, "attention"));
    const auto bwd = layer_backward(m, 0, 0, shape, o, Recompute::none);
    CHECK(find(bwd, "mla_q_split_bwd").kernel.bytes_read.value == doctest::Approx(e * 192));
    CHECK(find(bwd, "mla_q_split_bwd").kernel.bytes_written.value == doctest::Approx(e * 192));
    // The gradients of keys (192) and values (128) in; kv_up's output gradient
    // (128 + 128 a head) and the rope key's, summed over the heads, out.
    CHECK(find(bwd, "mla_kv_split_bwd").kernel.bytes_read.value == doctest::Approx(e * 320));  // 167 772 160
    CHECK(find(bwd, "mla_kv_split_bwd").kernel.bytes_written.value ==
          doctest::Approx(e * 256 + 4096.0 * 64 * 2));  // 134 742 016
    CHECK(position(bwd, "mla_kv_split_bwd") < position(bwd, "kv_up_dgrad"));
    CHECK(position(bwd, "mla_q_split_bwd") < position(bwd, "q_up_dgrad"));
    // Recomputing the up projections (mla_up_proj) repeats the three copies.
    o.recompute_modules = {false, true};  // mla_up_proj only, as the DeepSeek-V3 recipe
    const auto rec = layer_backward(m, 0, 0, shape, o, Recompute::selective);
    CHECK(count_prefixed(rec, "recompute_mla_") == 3);
    CHECK(count_prefixed(rec, "recompute_") == 5);  // with q_up and kv_up
    // A stack whose epilogues write them in place runs none.
    o.mla_qkv_concat = false;
    CHECK(count_prefixed(layer_forward(m, 0, 0, shape, o), "mla_") == 0);
    CHECK(count_prefixed(layer_backward(m, 0, 0, shape, o, Recompute::selective), "recompute_mla_") == 0);
}

namespace {

// Bytes read and written by the kernels whose names start with `prefix`.
std::pair<double, double> prefixed_bytes(const std::vector<Operator>& ops, const std::string& prefix) {
    double r = 0, w = 0;
    for (const auto& op : ops)
        if (op.kernel.name.rfind(prefix, 0) == 0) {
            r += op.kernel.bytes_read.value;
            w += op.kernel.bytes_written.value;
        }
    return {r, w};
}

}  // namespace

TEST_CASE("Megatron-Core's unfused YaRN RoPE: 13 + 13 kernels forward, 14 + 14 backward, 470 + 805 MB at TP 2") {
    // rope_utils.py _apply_rotary_pos_emb_bshd at Megatron-LM 64cb6bd7 on
    // q_pos_emb (4096 tokens x 64 heads a rank x 64) and k_pos_emb (4096 x
    // 64), BF16 (docs/moe.md section 3j).
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o = tp2_sp();
    o.mla_rope_unfused = true;
    const PassShape shape = kSequence4096;
    const double q = 4096.0 * 64 * 64 * 2;  // 33 554 432 bytes: the queries' rope parts
    const double k = 4096.0 * 64 * 2;       // 524 288: the rope key
    const double table = 4096.0 * 64;       // FP32 frequencies, cos and sin
    const auto fwd = layer_forward(m, 0, 0, shape, o);
    // 7 passes over each tensor and 3 kernels for each of the two tables.
    CHECK(count_prefixed(fwd, "mla_q_rope_") == 13);
    CHECK(count_prefixed(fwd, "mla_k_rope_") == 13);
    // Reads 1 + 1 + 0.5 + 1 + 1 + 2 + 1 = 7.5 units, writes 6.5; the tables
    // read 3 x 4 bytes an element and write 4 + 4 + 2, twice.
    const auto [qr, qw] = prefixed_bytes(fwd, "mla_q_rope_");
    CHECK(qr == doctest::Approx(7.5 * q + 2 * 12 * table));  // 257 949 696
    CHECK(qw == doctest::Approx(6.5 * q + 2 * 10 * table));  // 223 346 688
    const auto [kr, kw] = prefixed_bytes(fwd, "mla_k_rope_");
    CHECK(kr == doctest::Approx(7.5 * k + 2 * 12 * table));
    CHECK(kw == doctest::Approx(6.5 * k + 2 * 10 * table));
    CHECK(position(fwd, "kv_up") < position(fwd, "mla_q_rope_cos"));
    CHECK(position(fwd, "mla_k_rope_pass_cat") < position(fwd, "attention"));
    // Backward: 14 passes each, reading 11.5 units and writing 12.5.
    const auto bwd = layer_backward(m, 0, 0, shape, o, Recompute::none);
    CHECK(count_prefixed(bwd, "mla_q_rope_") == 14);
    CHECK(count_prefixed(bwd, "mla_k_rope_") == 14);
    const auto [br, bw] = prefixed_bytes(bwd, "mla_q_rope_");
    CHECK(br == doctest::Approx(11.5 * q));  // 385 875 968
    CHECK(bw == doctest::Approx(12.5 * q));  // 419 430 400
    CHECK(position(bwd, "attention_bwd") < position(bwd, "mla_q_rope_mul_sin_bwd"));
    CHECK(position(bwd, "mla_k_rope_pass_add") < position(bwd, "kv_up_dgrad"));
    // Recomputing the up projections (mla_up_proj) applies the RoPE again.
    o.recompute_modules = {false, true};
    const auto rec = layer_backward(m, 0, 0, shape, o, Recompute::selective);
    CHECK(count_prefixed(rec, "recompute_mla_q_rope_") == 13);
    CHECK(count_prefixed(rec, "recompute_mla_k_rope_") == 13);
    // Fused (the default): none.
    o.mla_rope_unfused = false;
    CHECK(count_prefixed(layer_forward(m, 0, 0, shape, o), "mla_q_rope_") == 0);
    CHECK(count_prefixed(layer_backward(m, 0, 0, shape, o, Recompute::selective), "recompute_mla_k_rope_") == 0);
}

TEST_CASE("DeepSeek-V3 decode: the absorbed path attends the 576-wide latent cache as one KV head") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o;
    o.inference = true;
    const std::int64_t b = 4, c = 1000;
    const PassShape decode{b, 1, c};
    const auto ops = layer_forward(m, 0, 0, decode, o);
    CHECK_FALSE(has(ops, "kv_up"));  // the cache is never expanded
    const Operator& core = find(ops, "attention");
    // 2 x b x 128 heads x c pairs x (576 + 512): scores over the latent and
    // rope key, values the latent.
    CHECK(core.kernel.flops.value == doctest::Approx(2.0 * b * 128 * c * (576 + 512)));
    // Reads the latent queries (b x 128 x 576) and the cache b x c x 576, BF16.
    CHECK(core.kernel.bytes_read.value == doctest::Approx(2.0 * b * 128 * 576 + 2.0 * b * c * 576));
    // W_UK and W_UV absorbed: per head [b, 128] x [128, 512] and [b, 512] x [512, 128].
    CHECK(find(ops, "q_absorb").kernel.flops.value == doctest::Approx(2.0 * b * 128 * 128 * 512));
    CHECK(find(ops, "o_absorb").kernel.flops.value == doctest::Approx(2.0 * b * 128 * 512 * 128));
    // The new token's latent goes to the cache in the KV dtype: b x 576 x 2.
    const Operator& norm = find(ops, "kv_norm");
    CHECK(norm.kernel.bytes_written.value == doctest::Approx(2.0 * b * 576));
    // Under TP 8 each rank runs 16 heads but reads the whole latent cache.
    o.tp = 8;
    const auto tp8 = layer_forward(m, 0, 0, decode, o);
    const Operator& core8 = find(tp8, "attention");
    CHECK(core8.kernel.flops.value == doctest::Approx(2.0 * b * 16 * c * (576 + 512)));
    CHECK(core8.kernel.bytes_read.value == doctest::Approx(2.0 * b * 16 * 576 + 2.0 * b * c * 576));
}

TEST_CASE("DeepSeek-V3 prefill writes the latent cache and attends expanded keys and values") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o;
    o.inference = true;
    const std::int64_t b = 2, s = 512;
    const auto ops = layer_forward(m, 0, 0, PassShape{b, s, s}, o);
    CHECK(has(ops, "kv_up"));
    CHECK_FALSE(has(ops, "q_absorb"));
    // kv_norm writes the normed latent (b s x 512) and the cache (b s x 576), BF16.
    CHECK(find(ops, "kv_norm").kernel.bytes_written.value == doctest::Approx(2.0 * b * s * (512 + 576)));
    // A routed layer under EP runs too: router, experts, the same MLA.
    o.ep = 8;
    const auto moe = layer_forward(m, 3, 0, PassShape{b, s, s}, o);
    CHECK(has(moe, "router"));
    CHECK(has(moe, "kv_up"));
}

TEST_CASE(
    "MLA under TP: replicated down projections, latent-sized all-reduces of the up projections' input gradients") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o;
    o.tp = 8;
    const std::int64_t s = 1024;
    const auto fwd = layer_forward(m, 0, 0, PassShape{1, s, s}, o);
    // Down projections whole on every rank; up projections 128 / 8 = 16 heads.
    CHECK(find(fwd, "q_down").kernel.n == 1536);
    CHECK(find(fwd, "kv_down").kernel.n == 576);
    CHECK(find(fwd, "q_up").kernel.n == 16 * 192);
    CHECK(find(fwd, "kv_up").kernel.n == 16 * 256);
    CHECK(find(fwd, "out_proj").tp_sync == TpSync::after_row_parallel);
    const auto bwd = layer_backward(m, 0, 0, PassShape{1, s, s}, o, Recompute::none);
    // The latents' gradients are summed over the 8 head shards: s x 1536 and s x 512, BF16.
    const Operator& q_up = find(bwd, "q_up_dgrad");
    CHECK(q_up.tp_sync == TpSync::after_column_input_grad);
    CHECK(q_up.tp_sync_bytes.as_double() == doctest::Approx(2.0 * s * 1536));
    CHECK(find(bwd, "kv_up_dgrad").tp_sync_bytes.as_double() == doctest::Approx(2.0 * s * 512));
    // The replicated down projections' input gradients need no reduction.
    CHECK(find(bwd, "q_down_dgrad").tp_sync == TpSync::none);
    CHECK(find(bwd, "kv_down_dgrad").tp_sync == TpSync::none);
}

TEST_CASE("MLA needs a fused attention kernel") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o;
    o.flash_attention = false;
    CHECK_THROWS_AS(layer_forward(m, 0, 0, PassShape{1, 128, 128}, o), sim::ModelError);
}

TEST_CASE("vLLM 0.7's MLA decode: the q latent x W_Q_UK and W_QR, the latent output x W_UV_O") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o = fp8_tp8();
    o.mla_absorbed_weights = true;
    const std::int64_t b = 4, c = 1000;
    const auto ops = layer_forward(m, 0, 3, PassShape{b, 1, c}, o);  // layer 3: the first MoE layer
    // No run-time absorption and no raw q up projection.
    for (const char* name : {"q_up", "q_absorb", "o_absorb", "kv_up"}) CHECK_FALSE(has(ops, name));
    // W_Q_UK: [b, 1536] x [1536, 16 heads x 512], FP8, reading 1536 x 8192 bytes of weights.
    const Operator& quk = find(ops, "q_uk");
    CHECK(quk.kernel.dtype == sim::hw::DType::fp8);
    CHECK(quk.kernel.flops.value == doctest::Approx(2.0 * b * 1536 * 16 * 512));
    CHECK(quk.kernel.bytes_read.value == doctest::Approx(1536.0 * 8192 + 2.0 * b * 1536));
    // W_QR: [b, 1536] x [1536, 16 x 64] in BF16 (2 bytes a weight).
    const Operator& qr = find(ops, "q_rope");
    CHECK(qr.kernel.dtype == sim::hw::DType::bf16);
    CHECK(qr.kernel.flops.value == doctest::Approx(2.0 * b * 1536 * 16 * 64));
    CHECK(qr.kernel.bytes_read.value == doctest::Approx(2.0 * 1536 * 1024 + 2.0 * b * 1536));
    // W_UV_O: the output projection takes the 16 heads' 512-wide latent outputs.
    const Operator& out = find(ops, "out_proj");
    CHECK(out.kernel.k == 16 * 512);
    CHECK(out.kernel.n == 7168);
    CHECK(out.kernel.flops.value == doctest::Approx(2.0 * b * 8192 * 7168));
    // The core is the same latent attention as the per-head path's.
    o.mla_absorbed_weights = false;
    const auto plain = layer_forward(m, 0, 3, PassShape{b, 1, c}, o);
    CHECK(find(plain, "attention").kernel.flops.value == doctest::Approx(find(ops, "attention").kernel.flops.value));
    CHECK(find(plain, "out_proj").kernel.k == 16 * 128);
    // A prompt keeps the raw weights' path.
    o.mla_absorbed_weights = true;
    const auto prompt = layer_forward(m, 0, 3, PassShape{1, 512, 512}, o);
    CHECK(has(prompt, "kv_up"));
    CHECK(find(prompt, "out_proj").kernel.k == 16 * 128);
}

TEST_CASE("vLLM 0.7's absorbed MLA matrices: 74 448 896 bytes a layer a GPU for DeepSeek-V3 in FP8 at TP 8") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o = fp8_tp8();
    CHECK(mla_absorbed_weight_bytes(m, o).as_double() == 0);  // not the stack's path
    o.mla_absorbed_weights = true;
    // W_Q_UK 1536 x 16 x 512 + W_UV_O 16 x 512 x 7168, one byte each; W_QR
    // 1536 x 16 x 64, two bytes: 12 582 912 + 58 720 256 + 3 145 728.
    CHECK(mla_absorbed_weight_bytes(m, o).as_double() == 74'448'896.0);
    o.inference = false;  // training has no decode
    CHECK(mla_absorbed_weight_bytes(m, o).as_double() == 0);
    o.inference = true;
    CHECK(mla_absorbed_weight_bytes(shipped("qwen3-8b"), o).as_double() == 0);  // no MLA
}

TEST_CASE("vLLM's fused-MoE buffers in the workspace: a chunk of 32 768 of DeepSeek-V3's 163 840 prompt tokens") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o = fp8_tp8();
    const PassShape prompt{1, 163'840, 163'840};
    const double library = 32.0 * 1024 * 1024;
    // Without the kernel's buffers: 163 840 x 2 bytes x (2 x 7168 residual
    // streams + 16 x (2 x 192 + 128) queries, keys, values + 6912 MLP
    // inputs: the dense 3 x 18432 / 8 = the experts' 8 x 3 x 256 + 768).
    CHECK(workspace_bytes(m, prompt, o, false).as_double() == 163'840.0 * 2 * (14'336 + 8192 + 6912) + library);
    // With them: 32 768 tokens x 8 experts x (768 + 7168) x 2 bytes
    // = 4 160 749 568, and the shared expert's 768 inputs for every token.
    o.fused_moe_chunk_tokens = 32'768;
    const double chunk = 32'768.0 * 8 * (768 + 7168) * 2;
    CHECK(chunk == 4'160'749'568.0);
    CHECK(workspace_bytes(m, prompt, o, false).as_double() == 163'840.0 * 2 * (14'336 + 8192 + 768) + chunk + library);
    // A batch smaller than the chunk holds buffers for its own tokens.
    const PassShape small{1, 4096, 4096};
    CHECK(workspace_bytes(m, small, o, false).as_double() ==
          4096.0 * 2 * (14'336 + 8192 + 768) + 4096.0 * 8 * 7936 * 2 + library);
}

TEST_CASE("vLLM 0.7's MLA prompt peaks at the output projection's all-reduce: DeepSeek-V3, 163 840 tokens, TP 8") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o = fp8_tp8();
    o.fused_moe_chunk_tokens = 32'768;
    const PassShape prompt{1, 163'840, 163'840};
    const double library = 32.0 * 1024 * 1024;
    const double chunk = 32'768.0 * 8 * (768 + 7168) * 2;
    const double generic = 163'840.0 * 2 * (14'336 + 8192 + 768) + chunk + library;
    CHECK(workspace_bytes(m, prompt, o, false).as_double() == generic);
    // Per token, BF16: residual, normed input, o_proj's output and the
    // all-reduce's, 4 x 7168; the q latent and its norm 2 x 1536, the kv
    // projection's 576, the contiguous latent and its norm 2 x 512; per head
    // (16 on a rank) q 192, kv_up 256, k 192, v padded 192, output 128.
    o.mla_prefill_eager = true;
    const double per_token = 4 * 7168 + 2 * 1536 + 576 + 2 * 512 + 16 * (192 + 256 + 192 + 192 + 128);
    CHECK(per_token == 48'704);
    CHECK(workspace_bytes(m, prompt, o, false).as_double() == 163'840.0 * 2 * per_token + library);
    // At 32 768 tokens (the offline points' profile) the fused MoE's buffers
    // are the larger: 5.69 GB against the MLA prompt's 3.19 GB.
    const PassShape offline{1, 32'768, 32'768};
    const double moe = 32'768.0 * 2 * (14'336 + 8192 + 768) + chunk + library;
    CHECK(32'768.0 * 2 * per_token + library < moe);
    CHECK(workspace_bytes(m, offline, o, false).as_double() == moe);
    // A model without MLA keeps parasim's count.
    const ModelSpec mixtral = shipped("mixtral-8x7b");
    OperatorOptions plain = fp8_tp8();
    const double before = workspace_bytes(mixtral, prompt, plain, false).as_double();
    plain.mla_prefill_eager = true;
    CHECK(workspace_bytes(mixtral, prompt, plain, false).as_double() == before);
}

TEST_CASE("vLLM 0.7's FP8 GEMMs carry the stack's ceiling; BF16 ones and other kernels the GPU's") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o = fp8_tp8();
    o.mla_absorbed_weights = true;
    o.fp8_gemm_ceiling = 0.18;
    const auto ops = layer_forward(m, 0, 3, PassShape{4, 1, 1000}, o);
    CHECK(find(ops, "q_uk").kernel.ceiling == 0.18);
    CHECK(find(ops, "out_proj").kernel.ceiling == 0.18);
    CHECK(find(ops, "q_rope").kernel.ceiling == 0);  // W_QR stays BF16
    CHECK(find(ops, "attention").kernel.ceiling == 0);
    o.fp8_gemm_ceiling = 0;
    CHECK(find(layer_forward(m, 0, 3, PassShape{4, 1, 1000}, o), "q_uk").kernel.ceiling == 0);
}

TEST_CASE("vLLM 0.7 quantizes each FP8 GEMM's input in a kernel of its own: 8 in an MoE layer, 6 in a dense one") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o = fp8_tp8();
    o.mla_absorbed_weights = true;
    o.moe.grouped_gemm = true;           // vLLM's fused MoE
    const PassShape decode{4, 1, 1000};  // 4 tokens
    const auto count = [](const std::vector<Operator>& ops) {
        return std::count_if(ops.begin(), ops.end(), [](const Operator& op) {
            const std::string& n = op.kernel.name;
            return n.size() > 6 && n.compare(n.size() - 6, 6, "_quant") == 0;
        });
    };
    CHECK(count(layer_forward(m, 3, 0, decode, o)) == 0);  // without the key: none
    o.fp8_input_quant_group = 128;
    const auto moe = layer_forward(m, 3, 0, decode, o);
    const auto dense = layer_forward(m, 0, 0, decode, o);
    // Rows x width: read 2 bytes an element (BF16), written 1 (FP8) and an
    // FP32 scale per 128 of a row.
    const auto check_quant = [](const Operator& q, double rows, double width) {
        CHECK(q.kernel.kind == KernelKind::elementwise);
        CHECK(q.kernel.bytes_read.as_double() == rows * width * 2);
        CHECK(q.kernel.bytes_written.as_double() == rows * width + rows * (width / 128) * 4);
    };
    // The hidden states into q_down, kv_down, the shared expert and the
    // routed experts (quantized once for all 8 copies of a token):
    // 4 x 7168 x 2 = 57 344 read, 28 672 + 4 x 56 x 4 = 29 568 written.
    for (const char* n : {"q_down_quant", "kv_down_quant", "shared_expert_up_quant", "moe_input_quant"}) {
        CAPTURE(n);
        check_quant(find(moe, n), 4, 7168);
        CHECK(find(moe, n).kernel.bytes_written.as_double() == 29'568);
    }
    check_quant(find(moe, "q_uk_quant"), 4, 1536);                 // the q latent
    check_quant(find(moe, "out_proj_quant"), 4, 16 * 512);         // 16 heads' latent outputs
    check_quant(find(moe, "shared_expert_down_quant"), 4, 256);    // 2048 / 8
    check_quant(find(moe, "grouped_expert_down_quant"), 32, 256);  // 4 x 8 routed copies
    CHECK(count(moe) == 8);
    // Not before the router (BF16 in vLLM), W_QR (BF16) or the routed up
    // GEMM (it reads the rows moe_input_quant wrote).
    CHECK_FALSE(has(moe, "router_quant"));
    CHECK_FALSE(has(moe, "q_rope_quant"));
    CHECK_FALSE(has(moe, "grouped_expert_up_quant"));
    // The dense layer: q_down, kv_down, q_uk, out_proj, the MLP's up (7168
    // wide) and down (18 432 / 8 = 2304 wide).
    CHECK(count(dense) == 6);
    check_quant(find(dense, "mlp_down_quant"), 4, 2304);
    // A step of 3 dense and 58 MoE layers: 3 x 6 + 58 x 8 = 482 kernels.
    // Training keeps Transformer Engine's casts instead.
    o.inference = false;
    CHECK(count(layer_forward(m, 3, 0, PassShape{4, 16, 16}, o)) == 0);
}

TEST_CASE("DeepSeek's group-limited routing as vLLM 0.7 compiled it: 10 kernels, each a pass over FP32 scores") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o = fp8_tp8();
    const PassShape decode{4, 1, 1000};
    const auto routing = [](const std::vector<Operator>& ops) { return count_prefixed(ops, "router_topk"); };
    CHECK(routing(layer_forward(m, 3, 0, decode, o)) == 1);
    o.grouped_topk_kernels = 10;
    const auto ops = layer_forward(m, 3, 0, decode, o);
    CHECK(routing(ops) == 10);
    // 4 tokens x 256 experts x 4 bytes = 4096 read and written by each added kernel.
    CHECK(find(ops, "router_topk_9").kernel.bytes_read.as_double() == 4096);
    CHECK(find(ops, "router_topk_9").kernel.bytes_written.as_double() == 4096);
    // A model without expert groups routes in one kernel whatever the key.
    CHECK(routing(layer_forward(shipped("mixtral-8x7b"), 0, 0, decode, o)) == 1);
}

TEST_CASE("vLLM 0.7's DeepseekV2MoE scales the routed output and adds the shared experts' in two kernels") {
    OperatorOptions o = fp8_tp8();
    const PassShape decode{4, 1, 1000};
    const auto added = [](const std::vector<Operator>& ops) { return count_prefixed(ops, "moe_shared_combine"); };
    const auto before = layer_forward(shipped("deepseek-v3"), 3, 0, decode, o);
    CHECK(added(before) == 0);
    o.shared_expert_combine_kernels = 2;
    const auto ops = layer_forward(shipped("deepseek-v3"), 3, 0, decode, o);
    REQUIRE(ops.size() == before.size() + 2);
    // 4 tokens x 7168 x 2 bytes = 57 344: the scale reads the combined output
    // and writes it; the add reads it and the shared output.
    const Operator& scale = find(ops, "moe_shared_combine_0");
    const Operator& add = find(ops, "moe_shared_combine_1");
    CHECK(scale.kernel.bytes_read.as_double() == 57344);
    CHECK(scale.kernel.bytes_written.as_double() == 57344);
    CHECK(add.kernel.bytes_read.as_double() == 2 * 57344);
    CHECK(add.kernel.bytes_written.as_double() == 57344);
    // The layer's all-reduce moves from the combine to the last of them.
    CHECK(add.tp_sync == TpSync::after_row_parallel);
    CHECK(scale.tp_sync == TpSync::none);
    CHECK(find(ops, "moe_combine").tp_sync == TpSync::none);
    CHECK(find(before, "moe_combine").tp_sync == TpSync::after_row_parallel);
    CHECK(std::count_if(ops.begin(), ops.end(), [](const Operator& op) { return op.tp_sync != TpSync::none; }) ==
          std::count_if(before.begin(), before.end(), [](const Operator& op) { return op.tp_sync != TpSync::none; }));
    // A model without shared experts has none whatever the key.
    CHECK(added(layer_forward(shipped("mixtral-8x7b"), 0, 0, decode, o)) == 0);
}

TEST_SUITE_END();
