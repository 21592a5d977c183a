// Per-layer operators: hand-checked FLOPs, bytes, shapes, TP syncs, fusion,
// recompute and the memory closed forms.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>

#include "sim/config/model_loader.h"
#include "sim/hw/dtype.h"
#include "sim/workload/footprint.h"
#include "sim/workload/model.h"
#include "sim/workload/op_builders.h"
#include "sim/workload/operators.h"

#include "tests/workload/operator_helpers.h"

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim::workload;
using namespace parasim_workload_tests;
using sim::hw::DType;
using sim::hw::KernelKind;

TEST_CASE("dtype sizes and names") {
    CHECK(sim::hw::bytes_per_element(DType::fp32) == 4);
    CHECK(sim::hw::bytes_per_element(DType::tf32) == 4);
    CHECK(sim::hw::bytes_per_element(DType::fp16) == 2);
    CHECK(sim::hw::bytes_per_element(DType::bf16) == 2);
    CHECK(sim::hw::bytes_per_element(DType::fp8) == 1);
    CHECK(sim::hw::bytes_per_element(DType::int8) == 1);
    for (DType t : sim::hw::kAllDTypes) CHECK(sim::hw::parse_dtype(sim::hw::to_string(t)) == t);
    CHECK_FALSE(sim::hw::parse_dtype("float16").has_value());
}

TEST_CASE("QKV GEMM FLOPs are 2*b*s*h*(h + 2*kv*d) and halve with tp = 2") {
    const ModelSpec m = shipped("llama3-8b");
    const PassShape s{2, 512, 512};
    OperatorOptions o;
    const double b = 2, seq = 512, h = 4096, kv = 8, d = 128;
    const Operator qkv = find(layer_forward(m, 0, 0, s, o), "qkv");
    CHECK(flops(qkv) == doctest::Approx(2 * b * seq * h * (h + 2 * kv * d)));
    CHECK(qkv.kernel.m == 1024);
    CHECK(qkv.kernel.n == 4096 + 2 * 1024);
    CHECK(qkv.kernel.k == 4096);
    CHECK(qkv.kernel.dtype == DType::bf16);
    // Weight TensorUse: this layer's QKV weight, its size in bytes.
    const auto w = std::find_if(qkv.kernel.tensors.begin(), qkv.kernel.tensors.end(),
                                [](const auto& t) { return t.id == weight_tensor_id(0, 0); });
    REQUIRE(w != qkv.kernel.tensors.end());
    CHECK(w->size.value == 4096u * 6144u * 2u);
    CHECK(qkv.tp_sync == TpSync::none);
    o.tp = 2;
    const Operator qkv2 = find(layer_forward(m, 0, 0, s, o), "qkv");
    CHECK(flops(qkv2) == doctest::Approx(flops(qkv) / 2));
    CHECK(qkv2.kernel.n == 6144 / 2);
}

TEST_CASE("every GEMM has its shape and every weight GEMM its weight tensor") {
    for (const ModelSpec& m : {shipped("llama3-8b"), gpt_like(), shipped("mixtral-8x7b")}) {
        CAPTURE(m.name);
        OperatorOptions o;
        o.tp = 2;
        auto ops = layer_forward(m, 1, 3, PassShape{1, 128, 128}, o);
        const auto bwd = layer_backward(m, 1, 3, PassShape{1, 128, 128}, o, Recompute::none);
        ops.insert(ops.end(), bwd.begin(), bwd.end());
        for (const auto& op : ops) {
            CAPTURE(op.kernel.name);
            CHECK(op.kernel.bytes_read.value > 0);
            CHECK(op.kernel.bytes_written.value > 0);
            CHECK_FALSE(op.kernel.tensors.empty());
            if (op.kernel.kind != KernelKind::gemm) continue;
            CHECK(op.kernel.m > 0);
            CHECK(op.kernel.n > 0);
            CHECK(op.kernel.k > 0);
            CHECK(flops(op) == doctest::Approx(2.0 * op.kernel.m * op.kernel.n * op.kernel.k * op.kernel.batch));
            if (is_weight_gemm(op)) {
                const bool has_weight =
                    std::any_of(op.kernel.tensors.begin(), op.kernel.tensors.end(), [](const auto& t) {
                        return (t.id >> 62) == 1;  // weight kind
                    });
                CHECK(has_weight);
            }
        }
    }
}

