// The multi-head latent attention block (DeepSeek-V2/V3; docs/workload-model.md,
// "Multi-head latent attention"): the q down/up projections (or one q
// projection) with the q latent's RMSNorm, the kv down projection to the
// latent and the shared rope key with the latent's RMSNorm, and then
//  - a whole prompt or a training pass: the kv up projection to per-head
//    keys and values, the attention core on heads x (qk_nope + qk_rope) keys
//    and v_head_dim values;
//  - decode (tokens that attend a cache): the absorbed path, which never
//    expands the cache: q_nope x W_UK gives a latent query per head, the core
//    attends the latent cache as one shared KV head (keys kv_lora + rope,
//    values the kv_lora latent), and the latent output x W_UV gives each
//    head's value; or, with the matrices absorbed at load
//    (mla_absorbed_weights), the q latent x W_Q_UK and x W_QR give the
//    latent query and the latent output x W_UV_O is the output projection.
// Down projections are replicated over TP ranks and the up projections split
// by head (Megatron-Core's layout): the up projections' input gradients are
// all-reduced over TP, latent-sized.
#include "sim/workload/op_builders.h"

namespace sim::workload::ops {

namespace {

double lat_bytes(const Dims& x, std::int64_t width) { return static_cast<double>(x.T * width) * x.ab; }

// A replicated projection from the (gathered) norm output to a latent of
// `width`, written to slot `out`; its input gradient is whole (not partial).
Linear down_linear(const Dims& x, const char* name, int weight, std::int64_t width, int out) {
    return replicated_linear(x, name, weight, x.T, x.h, width, use(x.act(aslot::norm1), full_act(x)),
                             {use(x.act(out), lat_bytes(x, width))});
}

// A column-parallel projection from a latent of `width` (slot `in`) to the
// heads of this shard, `out` wide, with the outputs given. The latent is
// whole on every rank (not sequence-sharded): no gather; only the latent's
// gradient is summed over the heads' shards.
Linear up_linear(const Dims& x, const char* name, int weight, std::int64_t width, int in, std::int64_t out,
                 const std::vector<TensorUse>& outputs) {
    Linear l = plain_linear(name, weight, x.T, width, out, use(x.act(in), lat_bytes(x, width)), outputs);
    l.y_bytes = 0;  // what the epilogue writes: kv_up's keys carry the shared rope key too
    for (const auto& u : outputs) l.y_bytes += u.size.as_double();
    l.dgrad_sync = TpSync::after_column_input_grad;
    l.sync_bytes = lat_bytes(x, width);
    return l;
}

// The query projections: down (+ norm) and up, or one projection from the
// norm output (q_lora_rank 0, DeepSeek-V2-Lite). Both write the queries of
// this shard's heads, heads x (qk_nope + qk_rope).
struct QPath {
    Linear down, up;
    bool low_rank = false;
};

QPath q_path(const Dims& x) {
    const MlaAttention& a = *x.mla;
    const std::int64_t q_out = x.a_p * a.qk_head_dim();
    const TensorUse q = use(x.act(aslot::q), static_cast<double>(x.T * q_out) * x.ab);
    QPath p;
    p.low_rank = a.q_lora_rank > 0;
    if (!p.low_rank) {
        // One column-parallel projection from the norm output, like GQA's
        // QKV; under SP kv_down's weight gradient gathers the norm output
        // again for both (kv_down_linear).
        p.up = column_parallel_linear(x, "q_proj", wslot::qkv, x.T, x.h, q_out, use(x.act(aslot::norm1), full_act(x)),
                                      {q});
        p.up.wgrad_sync = TpSync::none;
        return p;
    }
    p.down = down_linear(x, "q_down", wslot::q_down, a.q_lora_rank, aslot::q_latent);
    p.down.fwd_sync = x.sp ? TpSync::before_column_parallel : TpSync::none;
    p.down.sync_bytes = full_act(x);
    p.up = up_linear(x, "q_up", wslot::q_up, a.q_lora_rank, aslot::q_latent_norm, q_out, {q});
    return p;
}

Linear kv_down_linear(const Dims& x) {
    const MlaAttention& a = *x.mla;
    Linear l = down_linear(x, "kv_down", wslot::kv_down, a.cache_width(), aslot::kv_latent);
    // Its input gradient is the kv path's share, added to the q path's (mla_dx_add).
    l.dx_writes = {use(flagged(x.act(aslot::mla_dx), kGrad), full_act(x), true)};
    // Under SP the backward re-gathers the norm output once, for both
    // down projections' weight gradients (kv's runs first).
    l.wgrad_sync = x.sp ? TpSync::before_column_parallel : TpSync::none;
    l.sync_bytes = full_act(x);
    return l;
}

// kv up: each head's nope key and value from the latent. Its epilogue
// writes the keys with the shared rope key appended (qk_nope + qk_rope) and
// the values, as the attention core reads them.
Linear kv_up_linear(const Dims& x) {
    const MlaAttention& a = *x.mla;
    const AttentionTensors t = attention_tensors(x);
    return up_linear(x, "kv_up", wslot::kv_up, a.kv_lora_rank, aslot::kv_latent_norm,
                     x.a_p * (a.qk_nope_head_dim + a.v_head_dim), {t.kv[0]});
}

// RMSNorm of a latent of `width` (in slot `in`) to `outputs`; the kv latent's
// rope key passes through (and, in inference, both go to the KV cache).
Operator latent_norm(const Dims& x, const char* name, int weight, std::int64_t width, int in,
                     std::vector<TensorUse> outputs) {
    const double elems = static_cast<double>(x.T * width), w = static_cast<double>(width) * x.wb;
    double written = 0;
    for (const auto& u : outputs) written += u.size.as_double();
    std::vector<TensorUse> uses{use(x.act(in), elems * x.ab), use(x.weight(weight), w)};
    uses.insert(uses.end(), outputs.begin(), outputs.end());
    return elementwise(x, name, kRmsNormFlops * elems, elems * x.ab + w, written, std::move(uses));
}

Operator latent_norm_backward(const Dims& x, const char* name, int weight, std::int64_t width, int in, int out) {
    const double bytes = static_cast<double>(x.T * width) * x.ab, w = static_cast<double>(width) * x.wb;
    return elementwise(x, name, 2 * kRmsNormFlops * static_cast<double>(x.T * width), 2 * bytes + w, bytes,
                       {use(flagged(x.act(out), kGrad), bytes), use(x.act(in), bytes), use(x.weight(weight), w),
                        use(flagged(x.act(in), kGrad), bytes, true)});
}

// The kv latent's norm: the activation kv_up reads (prompt, training) and,
// in inference, the new tokens' cache entries (latent + rope key, KV dtype).
Operator kv_norm_op(const Dims& x) {
    const MlaAttention& a = *x.mla;
    std::vector<TensorUse> outs;
    if (!x.absorbed) outs.push_back(use(x.act(aslot::kv_latent_norm), lat_bytes(x, a.kv_lora_rank), true));
    if (x.kv_mode) {
        const double cache_b = hw::bytes_per_element(x.o->precision.kv);
        outs.push_back(use(x.act(aslot::kv_new), static_cast<double>(x.T * a.cache_width()) * cache_b, true));
    }
    return latent_norm(x, "kv_norm", wslot::kv_norm, a.kv_lora_rank, aslot::kv_latent, std::move(outs));
}

// The absorbed path's per-head batched GEMMs: [T, k] x [k, n] for each of
// this shard's heads, reading a slice of kv_up's weight.
Operator absorb_gemm(const Dims& x, const char* name, int weight, std::int64_t k, std::int64_t n, int in,
                     std::int64_t in_width, int out, std::int64_t out_width) {
    const double w = static_cast<double>(x.a_p * k * n) * x.wb;
    const double in_b = static_cast<double>(x.T * x.a_p * in_width) * x.ab;
    const double out_b = static_cast<double>(x.T * x.a_p * out_width) * x.ab;
    return gemm(name, x.gemm_dt, x.T, n, k, x.a_p, in_b + w, out_b,
                {use(x.act(in), in_b), use(x.weight(weight), w), use(x.act(out), out_b, true)});
}

// With the decode matrices absorbed at load (OperatorOptions::
// mla_absorbed_weights): the latent query's two parts straight from the q
// latent (or the norm output without one), [T, q_in] x [q_in, heads x n]:
// W_Q_UK in the weights' dtype under kv_up's slot (it replaces W_UK), and
// W_QR, kept in the activations' dtype, under q_up's (it is q_up's rope part).
Operator folded_q_gemm(const Dims& x, const char* name, int weight, std::int64_t n, bool act_dtype) {
    const MlaAttention& a = *x.mla;
    const bool low = a.q_lora_rank > 0;
    const std::int64_t q_in = low ? a.q_lora_rank : x.h;
    const int in = low ? aslot::q_latent_norm : aslot::norm1;
    const double w = static_cast<double>(q_in * x.a_p * n) * (act_dtype ? x.ab : x.wb);
    const double in_b = static_cast<double>(x.T * q_in) * x.ab;
    const double out_b = static_cast<double>(x.T * x.a_p * n) * x.ab;
    return gemm(name, act_dtype ? x.act_dt : x.gemm_dt, x.T, x.a_p * n, q_in, 1, in_b + w, out_b,
                {use(x.act(in), in_b), use(x.weight(weight), w), use(x.act(aslot::q_absorbed), out_b, true)});
}

// Megatron-Core's MLA before its fused RoPE (OperatorOptions::mla_qkv_concat;
// multi_latent_attention.py at Megatron-LM 64cb6bd7, qkv_up_proj_and_rope_apply):
// query = cat(q_nope, q_rope) and key = cat(k_nope, the shared rope key
// expanded over the heads) are new tensors, and value, a slice of kv_up's
// output, is made contiguous: each a pass reading and writing its tensor.
// e = T x heads of this shard x ab.
//   mla_q_concat   reads e (d_n + d_r)        writes e (d_n + d_r)
//   mla_k_concat   reads e d_n + T d_r ab     writes e (d_n + d_r)
//   mla_v_copy     reads e d_v                writes e d_v
void qkv_concat_forward(const Dims& x, std::vector<Operator>& ops) {
    const MlaAttention& a = *x.mla;
    const double e = static_cast<double>(x.T * x.a_p) * x.ab;
    const double q = e * static_cast<double>(a.qk_head_dim()), v = e * static_cast<double>(a.v_head_dim);
    const double k_in = e * static_cast<double>(a.qk_nope_head_dim) + lat_bytes(x, a.qk_rope_head_dim);
    ops.push_back(elementwise(x, "mla_q_concat", 0, q, q, {use(x.act(aslot::q), q), use(x.act(aslot::q), q, true)}));
    ops.push_back(
        elementwise(x, "mla_k_concat", 0, k_in, q, {use(x.act(aslot::kv), k_in), use(x.act(aslot::k), q, true)}));
    ops.push_back(elementwise(x, "mla_v_copy", 0, v, v, {use(x.act(aslot::kv), v), use(x.act(aslot::v), v, true)}));
}

// The backward of those copies: autograd's split backward joins the
// gradients of q_nope and q_rope into q_up's output gradient, and of k_nope
// and the values into kv_up's, summing the rope key's gradient over the
// heads on the way (expand's backward).
//   mla_q_split_bwd    reads e (d_n + d_r)          writes e (d_n + d_r)
//   mla_kv_split_bwd   reads e (d_n + d_r + d_v)    writes e (d_n + d_v) + T d_r ab
void qkv_concat_backward(const Dims& x, std::vector<Operator>& ops, bool keys) {
    const MlaAttention& a = *x.mla;
    const double e = static_cast<double>(x.T * x.a_p) * x.ab;
    if (!keys) {
        const double q = e * static_cast<double>(a.qk_head_dim());
        const std::uint64_t dq = flagged(x.act(aslot::q), kGrad);
        ops.push_back(elementwise(x, "mla_q_split_bwd", 0, q, q, {use(dq, q), use(dq, q, true)}));
        return;
    }
    const double read = e * static_cast<double>(a.qk_head_dim() + a.v_head_dim);
    const double written =
        e * static_cast<double>(a.qk_nope_head_dim + a.v_head_dim) + lat_bytes(x, a.qk_rope_head_dim);
    const std::uint64_t dkv = flagged(x.act(aslot::kv), kGrad);
    const double head_sum = static_cast<double>(x.T * (x.a_p - 1) * a.qk_rope_head_dim);  // adds
    ops.push_back(
        elementwise(x, "mla_kv_split_bwd", head_sum, read, written, {use(dkv, read), use(dkv, written, true)}));
}

// Megatron-Core's unfused rotary embedding (OperatorOptions::mla_rope_unfused;
// rope_utils.py _apply_rotary_pos_emb_bshd at Megatron-LM 64cb6bd7, the path
// MLA's YaRN RoPE takes: it refuses apply_rope_fusion), one kernel per
// PyTorch operation, applied to the queries' rope parts (n = T x heads of
// this shard x d_r elements) and to the shared rope key (n = T x d_r). Each
// pass reads and writes multiples of n x ab:
//   forward  cat(t[0::2], t[1::2]) 1/1, t x cos 1/1, -x2 0.5/0.5,
//            cat(-x2, x1) 1/1, x sin 1/1, the sum 2/1, cat(t, t_pass) 1/1;
//   backward x sin 1/1, neg 0.5/0.5, chunk's cat 1/1, x cos 1/1, the two
//            paths summed 2/1, the two strided slices' zeros 0/1 and copy
//            0.5/0.5 each, their sum 2/1, the rope slice's zeros 0/1 and
//            copy 1/1, the empty pass-through slice's zeros 0/1 and its sum
//            2/1 (autograd's slice backward zero-fills the input's shape).
// Each forward call also builds its cos and sin tables from the FP32
// frequencies, T x d_r: cos (or sin), x mscale, cast to ab: 3 kernels each.
struct RopePass {
    const char* name;
    double read, written, flops;  // multiples of n x ab, and of n
};
constexpr RopePass kRopeForward[] = {{"deinterleave", 1, 1, 0}, {"mul_cos", 1, 1, 1}, {"neg", 0.5, 0.5, 0.5},
                                     {"rotate_cat", 1, 1, 0},   {"mul_sin", 1, 1, 1}, {"add", 2, 1, 1},
                                     {"pass_cat", 1, 1, 0}};
constexpr RopePass kRopeBackward[] = {{"mul_sin_bwd", 1, 1, 1},  {"neg_bwd", 0.5, 0.5, 0.5}, {"chunk_bwd", 1, 1, 0},
                                      {"mul_cos_bwd", 1, 1, 1},  {"add_bwd", 2, 1, 1},       {"odd_zeros", 0, 1, 0},
                                      {"odd_copy", 0.5, 0.5, 0}, {"even_zeros", 0, 1, 0},    {"even_copy", 0.5, 0.5, 0},
                                      {"slices_add", 2, 1, 1},   {"rope_zeros", 0, 1, 0},    {"rope_copy", 1, 1, 0},
                                      {"pass_zeros", 0, 1, 0},   {"pass_add", 2, 1, 1}};
constexpr double kFreqBytes = 4.0;  // the RoPE frequencies are FP32

void rope_passes(const Dims& x, const std::string& prefix, double n, bool forward, std::vector<Operator>& ops) {
    const double unit = n * x.ab;
    if (forward) {
        const double table = static_cast<double>(x.T * x.mla->qk_rope_head_dim);
        for (const char* f : {"cos", "sin"}) {
            const std::string t = prefix + "_" + f;
            ops.push_back(elementwise(x, t, table, table * kFreqBytes, table * kFreqBytes, {}));
            ops.push_back(elementwise(x, t + "_scale", table, table * kFreqBytes, table * kFreqBytes, {}));
            ops.push_back(elementwise(x, t + "_cast", 0, table * kFreqBytes, table * x.ab, {}));
        }
        for (const RopePass& p : kRopeForward)
            ops.push_back(elementwise(x, prefix + "_" + p.name, p.flops * n, p.read * unit, p.written * unit, {}));
        return;
    }
    for (const RopePass& p : kRopeBackward)
        ops.push_back(elementwise(x, prefix + "_" + p.name, p.flops * n, p.read * unit, p.written * unit, {}));
}

// Both calls of a layer (queries, then the rope key), forward or backward.
void rope_unfused(const Dims& x, bool forward, std::vector<Operator>& ops) {
    const double rope = static_cast<double>(x.T * x.mla->qk_rope_head_dim);
    rope_passes(x, "mla_q_rope", rope * static_cast<double>(x.a_p), forward, ops);
    rope_passes(x, "mla_k_rope", rope, forward, ops);
}

}  // namespace

void mla_block_forward(const Dims& x, std::vector<Operator>& ops) {
    const MlaAttention& a = *x.mla;
    const QPath q = q_path(x);
    if (q.low_rank) {
        ops.push_back(linear_forward(x, q.down));
        ops.push_back(latent_norm(x, "q_norm", wslot::q_norm, a.q_lora_rank, aslot::q_latent,
                                  {use(x.act(aslot::q_latent_norm), lat_bytes(x, a.q_lora_rank), true)}));
    }
    if (x.absorbed && x.o->mla_absorbed_weights) {
        // The latent query from W_Q_UK and W_QR; the core's latent output
        // goes straight to W_UV_O, the output projection (out_linear).
        ops.push_back(linear_forward(x, kv_down_linear(x)));
        ops.push_back(kv_norm_op(x));
        ops.push_back(folded_q_gemm(x, "q_uk", wslot::kv_up, a.kv_lora_rank, false));
        ops.push_back(folded_q_gemm(x, "q_rope", wslot::q_up, a.qk_rope_head_dim, true));
        attention_forward(x, ops);
        return;
    }
    ops.push_back(linear_forward(x, q.up));
    ops.push_back(linear_forward(x, kv_down_linear(x)));
    ops.push_back(kv_norm_op(x));
    if (!x.absorbed) {
        ops.push_back(linear_forward(x, kv_up_linear(x)));
        if (x.o->mla_rope_unfused) rope_unfused(x, true, ops);
        if (x.o->mla_qkv_concat) qkv_concat_forward(x, ops);
        attention_forward(x, ops);
        return;
    }
    // q_nope W_UK per head; the epilogue appends the head's q_rope: the
    // latent query of kv_lora + rope.
    ops.push_back(absorb_gemm(x, "q_absorb", wslot::kv_up, a.qk_nope_head_dim, a.kv_lora_rank, aslot::q,
                              a.qk_head_dim(), aslot::q_absorbed, a.cache_width()));
    attention_forward(x, ops);
    ops.push_back(absorb_gemm(x, "o_absorb", wslot::w_uv, a.kv_lora_rank, a.v_head_dim, aslot::o_latent, a.kv_lora_rank,
                              aslot::attn, a.v_head_dim));
}

void mla_block_backward(const Dims& x, std::vector<Operator>& ops, Recompute recompute) {
    const MlaAttention& a = *x.mla;
    if (x.absorbed) throw InternalError("the absorbed MLA path is an inference path: no backward");
    const Linear kv_up = kv_up_linear(x), kv_down = kv_down_linear(x);
    const QPath q = q_path(x);
    if (recompute == Recompute::selective && x.o->recompute_modules.mla_up_proj) {
        // mla_up_proj: the up projections run again from the kept (normed)
        // latents before the core's backward needs their outputs; a plain q
        // projection (q_lora_rank 0) is not one of them.
        const std::size_t first = ops.size();
        if (q.low_rank) ops.push_back(linear_forward(x, q.up));
        ops.push_back(linear_forward(x, kv_up));
        if (x.o->mla_rope_unfused) rope_unfused(x, true, ops);
        if (x.o->mla_qkv_concat) qkv_concat_forward(x, ops);
        for (auto it = ops.begin() + static_cast<std::ptrdiff_t>(first); it != ops.end(); ++it)
            it->kernel.name = "recompute_" + it->kernel.name;
    }
    if (recompute == Recompute::selective && x.o->recompute_modules.core_attn) recompute_attention_core(x, ops);
    attention_backward(x, ops);
    if (x.o->mla_rope_unfused) rope_unfused(x, false, ops);
    if (x.o->mla_qkv_concat) qkv_concat_backward(x, ops, true);
    ops.push_back(linear_dgrad(x, kv_up));
    ops.push_back(linear_wgrad(x, kv_up));
    ops.push_back(latent_norm_backward(x, "kv_norm_bwd", wslot::kv_norm, a.kv_lora_rank, aslot::kv_latent,
                                       aslot::kv_latent_norm));
    ops.push_back(linear_dgrad(x, kv_down));
    ops.push_back(linear_wgrad(x, kv_down));
    if (x.o->mla_qkv_concat) qkv_concat_backward(x, ops, false);
    ops.push_back(linear_dgrad(x, q.up));
    ops.push_back(linear_wgrad(x, q.up));
    if (q.low_rank) {
        ops.push_back(
            latent_norm_backward(x, "q_norm_bwd", wslot::q_norm, a.q_lora_rank, aslot::q_latent, aslot::q_latent_norm));
        ops.push_back(linear_dgrad(x, q.down));
        ops.push_back(linear_wgrad(x, q.down));
    }
    // The two paths' shares of the norm output's gradient, summed.
    const double full = full_act(x);
    const std::uint64_t dn = flagged(x.act(aslot::norm1), kGrad), dkv = flagged(x.act(aslot::mla_dx), kGrad);
    ops.push_back(elementwise(x, "mla_dx_add", static_cast<double>(x.T * x.h), 2 * full, full,
                              {use(dn, full), use(dkv, full), use(dn, full, true)}));
}

}  // namespace sim::workload::ops
