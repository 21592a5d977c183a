// The grouped-query attention block (MHA, GQA, MQA): the fused QKV
// projection (with Qwen2's q/k/v biases), Qwen3's per-head q/k norms and
// the attention core, up to the output projection (docs/workload-model.md,
// rows 2-3). The MLA block is mla_ops.cpp; the layer around both is
// operators.cpp.
#include "sim/workload/op_builders.h"

namespace sim::workload::ops {

namespace {

// The fused QKV projection: column-parallel. Its outputs are what the core
// reads (Q, and K and V apart or together), or in decode Q and the new
// tokens' K and V, which go straight into the cache (an epilogue write; the
// core then reads the cache for the whole context).
Linear qkv_linear(const Dims& x) {
    const AttentionTensors t = attention_tensors(x);
    const std::vector<TensorUse> core =
        x.o->flash_attention ? std::vector<TensorUse>{t.q, t.kv[0]} : std::vector<TensorUse>{t.q, t.k[0], t.v[0]};
    const double new_kv = 2.0 * static_cast<double>(x.T * x.g_p * x.d) * x.kb;
    const bool decode = x.s.context > x.s.new_tokens;
    Linear l = column_parallel_linear(x, "qkv", wslot::qkv, x.T, x.h, (x.a_p + 2 * x.g_p) * x.d,
                                      use(x.act(aslot::norm1), full_act(x)),
                                      decode ? std::vector<TensorUse>{t.q, use(x.act(aslot::kv_new), new_kv)} : core);
    l.y_bytes = q_bytes(x) + new_kv;
    l.dy_reads = grads_of(core, false);  // a backward (no cache) reads the gradients of what the core read
    l.bias_in_gemm = x.bias.qkv;
    l.has_bias = l.bias_in_gemm;
    return l;
}

// Qwen3's RMSNorm of every query and key head (in place on the QKV output;
// its backward twice the FLOPs and reads the gradient too).
Operator qk_norm_op(const Dims& x, bool backward) {
    const double elems = static_cast<double>(x.T * (x.a_p + x.g_p) * x.d);
    const double bytes = elems * x.ab, w = 2.0 * static_cast<double>(x.d) * x.wb;
    const std::uint64_t q = x.act(aslot::q);
    if (!backward)
        return elementwise(x, "qk_norm", kRmsNormFlops * elems, bytes + w, bytes, {use(q, bytes), use(q, bytes, true)});
    return elementwise(x, "qk_norm_bwd", 2 * kRmsNormFlops * elems, 2 * bytes + w, bytes,
                       {use(flagged(q, kGrad), bytes), use(q, bytes), use(flagged(q, kGrad), bytes, true)});
}

}  // namespace

void gqa_block_forward(const Dims& x, std::vector<Operator>& ops) {
    ops.push_back(linear_forward(x, qkv_linear(x)));
    if (x.m->qk_norm()) ops.push_back(qk_norm_op(x, false));
    attention_forward(x, ops);
}

void gqa_block_backward(const Dims& x, std::vector<Operator>& ops, Recompute recompute) {
    if (recompute == Recompute::selective && x.o->recompute_modules.core_attn) recompute_attention_core(x, ops);
    attention_backward(x, ops);
    if (x.m->qk_norm()) ops.push_back(qk_norm_op(x, true));
    const Linear qkv = qkv_linear(x);
    ops.push_back(linear_dgrad(x, qkv));
    ops.push_back(linear_wgrad(x, qkv));
}

void recompute_attention_core(const Dims& x, std::vector<Operator>& ops) {
    std::vector<Operator> fwd;
    attention_forward(x, fwd);
    for (auto& op : fwd) {
        op.kernel.name = "recompute_" + op.kernel.name;
        ops.push_back(std::move(op));
    }
}

}  // namespace sim::workload::ops