TEST_CASE("flash attention FLOPs: 4*b*h*s*s*d, halved for causal prefill, full context in decode") {
    const ModelSpec m = shipped("llama3-8b");
    OperatorOptions o;
    const double b = 2, a = 32, d = 128;
    const Operator causal = find(layer_forward(m, 0, 0, PassShape{2, 1024, 1024}, o), "attention");
    CHECK(flops(causal) == doctest::Approx(4 * b * a * 1024 * 1024 * d / 2));
    CHECK(causal.kernel.kind == KernelKind::attention);
    o.causal = false;
    CHECK(flops(find(layer_forward(m, 0, 0, PassShape{2, 1024, 1024}, o), "attention")) ==
          doctest::Approx(4 * b * a * 1024 * 1024 * d));
    o.causal = true;
    const Operator decode = find(layer_forward(m, 0, 0, PassShape{2, 1, 5000}, o), "attention");
    CHECK(flops(decode) == doctest::Approx(4 * b * a * 1 * 5000 * d));
    // A chunk of 1000 new tokens after 4000 cached ones: the cache fully, the chunk causally.
    const Operator chunk = find(layer_forward(m, 0, 0, PassShape{2, 1000, 5000}, o), "attention");
    CHECK(flops(chunk) == doctest::Approx(4 * b * a * (1000.0 * 4000 + 1000.0 * 1000 / 2) * d));
}

TEST_CASE("the reference experiment's shapes do not overflow") {
    const ModelSpec m = shipped("dense16-h8192");
    OperatorOptions o;
    o.precision.compute = DType::fp16;
    o.precision.weights = DType::fp16;
    o.precision.kv = DType::fp16;
    o.inference = true;
    o.flash_attention = false;
    const auto prefill = layer_forward(m, 0, 0, PassShape{1024, 10000, 10000}, o);
    // 1024 x 16 x 10000^2 scores in FP16: 3.3 PB.
    CHECK(wr(find(prefill, "attention_scores")) == doctest::Approx(1024.0 * 16 * 1e8 * 2));
    // The per-layer activation is 1024 x 10000 x 8192 x 2 bytes = 168 GB, not 0.16 GB.
    CHECK(boundary_activation_bytes(m, PassShape{1024, 10000, 10000}, o).as_double() ==
          doctest::Approx(167.77e9).epsilon(0.001));
    // A layer's FP16 weights are about 1.6 GB.
    CHECK(layer_weight_bytes(m, o).as_double() == doctest::Approx(1.61e9).epsilon(0.01));
    // KV cache of all 16 layers for 1024 x 10128 tokens: 10.9 TB, far beyond 16 x 80 GB.
    CHECK(16 * layer_kv_bytes(m, 1024, 10128, o).as_double() == doctest::Approx(2.0 * 16 * 8192 * 2 * 10128 * 1024));
}

TEST_CASE("decode reads the whole KV cache and all the weights") {
    const ModelSpec m = shipped("llama3-8b");
    OperatorOptions o;
    o.inference = true;
    o.precision.kv = DType::fp8;
    const std::int64_t b = 4, ctx = 3000;
    const auto ops = layer_forward(m, 5, 2, PassShape{b, 1, ctx}, o);
    const Operator& att = find(ops, "attention");
    const double q = b * 32 * 128 * 2.0;
    CHECK(rd(att) == doctest::Approx(layer_kv_bytes(m, b, ctx, o).as_double() + q));
    // KV bytes = 2 * kv_heads * head_dim * bytes * context * batch per layer.
    CHECK(layer_kv_bytes(m, b, ctx, o).as_double() == doctest::Approx(2.0 * 8 * 128 * 1 * ctx * b));
    const auto kv = std::find_if(att.kernel.tensors.begin(), att.kernel.tensors.end(),
                                 [](const auto& t) { return t.id == kv_tensor_id(5, 2); });
    REQUIRE(kv != att.kernel.tensors.end());
    CHECK(kv->size.as_double() == doctest::Approx(layer_kv_bytes(m, b, ctx, o).as_double()));
    // Every weight byte of the layer is read once (GEMV, m = batch).
    double weights = 0;
    for (const auto& op : ops) {
        if (!is_weight_gemm(op)) continue;
        CHECK(op.kernel.m == b);
        for (const auto& t : op.kernel.tensors) {
            if ((t.id >> 62) == 1) weights += t.size.as_double();
        }
    }
    CHECK(weights == doctest::Approx(layer_weight_bytes(m, o).as_double() - 2 * 4096 * 2.0));  // all but the norms
    // The new token's K and V are written once, at the KV dtype.
    CHECK(wr(find(ops, "qkv")) == doctest::Approx(b * (32 * 128 * 2.0 + 2 * 8 * 128 * 1.0)));
}

TEST_CASE("KV cache of the model is 2 * layers * kv_heads * head_dim * bytes * context * batch") {
    const ModelSpec m = shipped("llama3-70b");
    OperatorOptions o;
    o.precision.kv = DType::fp16;
    const double total = m.layers * layer_kv_bytes(m, 16, 8192, o).as_double();
    CHECK(total == doctest::Approx(2.0 * 80 * 8 * 128 * 2 * 8192 * 16));
    o.tp = 8;  // one KV head per shard
    CHECK(layer_kv_bytes(m, 16, 8192, o).as_double() * 8 == doctest::Approx(total / m.layers));
    o.tp = 16;  // KV heads replicated: each shard still holds one head
    CHECK(layer_kv_bytes(m, 16, 8192, o).as_double() * 8 == doctest::Approx(total / m.layers));
    o.tp = 3;
    CHECK_THROWS_AS(layer_kv_bytes(m, 16, 8192, o).as_double(), sim::ModelError);
}

