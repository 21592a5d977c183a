// The attention core of a layer: flash kernels, unfused
// matmul-softmax-matmul with its dropout, and the context-parallel ring
// (docs/workload-model.md, rows 3 and "Dropout"; docs/parallelism.md,
// "Context parallelism").
#include "sim/workload/op_builders.h"

namespace sim::workload::ops {

// ---- the attention core -------------------------------------------------------

double q_bytes(const Dims& x) { return static_cast<double>(x.T * x.a_p * x.dq) * x.ab; }
double o_bytes(const Dims& x) { return static_cast<double>(x.T * x.a_p * x.dv) * x.ab; }
double kv_bytes(const Dims& x) {
    return static_cast<double>(x.s.batch * x.s.context * x.g_p * x.kv_row) * x.kb / static_cast<double>(x.cp);
}
double k_bytes(const Dims& x) {
    return static_cast<double>(x.s.batch * x.s.context * x.g_p * x.dq) * x.kb / static_cast<double>(x.cp);
}

AttentionTensors attention_tensors(const Dims& x) {
    AttentionTensors t;
    t.q = use(x.act(x.q_slot), q_bytes(x));
    t.o = use(x.act(x.o_slot), o_bytes(x));
    t.lse = use(x.act(aslot::lse), static_cast<double>(x.T * x.a_p) * 4.0);
    const double kv = kv_bytes(x), k = k_bytes(x);
    if (x.kv_from_cache) {
        const std::uint64_t id = kv_tensor_id(x.layer, x.mb);
        t.kv = {use(id, kv)};
        t.k = {use(flagged(id, 1), k)};
        t.v = {use(flagged(id, 2), kv - k)};
    } else {
        t.kv = {use(x.act(aslot::kv), kv)};
        t.k = {use(x.act(aslot::k), k)};
        t.v = {use(x.act(aslot::v), kv - k)};
    }
    return t;
}

// 2 * b * heads * pairs * (dq + dv) (scores and values; 4 * ... * head_dim
// when dq == dv), pairs = (query, key) pairs computed.
// Causal: new_tokens == context (prefill, training) computes half the square;
// decode (one new token) attends the whole context; a chunk of t new tokens
// after c - t cached ones attends t * (c - t) + t^2 / 2 pairs.
double flash_forward_flops(const Dims& x, bool causal) {
    const double t = static_cast<double>(x.s.new_tokens), c = static_cast<double>(x.s.context);
    double pairs = t * c;
    if (causal && x.s.new_tokens == x.s.context) {
        pairs = t * c / 2;
    } else if (causal && x.s.new_tokens > 1) {
        pairs = t * (c - t) + t * t / 2;
    }
    return 2.0 * static_cast<double>(x.s.batch * x.a_p) * pairs * static_cast<double>(x.dq + x.dv);
}

namespace {

// The head dim that times a fused kernel: the mean of the query/key and
// value widths (head_dim when they agree).
std::int64_t core_head_dim(const Dims& x) { return (x.dq + x.dv) / 2; }

// The shape a fused kernel is timed on: the new tokens' queries against the
// context, per sequence and head of this shard.
void set_core_shape(const Dims& x, Operator& op) {
    op.kernel.m = x.s.new_tokens;
    op.kernel.n = x.s.context;
    op.kernel.k = core_head_dim(x);
    op.kernel.batch = x.s.batch * x.a_p;
    op.kernel.causal = x.o->causal;
}

// ---- ring attention (context parallelism) ---------------------------------------
// Megatron-Core's load-balanced causal split: the sequence is cut into 2 cp
// chunks and rank r holds chunks r and 2cp-1-r. Step 0 attends the local
// chunks (causal); each later step attends the K/V chunk received from the
// previous rank, and either all local queries meet half of it or half of the
// queries meet all of it. Every step is therefore 1/cp of the rank's work,
// which is 1/cp of the whole causal attention.

// The K/V chunk a step reads: the local one, or one of two receive buffers.
std::vector<TensorUse> ring_kv(const Dims& x, const AttentionTensors& t, std::int64_t step) {
    if (step == 0) return t.kv;
    return {use(x.act(aslot::kv_recv + static_cast<int>(step % 2)), kv_bytes(x))};
}

// Shape of ring step k: the local queries (s/cp per sequence) against the
// local chunks (causal) at step 0, else against half a chunk's worth of
// pairs; step k >= 1 first receives `ring_bytes` from the previous rank.
void set_ring_step(const Dims& x, Operator& op, std::int64_t k, double ring_bytes) {
    const std::int64_t local = x.s.new_tokens / x.cp;
    op.kernel.m = local;
    op.kernel.n = k == 0 ? local : local / 2;
    op.kernel.k = core_head_dim(x);
    op.kernel.batch = x.s.batch * x.a_p;
    op.kernel.causal = k == 0 && x.o->causal;
    op.cp_step = static_cast<int>(k);
    if (k > 0) op.cp_ring_bytes = Bytes::ceil(ring_bytes);
}

}  // namespace

// Transformer Engine's bookkeeping around the ring steps (AttnFuncWithCP in
// transformer_engine/pytorch/attention.py, v1.8, NeMo 24.07's release; the
// same passes in later releases' context_parallel.py): copies that make the
// send buffer and the half-chunk operands contiguous, the zeroed output, the
// per-step output correction (flash_attn_fwd_out_correction: out +=
// out_step * exp(lse_step - lse)), and in the backward the dK/dV
// concatenation and the dQ and dK/dV accumulations. Bytes per layer,
// averaged over the cp ranks (docs/parallelism.md, "Context parallelism",
// has the derivation); q, o, kv are the rank's Q, O and K+V bytes.
CpMergeBytes cp_merge_forward_bytes(double q, double o, double kv, std::int64_t cp) {
    const double n = static_cast<double>(cp);
    const double halves = (n - 1) / 4 * (kv + q);  // (n-1)/2 steps copy half the K/V or half the Q
    CpMergeBytes b;
    b.read = kv + halves + (3 * n + 1) / 2 * o;
    b.written = kv + halves + (1 + (3 * n + 1) / 4) * o;
    return b;
}

CpMergeBytes cp_merge_backward_bytes(double q, double o, double kv, std::int64_t cp) {
    const double m = (static_cast<double>(cp) - 1) / 2;  // off-diagonal steps of each kind, per rank on average
    CpMergeBytes b;
    b.read = 4 * kv + 2 * q + m * (5 * kv + 3.5 * q + o);
    b.written = 3 * kv + q + m * (3.5 * kv + 2 * q + o);
    return b;
}

namespace {

void ring_attention_forward(const Dims& x, const AttentionTensors& t, std::vector<Operator>& ops) {
    const double q = q_bytes(x), o = o_bytes(x), kv = kv_bytes(x), lse = t.lse.size.as_double();
    const double step_flops = flash_forward_flops(x, x.o->causal) / static_cast<double>(x.cp * x.cp);
    for (std::int64_t k = 0; k < x.cp; ++k) {
        std::vector<TensorUse> uses{t.q};
        const auto kvs = ring_kv(x, t, k);
        uses.insert(uses.end(), kvs.begin(), kvs.end());
        // Each step writes its own partial output and LSE; the merge below
        // rescales and adds them (the step kernels do not read the running output).
        uses.push_back(TensorUse{t.o.id, t.o.size, true});
        uses.push_back(TensorUse{t.lse.id, t.lse.size, true});
        Operator op =
            make_op("attention", KernelKind::attention, x.attn_dt, step_flops, q + kv, o + lse, std::move(uses));
        set_ring_step(x, op, k, kv);
        ops.push_back(std::move(op));
    }
    const CpMergeBytes mb = cp_merge_forward_bytes(q, o, kv, x.cp);
    ops.push_back(elementwise(x, "attention_cp_merge", mb.flops_per_byte * (mb.read + mb.written), mb.read, mb.written,
                              {t.q, t.kv.front(), t.o, TensorUse{t.o.id, t.o.size, true}}));
}

// Backward: each step recomputes its block of scores and produces dQ
// (accumulated locally) and a dK/dV partial that travels the ring with the
// next step's K/V (so a backward step moves twice the forward bytes).
void ring_attention_backward(const Dims& x, const AttentionTensors& t, std::vector<Operator>& ops) {
    const double q = q_bytes(x), o = o_bytes(x), kv = kv_bytes(x), lse = t.lse.size.as_double();
    const double step_flops =
        kFlashBackwardFactor * flash_forward_flops(x, x.o->causal) / static_cast<double>(x.cp * x.cp);
    const TensorUse dO{flagged(t.o.id, kGrad), t.o.size, false};
    for (std::int64_t k = 0; k < x.cp; ++k) {
        std::vector<TensorUse> uses{t.q, t.o, dO, t.lse};
        const auto kvs = ring_kv(x, t, k);
        uses.insert(uses.end(), kvs.begin(), kvs.end());
        uses.push_back(TensorUse{flagged(t.q.id, kGrad), t.q.size, true});
        const auto dkv = grads_of(kvs, true);
        uses.insert(uses.end(), dkv.begin(), dkv.end());
        Operator op = make_op("attention_bwd", KernelKind::attention, x.attn_dt, step_flops, q + 2 * o + kv + lse,
                              q + kv, std::move(uses));
        op.kernel.backward = true;
        set_ring_step(x, op, k, 2 * kv);
        ops.push_back(std::move(op));
    }
    const CpMergeBytes mb = cp_merge_backward_bytes(q, o, kv, x.cp);
    const TensorUse dq{flagged(t.q.id, kGrad), t.q.size, false};
    ops.push_back(elementwise(x, "attention_cp_merge_bwd", mb.flops_per_byte * (mb.read + mb.written), mb.read,
                              mb.written, {t.q, t.o, dO, dq, TensorUse{dq.id, dq.size, true}}));
}

// ---- dropout ----------------------------------------------------------------------
// PyTorch's dropout draws a Philox random number per element, scales the kept
// ones by 1 / (1 - p) and keeps a 1-byte mask for the backward. Megatron
// fuses the hidden dropout with the bias and residual add
// (bias_dropout_add_fused_train), so there it only adds the mask's write;
// unfused stacks run it as its own kernel. Fused (flash) attention draws its
// dropout inside the attention kernel: no extra kernel or traffic
// (docs/workload-model.md, "Dropout").

// Unfused attention: the dropout of the probability matrix; returns the id
// the values GEMM reads (the probabilities themselves without dropout).
std::uint64_t attention_dropout_forward(const Dims& x, std::vector<Operator>& ops, std::uint64_t probs,
                                        double s_bytes) {
    if (x.p_attention <= 0) return probs;
    const double elems = s_bytes / x.ab;
    const std::uint64_t kept = x.act(aslot::probs_dropped);
    ops.push_back(
        elementwise(x, "attention_dropout", kDropoutFlops * elems, s_bytes, s_bytes + elems,
                    {use(probs, s_bytes), use(kept, s_bytes, true), use(x.act(aslot::probs_mask), elems, true)}));
    return kept;
}

}  // namespace

void attention_forward(const Dims& x, std::vector<Operator>& ops) {
    const AttentionTensors t = attention_tensors(x);
    if (x.cp > 1) {
        ring_attention_forward(x, t, ops);
        return;
    }
    const std::int64_t b = x.s.batch, tq = x.s.new_tokens, c = x.s.context;
    const double q = q_bytes(x), kv = kv_bytes(x);
    if (x.o->flash_attention) {
        std::vector<TensorUse> uses{t.q};
        uses.insert(uses.end(), t.kv.begin(), t.kv.end());
        uses.push_back(TensorUse{t.o.id, t.o.size, true});
        const double lse = x.kv_mode ? 0.0 : t.lse.size.as_double();
        if (!x.kv_mode) uses.push_back(TensorUse{t.lse.id, t.lse.size, true});
        Operator op = make_op("attention", KernelKind::attention, x.attn_dt, flash_forward_flops(x, x.o->causal),
                              q + kv, o_bytes(x) + lse, std::move(uses));
        set_core_shape(x, op);
        // A per-query-head generation kernel (docs/software-profiles.md §3)
        // walks its KV head's keys and values once for every query head of
        // the group: b x heads x context x (dq + dv) elements, each costing
        // the profile's instructions on the CUDA cores.
        if (tq == 1 && c > 1 && x.o->decode_attention_issue > 0.0)
            op.kernel.issue_instructions = x.o->decode_attention_issue * static_cast<double>(b * x.a_p) *
                                           static_cast<double>(c) * static_cast<double>(x.dq + x.dv);
        ops.push_back(std::move(op));
        return;
    }
    const double s_bytes = static_cast<double>(b * x.a_p * tq * c) * x.ab;
    const std::uint64_t scores = x.act(aslot::scores), probs = x.act(aslot::probs);
    std::vector<TensorUse> u1{t.q, t.k[0], use(scores, s_bytes, true)};
    ops.push_back(gemm("attention_scores", x.attn_dt, tq, c, x.d, b * x.a_p, q + kv / 2, s_bytes, std::move(u1)));
    ops.push_back(elementwise(x, "softmax", kSoftmaxFlops * static_cast<double>(b * x.a_p * tq * c), s_bytes, s_bytes,
                              {use(scores, s_bytes), use(probs, s_bytes, true)}));
    const std::uint64_t kept = attention_dropout_forward(x, ops, probs, s_bytes);
    std::vector<TensorUse> u2{use(kept, s_bytes), t.v[0], TensorUse{t.o.id, t.o.size, true}};
    ops.push_back(gemm("attention_values", x.attn_dt, tq, x.d, c, b * x.a_p, s_bytes + kv / 2, q, std::move(u2)));
}

void attention_backward(const Dims& x, std::vector<Operator>& ops) {
    const AttentionTensors t = attention_tensors(x);
    if (x.cp > 1) {
        ring_attention_backward(x, t, ops);
        return;
    }
    const std::int64_t b = x.s.batch, tq = x.s.new_tokens, c = x.s.context;
    const double q = q_bytes(x), kv = kv_bytes(x);
    const TensorUse dO{flagged(t.o.id, kGrad), t.o.size, false};
    if (x.o->flash_attention) {
        std::vector<TensorUse> uses{t.q, t.o, dO, t.lse};
        uses.insert(uses.end(), t.kv.begin(), t.kv.end());
        uses.push_back(TensorUse{flagged(t.q.id, kGrad), t.q.size, true});
        const auto dkv = grads_of(t.kv, true);
        uses.insert(uses.end(), dkv.begin(), dkv.end());
        Operator op = make_op("attention_bwd", KernelKind::attention, x.attn_dt,
                              kFlashBackwardFactor * flash_forward_flops(x, x.o->causal),
                              q + 2 * o_bytes(x) + kv + t.lse.size.as_double(), q + kv, std::move(uses));
        set_core_shape(x, op);
        op.kernel.backward = true;
        ops.push_back(std::move(op));
        return;
    }
    const double s_bytes = static_cast<double>(b * x.a_p * tq * c) * x.ab;
    const std::uint64_t scores = x.act(aslot::scores), probs = x.act(aslot::probs);
    const std::int64_t bh = b * x.a_p;
    // dP = dO V^T, dV = P^T dO, dS = softmax'(dP), dQ = dS K, dK = dS^T Q
    ops.push_back(gemm("attention_values_dp", x.attn_dt, tq, c, x.d, bh, q + kv / 2, s_bytes,
                       {dO, t.v[0], use(flagged(probs, kGrad), s_bytes, true)}));
    const std::uint64_t kept = x.p_attention > 0 ? x.act(aslot::probs_dropped) : probs;
    ops.push_back(gemm("attention_values_dv", x.attn_dt, c, x.d, tq, bh, s_bytes + q, kv / 2,
                       {use(kept, s_bytes), dO, TensorUse{flagged(t.v[0].id, kGrad), t.v[0].size, true}}));
    if (x.p_attention > 0) {
        // dP through the dropout: dP * mask / (1 - p), in place.
        const double elems = static_cast<double>(bh * tq * c);
        ops.push_back(elementwise(x, "attention_dropout_bwd", elems, s_bytes + elems, s_bytes,
                                  {use(flagged(probs, kGrad), s_bytes), use(x.act(aslot::probs_mask), elems),
                                   use(flagged(probs, kGrad), s_bytes, true)}));
    }
    ops.push_back(elementwise(
        x, "softmax_bwd", 2 * kSoftmaxFlops * static_cast<double>(bh * tq * c), 2 * s_bytes, s_bytes,
        {use(probs, s_bytes), use(flagged(probs, kGrad), s_bytes), use(flagged(scores, kGrad), s_bytes, true)}));
    ops.push_back(
        gemm("attention_scores_dq", x.attn_dt, tq, x.d, c, bh, s_bytes + kv / 2, q,
             {use(flagged(scores, kGrad), s_bytes), t.k[0], TensorUse{flagged(t.q.id, kGrad), t.q.size, true}}));
    ops.push_back(
        gemm("attention_scores_dk", x.attn_dt, c, x.d, tq, bh, s_bytes + q, kv / 2,
             {use(flagged(scores, kGrad), s_bytes), t.q, TensorUse{flagged(t.k[0].id, kGrad), t.k[0].size, true}}));
}

}  // namespace sim::workload::ops