TEST_CASE("naive attention materialises the b*h*s*s score matrix in HBM") {
    const ModelSpec m = gpt_like();
    OperatorOptions o;
    o.flash_attention = false;
    const double b = 2, s = 1024, a = 16, d = 64;
    const auto ops = layer_forward(m, 0, 0, PassShape{2, 1024, 1024}, o);
    CHECK_FALSE(has(ops, "attention"));
    const Operator& qk = find(ops, "attention_scores");
    const Operator& sm = find(ops, "softmax");
    const Operator& pv = find(ops, "attention_values");
    const double scores = b * a * s * s * 2;
    CHECK(wr(qk) == doctest::Approx(scores));
    CHECK(rd(sm) == doctest::Approx(scores));
    CHECK(wr(sm) == doctest::Approx(scores));
    CHECK(rd(pv) == doctest::Approx(scores + b * s * a * d * 2));
    CHECK(qk.kernel.batch == 32);
    CHECK(qk.kernel.m == 1024);
    CHECK(qk.kernel.n == 1024);
    CHECK(qk.kernel.k == 64);
    // Unfused attention computes the masked half too.
    CHECK(flops(qk) + flops(pv) == doctest::Approx(4 * b * a * s * s * d));
}

TEST_CASE("fusion folds residual+norm and bias+activation, dropping round trips and launches") {
    const ModelSpec m = gpt_like();
    OperatorOptions fused, plain;
    plain.fuse_elementwise = false;
    const PassShape s{4, 512, 512};
    const auto f = layer_forward(m, 0, 0, s, fused);
    const auto p = layer_forward(m, 0, 0, s, plain);
    CHECK(f.size() < p.size());
    CHECK(has(f, "bias_residual_add_norm2"));
    CHECK(has(f, "mlp_bias_gelu"));
    CHECK(has(p, "residual_add1"));
    CHECK(has(p, "norm2"));
    CHECK(has(p, "mlp_bias_add"));
    CHECK(has(p, "mlp_gelu"));
    auto bytes = [](const std::vector<Operator>& ops) {
        double b = 0;
        for (const auto& o : ops) b += rd(o) + wr(o);
        return b;
    };
    CHECK(bytes(f) < bytes(p));
    // The elementwise round trips removed: out-proj bias (2 xs), residual (1 read of xs),
    // MLP bias (2 * b*s*f), MLP down bias (2 xs).
    const double xs = 4 * 512 * 1024 * 2.0, fs = 4 * 512 * 4096 * 2.0;
    CHECK(bytes(p) - bytes(f) == doctest::Approx(2 * xs + xs + 2 * fs + 2 * xs).epsilon(1e-6));
    // GEMMs unchanged.
    CHECK(flops(find(f, "mlp_up")) == flops(find(p, "mlp_up")));
    // SwiGLU: silu + gate multiply fuse into one kernel.
    const ModelSpec l = shipped("llama3-8b");
    CHECK(has(layer_forward(l, 0, 0, s, fused), "mlp_swiglu"));
    const auto lp = layer_forward(l, 0, 0, s, plain);
    CHECK(has(lp, "mlp_silu"));
    CHECK(has(lp, "mlp_gate_mul"));
}

TEST_CASE("tensor parallel syncs follow the Megatron layout") {
    const ModelSpec m = shipped("llama3-8b");
    OperatorOptions o;
    o.tp = 4;
    const PassShape s{2, 1024, 1024};
    const double full = 2 * 1024 * 4096 * 2.0;
    auto fwd = layer_forward(m, 0, 0, s, o);
    int syncs = 0;
    for (const auto& op : fwd) syncs += op.tp_sync != TpSync::none;
    CHECK(syncs == 2);
    CHECK(find(fwd, "out_proj").tp_sync == TpSync::after_row_parallel);
    CHECK(find(fwd, "out_proj").tp_sync_bytes.as_double() == full);
    CHECK(find(fwd, "mlp_down").tp_sync == TpSync::after_row_parallel);
    CHECK(find(fwd, "norm1").kernel.bytes_written.as_double() == full);
    auto bwd = layer_backward(m, 0, 0, s, o, Recompute::none);
    CHECK(find(bwd, "qkv_dgrad").tp_sync == TpSync::after_column_input_grad);
    CHECK(find(bwd, "mlp_up_dgrad").tp_sync == TpSync::after_column_input_grad);
    CHECK(find(bwd, "qkv_wgrad").tp_sync == TpSync::none);
    // Sequence parallel: norms on 1/tp of the tokens, all-gathers before the column-parallel GEMMs.
    o.sequence_parallel = true;
    fwd = layer_forward(m, 0, 0, s, o);
    CHECK(find(fwd, "norm1").kernel.bytes_written.as_double() == full / 4);
    CHECK(find(fwd, "qkv").tp_sync == TpSync::before_column_parallel);
    CHECK(find(fwd, "qkv").tp_sync_bytes.as_double() == full);
    CHECK(find(fwd, "mlp_up").tp_sync == TpSync::before_column_parallel);
    CHECK(find(fwd, "out_proj").tp_sync == TpSync::after_row_parallel);
    bwd = layer_backward(m, 0, 0, s, o, Recompute::none);
    CHECK(find(bwd, "qkv_wgrad").tp_sync == TpSync::before_column_parallel);  // the input is gathered again
    CHECK(find(bwd, "mlp_down_dgrad").tp_sync == TpSync::before_column_parallel);
    // tp = 1: no syncs at all.
    o.tp = 1;
    for (const auto& op : layer_forward(m, 0, 0, s, o)) CHECK(op.tp_sync == TpSync::none);
    // Heads must split evenly.
    o.tp = 3;
    CHECK_THROWS_AS(layer_forward(m, 0, 0, s, o), sim::ModelError);
}

TEST_CASE("backward: a dgrad and a wgrad per forward GEMM, each 2*m*n*k") {
    const ModelSpec m = gpt_like();
    OperatorOptions o;
    o.flash_attention = false;
    const PassShape s{2, 256, 256};
    const auto fwd = layer_forward(m, 0, 0, s, o);
    const auto bwd = layer_backward(m, 0, 0, s, o, Recompute::none);
    for (const std::string name : {"qkv", "out_proj", "mlp_up", "mlp_down"}) {
        CAPTURE(name);
        const Operator& f = find(fwd, name);
        const Operator& dg = find(bwd, name + "_dgrad");
        const Operator& wg = find(bwd, name + "_wgrad");
        CHECK(flops(dg) == flops(f));
        CHECK(flops(wg) == flops(f));
        CHECK(wg.is_weight_grad);
        CHECK_FALSE(dg.is_weight_grad);
        CHECK(dg.kernel.m == f.kernel.m);
        CHECK(dg.kernel.n == f.kernel.k);
        CHECK(wg.kernel.k == f.kernel.m);
    }
    // Unfused attention: backward is exactly twice the forward; overall about 2x.
    double gf = 0, gb = 0;
    for (const auto& op : fwd) gf += op.kernel.kind == KernelKind::gemm ? flops(op) : 0;
    for (const auto& op : bwd) gb += op.kernel.kind == KernelKind::gemm ? flops(op) : 0;
    CHECK(gb == doctest::Approx(2 * gf));
    // Flash, counted as the FlashAttention papers count it: the forward runs 2
    // matmuls (QK^T, PV), the backward 5 (QK^T again, dV, dP, dQ, dK), each
    // 2*b*heads*t*c*d FLOPs, halved by the causal mask: b 2, heads 16, t = c
    // 256, d 64 gives 2*2*16*256*256*64/2 = 134,217,728 per matmul.
    o.flash_attention = true;
    CHECK(flops(find(layer_forward(m, 0, 0, s, o), "attention")) == doctest::Approx(2 * 134'217'728.0));
    CHECK(flops(find(layer_backward(m, 0, 0, s, o, Recompute::none), "attention_bwd")) ==
          doctest::Approx(5 * 134'217'728.0));
}

TEST_CASE("recompute: full re-runs the forward, selective only the attention core") {
    const ModelSpec m = gpt_like();
    OperatorOptions o;
    const PassShape s{2, 256, 256};
    const auto fwd = layer_forward(m, 0, 0, s, o);
    const double none = total_flops(layer_backward(m, 0, 0, s, o, Recompute::none));
    const auto full = layer_backward(m, 0, 0, s, o, Recompute::full);
    CHECK(total_flops(full) == doctest::Approx(none + total_flops(fwd)));
    CHECK(full.front().kernel.name == "recompute_norm1");
    const auto sel = layer_backward(m, 0, 0, s, o, Recompute::selective);
    CHECK(total_flops(sel) == doctest::Approx(none + flops(find(fwd, "attention"))));
    CHECK(has(sel, "recompute_attention"));
    CHECK_FALSE(has(sel, "recompute_qkv"));
}

TEST_CASE("activation memory matches Korthikanti's 34sbh + 5as^2b and its variants") {
    const ModelSpec m = gpt_like();  // 16-bit, ffn = 4h, a*d = h: the paper's shapes
    const double s = 2048, b = 4, h = 1024, a = 16;
    const PassShape shape{4, 2048, 2048};
    OperatorOptions o;
    o.precision.compute = DType::fp16;
    o.flash_attention = false;
    CHECK(layer_activation_bytes(m, shape, o, Recompute::none).as_double() ==
          doctest::Approx(34 * s * b * h + 5 * a * s * s * b));
    CHECK(layer_activation_bytes(m, shape, o, Recompute::selective).as_double() == doctest::Approx(34 * s * b * h));
    CHECK(layer_activation_bytes(m, shape, o, Recompute::full).as_double() == doctest::Approx(2 * s * b * h));
    const double t = 4;
    o.tp = 4;
    CHECK(layer_activation_bytes(m, shape, o, Recompute::none).as_double() ==
          doctest::Approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t))));
    o.sequence_parallel = true;
    CHECK(layer_activation_bytes(m, shape, o, Recompute::none).as_double() ==
          doctest::Approx(s * b * h / t * (34 + 5 * a * s / h)));
    CHECK(layer_activation_bytes(m, shape, o, Recompute::selective).as_double() == doctest::Approx(34 * s * b * h / t));
    CHECK(layer_activation_bytes(m, shape, o, Recompute::full).as_double() == doctest::Approx(2 * s * b * h / t));
    // Flash attention never stores the score matrix.
    o.flash_attention = true;
    CHECK(layer_activation_bytes(m, shape, o, Recompute::none).as_double() == doctest::Approx(34 * s * b * h / t));
}

TEST_CASE("weights per shard and training state") {
    const ModelSpec m = shipped("llama3-70b");
    OperatorOptions o;
    CHECK(layer_params_per_shard(m, o) == doctest::Approx(count_parameters(m).per_layer));
    CHECK(layer_weight_bytes(m, o).as_double() == doctest::Approx(2 * count_parameters(m).per_layer));
    o.tp = 8;
    // Everything but the two norms splits by 8.
    CHECK(layer_params_per_shard(m, o) == doctest::Approx((count_parameters(m).per_layer - 2 * 8192) / 8 + 2 * 8192));
    o.tp = 1;
    o.precision.weights = DType::int8;
    CHECK(layer_weight_bytes(m, o).as_double() == doctest::Approx(count_parameters(m).per_layer));
    CHECK(
        embedding_weight_bytes(m, o).as_double() + head_weight_bytes(m, o).as_double() ==
        doctest::Approx(count_parameters(m).embedding + count_parameters(m).lm_head + count_parameters(m).final_norm));
    o.precision.weights = DType::bf16;
    CHECK(training_state_bytes_per_param(o).total() == 16);  // 2 + 2 + 12 (ZeRO)
    o.precision.weights = DType::fp32;
    CHECK(training_state_bytes_per_param(o).total() == 16);  // 4 + 4 + 8, no master copy
    const Operator adam = optimizer_step(1e9, OperatorOptions{});
    CHECK(rd(adam) == doctest::Approx(14e9));  // bf16 grad + fp32 master, m, v
    CHECK(wr(adam) == doctest::Approx(14e9));  // fp32 master, m, v + bf16 weights
    CHECK(adam.kernel.dtype == DType::fp32);
}

TEST_CASE("tensor ids chain the layers: a layer's output is the next layer's input") {
    const ModelSpec m = gpt_like();
    OperatorOptions o;
    const PassShape s{1, 64, 64};
    const auto l0 = layer_forward(m, 0, 7, s, o);
    const auto l1 = layer_forward(m, 1, 7, s, o);
    const auto& out = l0.back().kernel.tensors;
    const auto& in = l1.front().kernel.tensors;
    const std::uint64_t link = activation_tensor_id(1, 0, 7);
    CHECK(std::any_of(out.begin(), out.end(), [&](const auto& t) { return t.id == link && t.write; }));
    CHECK(std::any_of(in.begin(), in.end(), [&](const auto& t) { return t.id == link && !t.write; }));
    const auto emb = embedding_forward(m, 7, s, o);
    CHECK(emb.front().kernel.tensors.front().id == activation_tensor_id(0, 0, 7));
    const auto head = head_forward(m, 7, s, o, true);
    CHECK(head.front().kernel.tensors.front().id == activation_tensor_id(m.layers, 0, 7));
    // Tied embeddings: the LM head reads the embedding table's tensor.
    const auto& lm = find(head, "lm_head").kernel.tensors;
    CHECK(
        std::any_of(lm.begin(), lm.end(), [&](const auto& t) { return t.id == weight_tensor_id(kEmbeddingLayer, 0); }));
    // Ids are distinct across layers, slots, micro-batches and kinds.
    std::set<std::uint64_t> ids{weight_tensor_id(0, 0),
                                weight_tensor_id(1, 0),
                                weight_tensor_id(0, 1),
                                activation_tensor_id(0, 0, 0),
                                activation_tensor_id(0, 0, 1),
                                kv_tensor_id(0, 0),
                                kv_tensor_id(0, 1),
                                kv_tensor_id(1, 0),
                                weight_tensor_id(kHeadLayer, 0),
                                weight_tensor_id(kEmbeddingLayer, 0)};
    CHECK(ids.size() == 10);
}

TEST_CASE("mixture of experts: router, top-k experts, all experts resident") {
    const ModelSpec m = shipped("mixtral-8x7b");
    OperatorOptions o;
    const auto prefill = layer_forward(m, 0, 0, PassShape{4, 1024, 1024}, o);
    CHECK(has(prefill, "router"));
    int experts = 0;
    for (const auto& op : prefill) experts += op.kernel.name == "expert_up";
    CHECK(experts == 8);
    // 4096 tokens * top-2 / 8 experts = 1024 tokens per expert.
    CHECK(find(prefill, "expert_up").kernel.m == 1024);
    // Decode of one sequence touches only its top-k experts.
    o.inference = true;
    const auto decode = layer_forward(m, 0, 0, PassShape{1, 1, 100}, o);
    experts = 0;
    for (const auto& op : decode) experts += op.kernel.name == "expert_up";
    CHECK(experts == 2);
    // Memory: all experts' weights.
    CHECK(layer_params_per_shard(m, o) == doctest::Approx(count_parameters(m).per_layer));
    // MoE training FLOPs match 6 N_active + attention.
    OperatorOptions t;
    t.flash_attention = false;
    t.causal = false;
    CHECK(training_hardware_flops_per_token(m, 4096, t, Recompute::none) ==
          doctest::Approx(training_flops_per_token(m, 4096)).epsilon(0.02));
}

TEST_CASE("precision: FP8 matmuls with BF16 activations, TF32 with FP32 storage, INT8 weights") {
    const ModelSpec m = shipped("llama3-8b");
    const PassShape s{1, 1, 100};
    OperatorOptions o;
    o.inference = true;
    o.precision.compute = DType::fp8;
    o.precision.weights = DType::fp8;
    auto ops = layer_forward(m, 0, 0, s, o);
    CHECK(find(ops, "qkv").kernel.dtype == DType::fp8);
    CHECK(find(ops, "attention").kernel.dtype == DType::bf16);
    CHECK(find(ops, "norm1").kernel.dtype == DType::bf16);
    o.precision.compute = DType::fp16;
    o.precision.weights = DType::int8;  // weight-only quantisation: half the weight bytes of FP16
    const double int8 = rd(find(layer_forward(m, 0, 0, s, o), "mlp_up"));
    o.precision.weights = DType::fp16;
    const double fp16 = rd(find(layer_forward(m, 0, 0, s, o), "mlp_up"));
    CHECK(int8 == doctest::Approx(fp16 / 2).epsilon(0.001));
    o.precision.compute = DType::tf32;
    o.precision.weights = DType::fp32;
    ops = layer_forward(m, 0, 0, PassShape{1, 16, 16}, o);
    CHECK(find(ops, "qkv").kernel.dtype == DType::tf32);
    CHECK(find(ops, "norm1").kernel.dtype == DType::fp32);
    CHECK(wr(find(ops, "norm1")) == doctest::Approx(16 * 4096 * 4.0));
}

TEST_CASE("FP8 training: a cast-transpose before each forward and dgrad GEMM, the LM head in BF16") {
    const ModelSpec m = gpt_like();
    const PassShape s{2, 256, 256};  // T = 512 tokens
    OperatorOptions o;
    o.precision.compute = DType::fp8;
    o.precision.weights = DType::fp8;
    const auto fwd = layer_forward(m, 0, 0, s, o);
    // qkv: M = 512 tokens, K = h = 1024; read in BF16, written twice in FP8.
    const Operator& cast = find(fwd, "qkv_cast_transpose");
    CHECK(cast.kernel.kind == KernelKind::elementwise);
    CHECK(rd(cast) == doctest::Approx(512 * 1024 * 2.0));
    CHECK(wr(cast) == doctest::Approx(2 * 512 * 1024 * 1.0));
    // The cast runs right before its GEMM.
    const auto at = [&](const std::vector<Operator>& ops, const std::string& name) {
        return std::find_if(ops.begin(), ops.end(), [&](const Operator& op) { return op.kernel.name == name; });
    };
    CHECK(at(fwd, "qkv_cast_transpose") + 1 == at(fwd, "qkv"));
    const auto bwd = layer_backward(m, 0, 0, s, o, Recompute::none);
    // out_proj's dgrad reads dY: M = 512, K = its output width h = 1024.
    CHECK(rd(find(bwd, "out_proj_dgrad_cast_transpose")) == doctest::Approx(512 * 1024 * 2.0));
    CHECK_FALSE(has(bwd, "out_proj_wgrad_cast_transpose"));
    CHECK_FALSE(has(fwd, "attention_cast_transpose"));
    // One cast per low-precision GEMM that is not a weight gradient.
    const auto count = [](const std::vector<Operator>& ops, bool casts) {
        return std::count_if(ops.begin(), ops.end(), [&](const Operator& op) {
            if (casts) return op.kernel.name.find("_cast_transpose") != std::string::npos;
            return op.kernel.kind == KernelKind::gemm && op.kernel.dtype == DType::fp8 && !op.is_weight_grad;
        });
    };
    CHECK(count(fwd, true) == 4);
    CHECK(count(fwd, true) == count(fwd, false));
    CHECK(count(bwd, true) == count(bwd, false));
    // BF16 training and FP8 inference: no casts.
    OperatorOptions bf16;
    CHECK(count(layer_forward(m, 0, 0, s, bf16), true) == 0);
    OperatorOptions infer = o;
    infer.inference = true;
    CHECK(count(layer_forward(m, 0, 0, s, infer), true) == 0);
    // The LM head: BF16 in training, FP8 in inference.
    CHECK(find(head_forward(m, 0, s, o, true), "lm_head").kernel.dtype == DType::bf16);
    CHECK(find(head_backward(m, 0, s, o), "lm_head_wgrad").kernel.dtype == DType::bf16);
    CHECK(find(head_forward(m, 0, s, infer, false), "lm_head").kernel.dtype == DType::fp8);
}

TEST_CASE("embedding and head") {
    const ModelSpec m = shipped("llama3-8b");
    OperatorOptions o;
    o.tp = 2;
    const PassShape s{2, 1024, 1024};
    const auto emb = embedding_forward(m, 0, s, o);
    CHECK(emb.front().kernel.kind == KernelKind::embedding);
    CHECK(emb.front().tp_sync == TpSync::after_row_parallel);
    const auto head = head_forward(m, 0, s, o, true);
    const Operator& lm = find(head, "lm_head");
    CHECK(lm.kernel.n == 128256 / 2);
    CHECK(lm.kernel.m == 2048);
    CHECK(flops(lm) == doctest::Approx(2.0 * 2048 * 4096 * 128256 / 2));
    CHECK(has(head, "cross_entropy"));
    // Inference: the LM head runs on the last token of each sequence only.
    o.inference = true;
    const auto inf = head_forward(m, 0, s, o, false);
    CHECK(find(inf, "lm_head").kernel.m == 2);
    CHECK(has(inf, "sampling"));
    const auto hb = head_backward(m, 0, s, o);
    CHECK(find(hb, "lm_head_dgrad").tp_sync == TpSync::after_column_input_grad);
    CHECK(find(hb, "lm_head_wgrad").is_weight_grad);
    CHECK(embedding_backward(m, 0, s, o).front().is_weight_grad);
    CHECK(workspace_bytes(m, s, o, true).as_double() > 2048 * 64128 * 6.0);
}

TEST_CASE("embedding backward: PyTorch's dense table gradient, then its add into the gradient storage") {
    const ModelSpec m = shipped("llama3-8b");  // vocab 128256, hidden 4096, RoPE (no position table)
    OperatorOptions o;
    o.tp = 2;
    o.precision.compute = DType::bf16;
    o.precision.weights = DType::bf16;
    const PassShape s{2, 1024, 1024};
    const auto ops = embedding_backward(m, 0, s, o);
    REQUIRE(ops.size() == 2u);
    const double table = 64128.0 * 4096;        // this shard's vocabulary rows x hidden
    const double rows = 2048.0 * 4096 * 2 / 2;  // the scatter's rows: 1/tp of the tokens, BF16
    const double dx = 2048.0 * 4096 * 2;        // the incoming gradient of the embedding output
    CHECK(ops[0].kernel.name == "embedding_bwd");
    CHECK(wr(ops[0]) == doctest::Approx(2 * table + rows));  // the zero-filled BF16 table, then the rows
    CHECK(rd(ops[0]) == doctest::Approx(dx + 2048.0 * 4 + rows));
    CHECK(ops[1].kernel.name == "embedding_grad_add");
    CHECK(ops[1].is_weight_grad);
    CHECK(rd(ops[1]) == doctest::Approx(4 * table));  // the dense gradient and the storage, 2 bytes each
    CHECK(wr(ops[1]) == doctest::Approx(2 * table));
}

TEST_CASE("cross-entropy: one fused pass each way, or Megatron's FP32 passes (52 bytes a BF16 logit)") {
    const ModelSpec m = shipped("llama3-8b");  // vocab 128256
    OperatorOptions o;
    o.tp = 2;
    const PassShape s{2, 1024, 1024};
    const double e = 2048.0 * (128256 / 2);  // logits on this rank: tokens x vocab / tp
    const double t4 = 2048.0 * 4;            // the per-token loss (one float each)
    // Fused (the default): read and write the BF16 logits once each way.
    CHECK(rd(find(head_forward(m, 0, s, o, true), "cross_entropy")) == doctest::Approx(2 * e + t4));
    CHECK(wr(find(head_forward(m, 0, s, o, true), "cross_entropy")) == doctest::Approx(2 * e + t4));
    CHECK(rd(find(head_backward(m, 0, s, o), "cross_entropy_bwd")) == doctest::Approx(2 * e + t4));
    CHECK(wr(find(head_backward(m, 0, s, o), "cross_entropy_bwd")) == doctest::Approx(2 * e));
    // FP32 unfused: forward cast (r 2, w 4), max (r 4), subtract, exp, divide (r 4, w 4 each), sum (r 4);
    // backward mul_ (r 4, w 4) and the cast back (r 4, w 2).
    o.cross_entropy_fp32_unfused = true;
    const auto forward = head_forward(m, 0, s, o, true);  // find() returns a reference into it
    const Operator& f = find(forward, "cross_entropy");
    CHECK(rd(f) == doctest::Approx(22 * e + t4));
    CHECK(wr(f) == doctest::Approx(16 * e + t4));
    const auto backward = head_backward(m, 0, s, o);
    const Operator& b = find(backward, "cross_entropy_bwd");
    CHECK(rd(b) == doctest::Approx(8 * e + t4));
    CHECK(wr(b) == doctest::Approx(6 * e));
    // FP32 activations: no casts.
    o.precision.compute = DType::fp32;
    o.precision.weights = DType::fp32;
    CHECK(rd(find(head_forward(m, 0, s, o, true), "cross_entropy")) == doctest::Approx(20 * e + t4));
    CHECK(wr(find(head_forward(m, 0, s, o, true), "cross_entropy")) == doctest::Approx(12 * e + t4));
    CHECK(rd(find(head_backward(m, 0, s, o), "cross_entropy_bwd")) == doctest::Approx(4 * e + t4));
    CHECK(wr(find(head_backward(m, 0, s, o), "cross_entropy_bwd")) == doctest::Approx(4 * e));
}

TEST_CASE(
    "dropout: a 1-byte mask per element, fused into the residual kernels, in flash attention, or its own kernel") {
    const ModelSpec m = gpt_like();
    const PassShape train{2, 512, 512};
    OperatorOptions plain;
    plain.precision.compute = DType::bf16;
    OperatorOptions drop = plain;
    drop.dropout = {0.1, 0.1};
    const double T = 2 * 512, h = 1024;  // tokens and hidden: mask bytes of one residual branch = T * h
    auto written = [](const std::vector<Operator>& ops) {
        double w = 0;
        for (const auto& o : ops) w += wr(o);
        return w;
    };
    // Fused (the default): no new kernel; the two residual kernels write a mask each.
    const auto f0 = layer_forward(m, 0, 0, train, plain), f1 = layer_forward(m, 0, 0, train, drop);
    CHECK(f1.size() == f0.size());
    CHECK(wr(find(f1, "bias_dropout_residual_add_norm2")) == wr(find(f0, "bias_residual_add_norm2")) + T * h);
    CHECK(wr(find(f1, "bias_dropout_residual_add2")) == wr(find(f0, "bias_residual_add2")) + T * h);
    CHECK(written(f1) == written(f0) + 2 * T * h);  // flash attention draws its dropout in the kernel
    // Backward: each branch's gradient through its mask, reading 2 bytes + 1 byte per element.
    const auto b0 = layer_backward(m, 0, 0, train, plain, Recompute::none);
    const auto b1 = layer_backward(m, 0, 0, train, drop, Recompute::none);
    CHECK(b1.size() == b0.size() + 2);
    CHECK(rd(find(b1, "mlp_dropout_bwd")) == T * h * 2 + T * h);
    CHECK(wr(find(b1, "out_proj_dropout_bwd")) == T * h * 2);
    // Naive attention: the probabilities' dropout is a kernel over b * heads * s * s elements.
    OperatorOptions naive = drop;
    naive.flash_attention = false;
    const auto n1 = layer_forward(m, 0, 0, train, naive);
    const double probs = 2.0 * 16 * 512 * 512;
    const auto& ad = find(n1, "attention_dropout");
    CHECK(rd(ad) == probs * 2);
    CHECK(wr(ad) == probs * 2 + probs);
    CHECK(has(layer_backward(m, 0, 0, train, naive, Recompute::none), "attention_dropout_bwd"));
    // Unfused elementwise work: the hidden dropout is its own kernel on each branch.
    OperatorOptions unfused = drop;
    unfused.fuse_elementwise = false;
    CHECK(wr(find(layer_forward(m, 0, 0, train, unfused), "mlp_dropout")) == T * h * 2 + T * h);
    // Inference never drops.
    OperatorOptions infer = drop;
    infer.inference = true;
    OperatorOptions infer0 = plain;
    infer0.inference = true;
    CHECK(written(layer_forward(m, 0, 0, train, infer)) == written(layer_forward(m, 0, 0, train, infer0)));
}

TEST_CASE("attention implementations time as the kernel measured for them") {
    CHECK(attention_kernel_of(AttentionImpl::flash3) == sim::hw::AttentionKernel::best);
    CHECK(attention_kernel_of(AttentionImpl::cudnn) == sim::hw::AttentionKernel::cudnn);
    CHECK(attention_kernel_of(AttentionImpl::triton) == sim::hw::AttentionKernel::triton);
    CHECK(attention_kernel_of(AttentionImpl::flash1) == sim::hw::AttentionKernel::flash2);
    OperatorOptions o;
    o.attention_kernel = sim::hw::AttentionKernel::flash2;
    const auto fwd = layer_forward(gpt_like(), 0, 0, {1, 256, 256}, o);
    CHECK(find(fwd, "attention").kernel.attention_kernel == sim::hw::AttentionKernel::flash2);
    const auto bwd = layer_backward(gpt_like(), 0, 0, {1, 256, 256}, o, Recompute::none);
    CHECK(find(bwd, "attention_bwd").kernel.attention_kernel == sim::hw::AttentionKernel::flash2);
    CHECK(std::string(to_string(AttentionImpl::xformers)) == "xformers");
}

TEST_SUITE_END();
