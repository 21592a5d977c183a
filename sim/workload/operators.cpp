// Per-layer kernel sequences with exact FLOPs, bytes and shapes. The rules
// (and every formula) are listed in docs/workload-model.md; this file follows
// that page section by section.
#include "sim/workload/operators.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "sim/core/error.h"

namespace sim::workload {

namespace {

using hw::DType;
using hw::KernelKind;
using hw::TensorUse;

// FLOPs per element of the elementwise kernels (a convention: these kernels
// are memory-bound, their FLOPs only feed the HFU count). Backward kernels
// count twice their forward.
constexpr double kLayerNormFlops = 8;  // mean, variance, normalise, scale, shift
constexpr double kRmsNormFlops = 4;    // square-sum, rsqrt scale, weight
constexpr double kGeluFlops = 8;       // tanh approximation
constexpr double kSiluFlops = 4;       // x * sigmoid(x)
constexpr double kSoftmaxFlops = 5;    // max, subtract, exp, sum, divide
constexpr double kAdamFlops = 12;      // moments, bias correction, update
// Flash attention backward / forward FLOPs: the backward runs five matmuls
// (S = QK^T again, dV, dP, dQ, dK) against the forward's two (Dao 2023,
// FlashAttention-2; the benchmark script of the flash-attn repository counts
// backward = 2.5 x forward).
constexpr double kFlashBackwardFactor = 2.5;

// ---- tensor ids -------------------------------------------------------------
// kind (2 bits) | layer + 2 (20 bits) | which (16 bits) | micro-batch (26 bits)
constexpr int kMbBits = 26;
constexpr int kWhichBits = 16;
constexpr int kLayerBits = 20;
enum class IdKind : std::uint64_t { weight = 1, activation = 2, kv = 3 };
// Flags inside `which`.
constexpr int kPartial = 1 << 13;   // the partial sum a row-parallel kernel writes before its TP reduction
constexpr int kGathered = 1 << 14;  // the all-gathered copy of a sequence-parallel tensor
constexpr int kGrad = 1 << 15;      // the gradient of a tensor (or of a weight)

std::uint64_t encode(IdKind kind, std::int64_t layer, int which, std::int64_t mb) {
    check(layer >= -2 && layer + 2 < (std::int64_t{1} << kLayerBits), "tensor id: layer index out of range");
    check(which >= 0 && which < (1 << kWhichBits), "tensor id: slot out of range");
    check(mb >= 0 && mb < (std::int64_t{1} << kMbBits), "tensor id: micro-batch index out of range");
    return (static_cast<std::uint64_t>(kind) << 62) |
           (static_cast<std::uint64_t>(layer + 2) << (kMbBits + kWhichBits)) |
           (static_cast<std::uint64_t>(which) << kMbBits) | static_cast<std::uint64_t>(mb);
}

std::uint64_t flagged(std::uint64_t id, int flag) { return id | (static_cast<std::uint64_t>(flag) << kMbBits); }

// Weight slots.
namespace wslot {
constexpr int qkv = 0, out = 1, mlp_up = 2, mlp_down = 3, norm1 = 4, norm2 = 5, router = 6;
constexpr int expert = 16;                  // expert e: up 16 + 2e, down 17 + 2e
constexpr int table = 0, position = 1;      // kEmbeddingLayer
constexpr int lm_head = 0, final_norm = 1;  // kHeadLayer
}  // namespace wslot

// Activation slots.
namespace aslot {
constexpr int resid = 0, norm1 = 1, q = 2, kv = 3, k = 4, v = 5, kv_new = 6, scores = 7, probs = 8, attn = 9, lse = 10,
              out_proj = 11, resid_mid = 12, norm2 = 13, gate = 14, up = 15, silu = 16, act = 17, down = 18,
              router = 19, topk = 20, combine = 21, norm_grad = 22;
constexpr int kv_recv = 23;  // context parallelism: the two receive buffers of the K/V ring (23, 24)
constexpr int probs_dropped = 25, probs_mask = 26;  // attention dropout (unfused attention)
constexpr int attn_drop_mask = 27, mlp_drop_mask = 28;  // hidden dropout masks of the two residual branches
constexpr int final_norm = 1, logits = 2, loss = 3, tokens = 4;  // kHeadLayer
constexpr int expert = 64;  // expert e: 64 + 8e + {0 in, 1 gate, 2 up, 3 silu, 4 act, 5 out}
}  // namespace aslot

// ---- shapes of one pass -----------------------------------------------------

struct Dims {
    const ModelSpec* m = nullptr;
    const OperatorOptions* o = nullptr;
    PassShape s;
    std::int64_t layer = 0, mb = 0;
    std::int64_t cp = 1;  // context-parallel degree: T holds 1/cp of each sequence
    std::int64_t p = 1, a_p = 0, g_p = 0, d = 0, h = 0, f_p = 0, fup_p = 0, T = 0;
    double Ts = 0;    // tokens a norm / residual kernel handles (T / tp under sequence parallel)
    double ab = 2;    // activation (and activation-gradient) bytes per element
    double in_b = 2;  // bytes per element of a GEMM's activation operands (FP8/INT8 when the math is)
    double wb = 2;    // weight bytes per element
    double kb = 2;    // K/V bytes per element (KV cache dtype in inference, activations in training)
    double gb = 2;    // weight-gradient bytes per element
    DType gemm_dt = DType::bf16, act_dt = DType::bf16, attn_dt = DType::bf16;
    bool sp = false;  // sequence parallel with tp > 1
    bool kv_mode = false;
    bool swiglu = false, bias = false;
    double norm_w = 0;  // bytes of one norm's weights
    // Dropout probabilities in force: a training pass only (0 otherwise).
    double p_hidden = 0, p_attention = 0;

    std::uint64_t act(int which, std::int64_t at_layer) const {
        return encode(IdKind::activation, at_layer, which, mb);
    }
    std::uint64_t act(int which) const { return act(which, layer); }
    std::uint64_t weight(int which) const { return weight_tensor_id(layer, which); }
    double norm_flops() const { return m->norm == NormKind::layernorm ? kLayerNormFlops : kRmsNormFlops; }
};

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

double grad_bytes(const Precision& p) {
    const double w = hw::bytes_per_element(p.weights);
    return w >= 2 ? w : 2.0;
}

Dims make_dims(const ModelSpec& m, std::int64_t layer, std::int64_t mb, const PassShape& s, const OperatorOptions& o) {
    if (o.tp < 1) throw ModelError(fmt::format("tensor-parallel degree {} must be at least 1", o.tp));
    if (s.batch < 1 || s.new_tokens < 1 || s.context < s.new_tokens) {
        throw ModelError(
            fmt::format("pass shape batch {} new_tokens {} context {}: need batch >= 1, new_tokens >= 1 "
                        "and context >= new_tokens",
                        s.batch, s.new_tokens, s.context));
    }
    if (o.cp < 1) throw ModelError(fmt::format("context-parallel degree {} must be at least 1", o.cp));
    if (o.cp > 1) {
        if (o.inference || s.context != s.new_tokens)
            throw ModelError(fmt::format("context parallelism (cp={}) is modelled for training passes only", o.cp));
        if (s.new_tokens % (2 * o.cp) != 0)
            throw ModelError(fmt::format("context parallelism: {} tokens per sequence do not split into 2 x cp = {} chunks",
                                         s.new_tokens, 2 * o.cp));
        if (!o.flash_attention)
            throw ModelError(fmt::format("context parallelism (cp={}) needs flash attention (ring attention)", o.cp));
    }
    if (m.experts > 1000) {
        throw ModelError(fmt::format("model '{}': {} experts; tensor ids hold at most 1000", m.name, m.experts));
    }
    Dims x;
    x.m = &m;
    x.o = &o;
    x.s = s;
    x.layer = layer;
    x.mb = mb;
    x.p = o.tp;
    x.a_p = heads_per_shard(m, o.tp);
    x.g_p = kv_heads_per_shard(m, o.tp);
    x.d = m.head_dim;
    x.h = m.hidden;
    x.swiglu = m.ffn_kind == FfnKind::swiglu;
    x.f_p = ceil_div(m.ffn, x.p);
    x.fup_p = x.swiglu ? 2 * x.f_p : x.f_p;
    x.cp = o.cp;
    x.T = s.batch * s.new_tokens / x.cp;
    x.sp = o.sequence_parallel && x.p > 1;
    x.Ts = x.sp ? static_cast<double>(x.T) / static_cast<double>(x.p) : static_cast<double>(x.T);
    x.act_dt = activation_dtype(o.precision);
    x.gemm_dt = o.precision.compute;
    const bool low = o.precision.compute == DType::fp8 || o.precision.compute == DType::int8;
    x.attn_dt = low ? x.act_dt : o.precision.compute;
    x.ab = hw::bytes_per_element(x.act_dt);
    x.in_b = std::min(x.ab, hw::bytes_per_element(o.precision.compute));
    x.wb = hw::bytes_per_element(o.precision.weights);
    x.gb = grad_bytes(o.precision);
    x.kv_mode = o.inference || s.context > s.new_tokens;
    x.kb = x.kv_mode ? hw::bytes_per_element(o.precision.kv) : x.ab;
    x.bias = m.bias;
    x.norm_w = static_cast<double>(m.norm == NormKind::layernorm ? 2 * m.hidden : m.hidden) * x.wb;
    if (!o.inference && !x.kv_mode) {
        x.p_hidden = o.dropout.hidden;
        x.p_attention = o.dropout.attention;
    }
    return x;
}

// ---- operator builders --------------------------------------------------------

TensorUse use(std::uint64_t id, double bytes, bool write = false) { return TensorUse{id, Bytes::ceil(bytes), write}; }

Operator make_op(std::string name, KernelKind kind, DType dt, double flops, double read, double written,
                 std::vector<TensorUse> tensors) {
    Operator op;
    op.kernel.name = std::move(name);
    op.kernel.kind = kind;
    op.kernel.dtype = dt;
    op.kernel.flops = Flops{flops};
    op.kernel.bytes_read = Bytes::ceil(read);
    op.kernel.bytes_written = Bytes::ceil(written);
    op.kernel.tensors = std::move(tensors);
    return op;
}

Operator elementwise(const Dims& x, std::string name, double flops, double read, double written,
                     std::vector<TensorUse> tensors) {
    return make_op(std::move(name), KernelKind::elementwise, x.act_dt, flops, read, written, std::move(tensors));
}

Operator gemm(std::string name, DType dt, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
              double read, double written, std::vector<TensorUse> tensors) {
    Operator op = make_op(
        std::move(name), KernelKind::gemm, dt,
        2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch),
        read, written, std::move(tensors));
    op.kernel.m = m;
    op.kernel.n = n;
    op.kernel.k = k;
    op.kernel.batch = batch;
    return op;
}

void set_sync(const Dims& x, Operator& op, TpSync sync, double bytes) {
    if (x.p <= 1 || sync == TpSync::none) return;
    op.tp_sync = sync;
    op.tp_sync_bytes = Bytes::ceil(bytes);
}

// A weight GEMM Y[tokens, out] = X[tokens, in] W[in, out] and its two
// backward GEMMs. Tensor ids are given explicitly; grads are the same ids
// flagged kGrad.
struct Linear {
    std::string name;
    int weight = 0;
    std::int64_t tokens = 0, in = 0, out = 0;
    std::vector<TensorUse> x_reads;    // forward input (also read by the weight-gradient GEMM)
    std::vector<TensorUse> y_writes;   // forward outputs
    double y_bytes = -1;               // forward output bytes when not tokens * out * ab (KV cache dtype)
    std::vector<TensorUse> dy_reads;   // output gradients read by both backward GEMMs
    std::vector<TensorUse> dx_writes;  // input gradient written by the input-gradient GEMM
    bool bias_in_gemm = false;         // forward epilogue adds the bias
    bool has_bias = false;             // the weight-gradient GEMM also reduces the bias gradient
    TpSync fwd_sync = TpSync::none, dgrad_sync = TpSync::none, wgrad_sync = TpSync::none;
    double sync_bytes = 0;
};

double weight_bytes(const Dims& x, const Linear& l) {
    return static_cast<double>(l.in) * static_cast<double>(l.out) * x.wb;
}

Operator linear_forward(const Dims& x, const Linear& l) {
    const double t = static_cast<double>(l.tokens);
    const double bias = l.bias_in_gemm ? static_cast<double>(l.out) * x.wb : 0.0;
    std::vector<TensorUse> uses = l.x_reads;
    uses.push_back(use(x.weight(l.weight), weight_bytes(x, l)));
    uses.insert(uses.end(), l.y_writes.begin(), l.y_writes.end());
    const double y = l.y_bytes >= 0 ? l.y_bytes : t * static_cast<double>(l.out) * x.ab;
    Operator op = gemm(l.name, x.gemm_dt, l.tokens, l.out, l.in, 1,
                       t * static_cast<double>(l.in) * x.in_b + weight_bytes(x, l) + bias, y, std::move(uses));
    op.kernel.epilogue_read = Bytes::ceil(bias);
    set_sync(x, op, l.fwd_sync, l.sync_bytes);
    return op;
}

// dX[tokens, in] = dY[tokens, out] W^T
Operator linear_dgrad(const Dims& x, const Linear& l) {
    const double t = static_cast<double>(l.tokens);
    std::vector<TensorUse> uses = l.dy_reads;
    uses.push_back(use(x.weight(l.weight), weight_bytes(x, l)));
    uses.insert(uses.end(), l.dx_writes.begin(), l.dx_writes.end());
    Operator op = gemm(l.name + "_dgrad", x.gemm_dt, l.tokens, l.in, l.out, 1,
                       t * static_cast<double>(l.out) * x.in_b + weight_bytes(x, l),
                       t * static_cast<double>(l.in) * x.ab, std::move(uses));
    set_sync(x, op, l.dgrad_sync, l.sync_bytes);
    return op;
}

// dW[in, out] += X^T dY (accumulated across micro-batches, hence read and written).
Operator linear_wgrad(const Dims& x, const Linear& l) {
    const double t = static_cast<double>(l.tokens);
    const double g = static_cast<double>(l.in) * static_cast<double>(l.out) * x.gb;
    const double bias_g = l.has_bias ? static_cast<double>(l.out) * x.gb : 0.0;
    std::vector<TensorUse> uses = l.x_reads;
    uses.insert(uses.end(), l.dy_reads.begin(), l.dy_reads.end());
    uses.push_back(use(weight_tensor_id(x.layer, l.weight | kGrad), g, true));
    Operator op = gemm(l.name + "_wgrad", x.gemm_dt, l.in, l.out, l.tokens, 1,
                       t * static_cast<double>(l.in + l.out) * x.in_b + g + bias_g, g + bias_g, std::move(uses));
    op.kernel.epilogue_read = Bytes::ceil(g + bias_g);  // dW (and db) accumulated: read once, not per tile
    op.is_weight_grad = true;
    set_sync(x, op, l.wgrad_sync, l.sync_bytes);
    return op;
}

std::vector<TensorUse> grads_of(const std::vector<TensorUse>& uses, bool write) {
    std::vector<TensorUse> out;
    for (const auto& u : uses) out.push_back(TensorUse{flagged(u.id, kGrad), u.size, write});
    return out;
}

// ---- the attention core -------------------------------------------------------

struct AttentionTensors {
    TensorUse q, o, lse;
    std::vector<TensorUse> k, v, kv;  // naive reads K and V separately, flash both at once
};

double q_bytes(const Dims& x) { return static_cast<double>(x.T * x.a_p * x.d) * x.ab; }
// K and V of the whole context for the micro-batch, per shard (under context
// parallelism: of the 1/cp of the context this rank holds, one ring chunk).
double kv_bytes(const Dims& x) {
    return 2.0 * static_cast<double>(x.s.batch * x.s.context * x.g_p * x.d) * x.kb / static_cast<double>(x.cp);
}

AttentionTensors attention_tensors(const Dims& x) {
    AttentionTensors t;
    t.q = use(x.act(aslot::q), q_bytes(x));
    t.o = use(x.act(aslot::attn), q_bytes(x));
    t.lse = use(x.act(aslot::lse), static_cast<double>(x.T * x.a_p) * 4.0);
    const double kv = kv_bytes(x);
    if (x.kv_mode) {
        const std::uint64_t id = kv_tensor_id(x.layer, x.mb);
        t.kv = {use(id, kv)};
        t.k = {use(flagged(id, 1), kv / 2)};
        t.v = {use(flagged(id, 2), kv / 2)};
    } else {
        t.kv = {use(x.act(aslot::kv), kv)};
        t.k = {use(x.act(aslot::k), kv / 2)};
        t.v = {use(x.act(aslot::v), kv / 2)};
    }
    return t;
}

// 4 * b * heads * pairs * head_dim, pairs = (query, key) pairs computed.
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
    return 4.0 * static_cast<double>(x.s.batch * x.a_p) * pairs * static_cast<double>(x.d);
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
    op.kernel.k = x.d;
    op.kernel.batch = x.s.batch * x.a_p;
    op.kernel.causal = k == 0 && x.o->causal;
    op.cp_step = static_cast<int>(k);
    if (k > 0) op.cp_ring_bytes = Bytes::ceil(ring_bytes);
}

void ring_attention_forward(const Dims& x, const AttentionTensors& t, std::vector<Operator>& ops) {
    const double q = q_bytes(x), kv = kv_bytes(x), lse = t.lse.size.as_double();
    const double step_flops = flash_forward_flops(x, x.o->causal) / static_cast<double>(x.cp * x.cp);
    for (std::int64_t k = 0; k < x.cp; ++k) {
        std::vector<TensorUse> uses{t.q};
        const auto kvs = ring_kv(x, t, k);
        uses.insert(uses.end(), kvs.begin(), kvs.end());
        // Steps after the first rescale and update the running output and LSE.
        if (k > 0) uses.insert(uses.end(), {t.o, t.lse});
        uses.push_back(TensorUse{t.o.id, t.o.size, true});
        uses.push_back(TensorUse{t.lse.id, t.lse.size, true});
        Operator op = make_op("attention", KernelKind::attention, x.attn_dt, step_flops,
                              q + kv + (k > 0 ? q + lse : 0.0), q + lse, std::move(uses));
        set_ring_step(x, op, k, kv);
        ops.push_back(std::move(op));
    }
}

// Backward: each step recomputes its block of scores and produces dQ
// (accumulated locally) and a dK/dV partial that travels the ring with the
// next step's K/V (so a backward step moves twice the forward bytes).
void ring_attention_backward(const Dims& x, const AttentionTensors& t, std::vector<Operator>& ops) {
    const double q = q_bytes(x), kv = kv_bytes(x), lse = t.lse.size.as_double();
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
        Operator op = make_op("attention_bwd", KernelKind::attention, x.attn_dt, step_flops,
                              3 * q + kv + lse + (k > 0 ? q : 0.0), q + kv, std::move(uses));
        op.kernel.backward = true;
        set_ring_step(x, op, k, 2 * kv);
        ops.push_back(std::move(op));
    }
}

// ---- dropout ----------------------------------------------------------------------
// PyTorch's dropout draws a Philox random number per element, scales the kept
// ones by 1 / (1 - p) and keeps a 1-byte mask for the backward. Megatron
// fuses the hidden dropout with the bias and residual add
// (bias_dropout_add_fused_train), so there it only adds the mask's write;
// unfused stacks run it as its own kernel. Fused (flash) attention draws its
// dropout inside the attention kernel: no extra kernel or traffic
// (docs/workload-model.md, "Dropout").
constexpr double kDropoutFlops = 2;  // random draw compare + scale, per element

// Unfused attention: the dropout of the probability matrix; returns the id
// the values GEMM reads (the probabilities themselves without dropout).
std::uint64_t attention_dropout_forward(const Dims& x, std::vector<Operator>& ops, std::uint64_t probs,
                                        double s_bytes) {
    if (x.p_attention <= 0) return probs;
    const double elems = s_bytes / x.ab;
    const std::uint64_t kept = x.act(aslot::probs_dropped);
    ops.push_back(elementwise(x, "attention_dropout", kDropoutFlops * elems, s_bytes, s_bytes + elems,
                              {use(probs, s_bytes), use(kept, s_bytes, true), use(x.act(aslot::probs_mask), elems, true)}));
    return kept;
}

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
                              q + kv, q + lse, std::move(uses));
        op.kernel.m = tq;
        op.kernel.n = c;
        op.kernel.k = x.d;
        op.kernel.batch = b * x.a_p;
        op.kernel.causal = x.o->causal;
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
                              3 * q + kv + t.lse.size.as_double(), q + kv, std::move(uses));
        op.kernel.m = tq;
        op.kernel.n = c;
        op.kernel.k = x.d;
        op.kernel.batch = b * x.a_p;
        op.kernel.causal = x.o->causal;
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

// ---- the layer's linears -------------------------------------------------------

// Gathered (sequence-parallel) read of a norm output, or the plain one.
std::uint64_t gathered_if_sp(const Dims& x, std::uint64_t id) { return x.sp ? flagged(id, kGathered) : id; }
std::uint64_t partial_if_tp(const Dims& x, std::uint64_t id) { return x.p > 1 ? flagged(id, kPartial) : id; }

double full_act(const Dims& x) { return static_cast<double>(x.T * x.h) * x.ab; }
double shard_act(const Dims& x) { return x.Ts * static_cast<double>(x.h) * x.ab; }

Linear qkv_linear(const Dims& x) {
    const AttentionTensors t = attention_tensors(x);
    Linear l;
    l.name = "qkv";
    l.weight = wslot::qkv;
    l.tokens = x.T;
    l.in = x.h;
    l.out = (x.a_p + 2 * x.g_p) * x.d;
    l.x_reads = {use(gathered_if_sp(x, x.act(aslot::norm1)), full_act(x))};
    const double new_kv = 2.0 * static_cast<double>(x.T * x.g_p * x.d) * x.kb;
    l.y_bytes = q_bytes(x) + new_kv;
    l.y_writes = {TensorUse{t.q.id, t.q.size, true}};
    const bool decode = x.s.context > x.s.new_tokens;
    if (decode) {
        // The new tokens' K and V go straight into the cache (epilogue write);
        // the attention kernel then reads the cache for the whole context.
        l.y_writes.push_back(use(x.act(aslot::kv_new), new_kv, true));
    } else {
        const auto& kvs = x.o->flash_attention ? t.kv : std::vector<TensorUse>{t.k[0], t.v[0]};
        for (const auto& u : kvs) l.y_writes.push_back(TensorUse{u.id, u.size, true});
    }
    l.dy_reads = grads_of(
        x.o->flash_attention ? std::vector<TensorUse>{t.q, t.kv[0]} : std::vector<TensorUse>{t.q, t.k[0], t.v[0]},
        false);
    l.dx_writes = {use(partial_if_tp(x, flagged(x.act(aslot::norm1), kGrad)), full_act(x), true)};
    l.bias_in_gemm = x.bias;
    l.has_bias = x.bias;
    l.fwd_sync = TpSync::before_column_parallel;  // set_sync drops it unless tp > 1; only under SP:
    if (!x.sp) l.fwd_sync = TpSync::none;
    l.dgrad_sync = TpSync::after_column_input_grad;
    l.wgrad_sync = x.sp ? TpSync::before_column_parallel : TpSync::none;
    l.sync_bytes = full_act(x);
    return l;
}

Linear out_linear(const Dims& x) {
    Linear l;
    l.name = "out_proj";
    l.weight = wslot::out;
    l.tokens = x.T;
    l.in = x.a_p * x.d;
    l.out = x.h;
    l.x_reads = {use(x.act(aslot::attn), q_bytes(x))};
    l.y_writes = {use(partial_if_tp(x, x.act(aslot::out_proj)), full_act(x), true)};
    l.dy_reads = {use(gathered_if_sp(x, flagged(x.act(aslot::resid_mid), kGrad)), full_act(x))};
    l.dx_writes = {use(flagged(x.act(aslot::attn), kGrad), q_bytes(x), true)};
    l.has_bias = x.bias;  // added in the residual kernel
    l.fwd_sync = TpSync::after_row_parallel;
    l.dgrad_sync = x.sp ? TpSync::before_column_parallel : TpSync::none;
    l.sync_bytes = full_act(x);
    return l;
}

// The MLP of one expert (or the dense MLP): ids of its tensors.
struct MlpIds {
    std::string prefix;  // "mlp" or "expert"
    int w_up = 0, w_down = 0;
    std::int64_t tokens = 0;
    std::uint64_t in = 0, gate = 0, up = 0, silu = 0, act = 0, out = 0;  // activation ids
    bool dense = true;  // dense MLP: TP syncs around it; experts sync after the combine
};

MlpIds dense_mlp_ids(const Dims& x) {
    MlpIds ids;
    ids.prefix = "mlp";
    ids.w_up = wslot::mlp_up;
    ids.w_down = wslot::mlp_down;
    ids.tokens = x.T;
    ids.in = gathered_if_sp(x, x.act(aslot::norm2));
    ids.gate = x.act(aslot::gate);
    ids.up = x.act(aslot::up);
    ids.silu = x.act(aslot::silu);
    ids.act = x.act(aslot::act);
    ids.out = partial_if_tp(x, x.act(aslot::down));
    return ids;
}

MlpIds expert_mlp_ids(const Dims& x, std::int64_t e, std::int64_t tokens) {
    const int base = aslot::expert + 8 * static_cast<int>(e);
    MlpIds ids;
    ids.prefix = "expert";
    ids.w_up = wslot::expert + 2 * static_cast<int>(e);
    ids.w_down = ids.w_up + 1;
    ids.tokens = tokens;
    ids.in = x.act(base);
    ids.gate = x.act(base + 1);
    ids.up = x.act(base + 2);
    ids.silu = x.act(base + 3);
    ids.act = x.act(base + 4);
    ids.out = x.act(base + 5);
    ids.dense = false;
    return ids;
}

// Outputs of the up GEMM: [gate | up] for SwiGLU, one tensor for GELU.
std::vector<TensorUse> up_outputs(const Dims& x, const MlpIds& ids, bool write) {
    const double f = static_cast<double>(ids.tokens * x.f_p) * x.ab;
    if (x.swiglu) return {use(ids.gate, f, write), use(ids.up, f, write)};
    return {use(ids.up, f, write)};
}

Linear mlp_up_linear(const Dims& x, const MlpIds& ids) {
    Linear l;
    l.name = ids.prefix + "_up";
    l.weight = ids.w_up;
    l.tokens = ids.tokens;
    l.in = x.h;
    l.out = x.fup_p;
    const double in_bytes = static_cast<double>(ids.tokens * x.h) * x.ab;
    l.x_reads = {use(ids.in, in_bytes)};
    l.y_writes = up_outputs(x, ids, true);
    l.dy_reads = grads_of(up_outputs(x, ids, false), false);
    const std::uint64_t dx = ids.dense ? partial_if_tp(x, flagged(x.act(aslot::norm2), kGrad)) : flagged(ids.in, kGrad);
    l.dx_writes = {use(dx, in_bytes, true)};
    l.has_bias = x.bias;  // bias added by the activation kernel (or its own kernel when unfused)
    if (ids.dense) {
        l.fwd_sync = x.sp ? TpSync::before_column_parallel : TpSync::none;
        l.dgrad_sync = TpSync::after_column_input_grad;
        l.wgrad_sync = x.sp ? TpSync::before_column_parallel : TpSync::none;
        l.sync_bytes = full_act(x);
    }
    return l;
}

Linear mlp_down_linear(const Dims& x, const MlpIds& ids) {
    Linear l;
    l.name = ids.prefix + "_down";
    l.weight = ids.w_down;
    l.tokens = ids.tokens;
    l.in = x.f_p;
    l.out = x.h;
    const double out_bytes = static_cast<double>(ids.tokens * x.h) * x.ab;
    const double act_bytes = static_cast<double>(ids.tokens * x.f_p) * x.ab;
    l.x_reads = {use(ids.act, act_bytes)};
    l.y_writes = {use(ids.out, out_bytes, true)};
    const std::uint64_t dy =
        ids.dense ? gathered_if_sp(x, flagged(x.act(aslot::resid, x.layer + 1), kGrad)) : flagged(ids.out, kGrad);
    l.dy_reads = {use(dy, out_bytes)};
    l.dx_writes = {use(flagged(ids.act, kGrad), act_bytes, true)};
    l.has_bias = x.bias && ids.dense;
    if (ids.dense) {
        l.fwd_sync = TpSync::after_row_parallel;
        l.dgrad_sync = x.sp ? TpSync::before_column_parallel : TpSync::none;
        l.sync_bytes = full_act(x);
    }
    return l;
}

// Bias (unfused) and activation between the up and down GEMMs.
void mlp_activation_forward(const Dims& x, const MlpIds& ids, std::vector<Operator>& ops) {
    const double n = static_cast<double>(ids.tokens * x.f_p);  // elements of the activation output
    const double f = n * x.ab;
    const double bias = x.bias ? static_cast<double>(x.fup_p) * x.wb : 0.0;
    const double up_elems = static_cast<double>(ids.tokens * x.fup_p);
    const auto ups = up_outputs(x, ids, false);
    if (!x.o->fuse_elementwise && x.bias) {
        std::vector<TensorUse> uses = ups;
        const auto w = up_outputs(x, ids, true);
        uses.insert(uses.end(), w.begin(), w.end());
        ops.push_back(elementwise(x, ids.prefix + "_bias_add", up_elems, up_elems * x.ab + bias, up_elems * x.ab,
                                  std::move(uses)));
    }
    const double fused_bias = x.o->fuse_elementwise ? bias : 0.0;
    const double fused_bias_flops = x.o->fuse_elementwise && x.bias ? up_elems : 0.0;
    const std::string bias_tag = x.o->fuse_elementwise && x.bias ? "bias_" : "";
    if (!x.swiglu) {
        ops.push_back(elementwise(x, ids.prefix + "_" + bias_tag + "gelu", kGeluFlops * n + fused_bias_flops,
                                  f + fused_bias, f, {use(ids.up, f), use(ids.act, f, true)}));
        return;
    }
    if (x.o->fuse_elementwise) {
        ops.push_back(elementwise(x, ids.prefix + "_" + bias_tag + "swiglu", (kSiluFlops + 1) * n + fused_bias_flops,
                                  2 * f + fused_bias, f, {use(ids.gate, f), use(ids.up, f), use(ids.act, f, true)}));
        return;
    }
    ops.push_back(
        elementwise(x, ids.prefix + "_silu", kSiluFlops * n, f, f, {use(ids.gate, f), use(ids.silu, f, true)}));
    ops.push_back(elementwise(x, ids.prefix + "_gate_mul", n, 2 * f, f,
                              {use(ids.silu, f), use(ids.up, f), use(ids.act, f, true)}));
}

void mlp_activation_backward(const Dims& x, const MlpIds& ids, std::vector<Operator>& ops) {
    const double n = static_cast<double>(ids.tokens * x.f_p);
    const double f = n * x.ab;
    const std::uint64_t dact = flagged(ids.act, kGrad);
    if (!x.swiglu) {
        ops.push_back(elementwise(x, ids.prefix + "_gelu_bwd", 2 * kGeluFlops * n, 2 * f, f,
                                  {use(dact, f), use(ids.up, f), use(flagged(ids.up, kGrad), f, true)}));
        return;
    }
    if (x.o->fuse_elementwise) {
        ops.push_back(elementwise(x, ids.prefix + "_swiglu_bwd", 2 * (kSiluFlops + 1) * n, 3 * f, 2 * f,
                                  {use(dact, f), use(ids.gate, f), use(ids.up, f),
                                   use(flagged(ids.gate, kGrad), f, true), use(flagged(ids.up, kGrad), f, true)}));
        return;
    }
    ops.push_back(elementwise(x, ids.prefix + "_gate_mul_bwd", 2 * n, 3 * f, 2 * f,
                              {use(dact, f), use(ids.silu, f), use(ids.up, f), use(flagged(ids.silu, kGrad), f, true),
                               use(flagged(ids.up, kGrad), f, true)}));
    ops.push_back(
        elementwise(x, ids.prefix + "_silu_bwd", 2 * kSiluFlops * n, 2 * f, f,
                    {use(flagged(ids.silu, kGrad), f), use(ids.gate, f), use(flagged(ids.gate, kGrad), f, true)}));
}

// ---- mixture of experts --------------------------------------------------------

struct MoeShape {
    std::int64_t active = 0;  // experts receiving tokens
    std::int64_t tokens = 0;  // tokens per active expert
};

MoeShape moe_shape(const Dims& x) {
    const std::int64_t routed = x.T * x.m->top_k;
    MoeShape s;
    s.active = std::min(x.m->experts, routed);
    s.tokens = ceil_div(routed, s.active);
    return s;
}

Linear router_linear(const Dims& x) {
    Linear l;
    l.name = "router";
    l.weight = wslot::router;
    l.tokens = x.T;
    l.in = x.h;
    l.out = x.m->experts;
    const double e = static_cast<double>(x.T * x.m->experts) * x.ab;
    l.x_reads = {use(gathered_if_sp(x, x.act(aslot::norm2)), full_act(x))};
    l.y_writes = {use(x.act(aslot::router), e, true)};
    l.dy_reads = {use(flagged(x.act(aslot::router), kGrad), e)};
    // Accumulates into the input gradient the dispatch backward produced (after its TP reduction).
    l.dx_writes = {use(flagged(x.act(aslot::norm2), kGrad), full_act(x), true)};
    l.fwd_sync = x.sp ? TpSync::before_column_parallel : TpSync::none;
    l.sync_bytes = full_act(x);
    return l;
}

void moe_forward(const Dims& x, std::vector<Operator>& ops) {
    const MoeShape ms = moe_shape(x);
    const double T = static_cast<double>(x.T), k = static_cast<double>(x.m->top_k);
    const double E = static_cast<double>(x.m->experts), h = static_cast<double>(x.h);
    ops.push_back(linear_forward(x, router_linear(x)));
    const double idx = T * k * 8.0;  // expert index (int32) and gate weight (fp32) per routed token
    ops.push_back(elementwise(x, "router_topk", kSoftmaxFlops * T * E, T * E * x.ab, idx,
                              {use(x.act(aslot::router), T * E * x.ab), use(x.act(aslot::topk), idx, true)}));
    const double slice = static_cast<double>(ms.tokens) * h * x.ab;
    std::vector<TensorUse> dispatch{use(gathered_if_sp(x, x.act(aslot::norm2)), full_act(x)),
                                    use(x.act(aslot::topk), idx)};
    for (std::int64_t e = 0; e < ms.active; ++e)
        dispatch.push_back(use(expert_mlp_ids(x, e, ms.tokens).in, slice, true));
    ops.push_back(elementwise(x, "moe_dispatch", 0, full_act(x) + idx, T * k * h * x.ab, std::move(dispatch)));
    std::vector<TensorUse> combine{use(x.act(aslot::topk), idx)};
    for (std::int64_t e = 0; e < ms.active; ++e) {
        const MlpIds ids = expert_mlp_ids(x, e, ms.tokens);
        ops.push_back(linear_forward(x, mlp_up_linear(x, ids)));
        mlp_activation_forward(x, ids, ops);
        ops.push_back(linear_forward(x, mlp_down_linear(x, ids)));
        combine.push_back(use(ids.out, slice));
    }
    combine.push_back(use(partial_if_tp(x, x.act(aslot::down)), full_act(x), true));
    Operator op = elementwise(x, "moe_combine", 2 * T * k * h, T * k * h * x.ab + idx, full_act(x), std::move(combine));
    set_sync(x, op, TpSync::after_row_parallel, full_act(x));
    ops.push_back(std::move(op));
}

void moe_backward(const Dims& x, std::vector<Operator>& ops) {
    const MoeShape ms = moe_shape(x);
    const double T = static_cast<double>(x.T), k = static_cast<double>(x.m->top_k);
    const double E = static_cast<double>(x.m->experts), h = static_cast<double>(x.h);
    const double idx = T * k * 8.0;
    const double slice = static_cast<double>(ms.tokens) * h * x.ab;
    const std::uint64_t dy = gathered_if_sp(x, flagged(x.act(aslot::resid, x.layer + 1), kGrad));
    // Combine backward: each expert's output gradient, and the gate-weight gradient.
    std::vector<TensorUse> cb{use(dy, full_act(x)), use(x.act(aslot::topk), idx)};
    for (std::int64_t e = 0; e < ms.active; ++e) {
        const MlpIds ids = expert_mlp_ids(x, e, ms.tokens);
        cb.push_back(use(ids.out, slice));
        cb.push_back(use(flagged(ids.out, kGrad), slice, true));
    }
    cb.push_back(use(flagged(x.act(aslot::topk), kGrad), T * k * 4.0, true));
    Operator combine_bwd = elementwise(x, "moe_combine_bwd", 3 * T * k * h, full_act(x) + 2 * T * k * h * x.ab + idx,
                                       T * k * h * x.ab + T * k * 4.0, std::move(cb));
    if (x.sp) set_sync(x, combine_bwd, TpSync::before_column_parallel, full_act(x));
    ops.push_back(std::move(combine_bwd));
    std::vector<TensorUse> db;
    for (std::int64_t e = ms.active - 1; e >= 0; --e) {
        const MlpIds ids = expert_mlp_ids(x, e, ms.tokens);
        const Linear down = mlp_down_linear(x, ids), up = mlp_up_linear(x, ids);
        ops.push_back(linear_dgrad(x, down));
        ops.push_back(linear_wgrad(x, down));
        mlp_activation_backward(x, ids, ops);
        ops.push_back(linear_dgrad(x, up));
        ops.push_back(linear_wgrad(x, up));
        db.push_back(use(flagged(ids.in, kGrad), slice));
    }
    // Dispatch backward: sum each token's expert input gradients; the TP
    // reduction of the column-parallel experts' input gradient follows.
    db.push_back(use(partial_if_tp(x, flagged(x.act(aslot::norm2), kGrad)), full_act(x), true));
    Operator dispatch_bwd =
        elementwise(x, "moe_dispatch_bwd", T * k * h, T * k * h * x.ab + idx, full_act(x), std::move(db));
    set_sync(x, dispatch_bwd, TpSync::after_column_input_grad, full_act(x));
    ops.push_back(std::move(dispatch_bwd));
    const double e_bytes = T * E * x.ab;
    ops.push_back(elementwise(x, "router_topk_bwd", 2 * kSoftmaxFlops * T * E, e_bytes + T * k * 4.0, e_bytes,
                              {use(x.act(aslot::router), e_bytes), use(flagged(x.act(aslot::topk), kGrad), T * k * 4.0),
                               use(flagged(x.act(aslot::router), kGrad), e_bytes, true)}));
    const Linear router = router_linear(x);
    ops.push_back(linear_dgrad(x, router));
    ops.back().kernel.bytes_read += Bytes::ceil(full_act(x));  // beta = 1: reads the gradient it adds to
    ops.push_back(linear_wgrad(x, router));
}

// ---- the layer -------------------------------------------------------------------

// Hidden dropout on a residual branch (`branch`, the out-projection or MLP
// output): bytes and FLOPs a fused residual kernel gains, or its own kernel
// when elementwise work is unfused.
struct HiddenDropout {
    double flops = 0, mask_bytes = 0;
};
HiddenDropout hidden_dropout_extra(const Dims& x) {
    if (x.p_hidden <= 0) return {};
    const double elems = x.Ts * static_cast<double>(x.h);
    return {kDropoutFlops * elems, elems};
}

void hidden_dropout_forward(const Dims& x, std::vector<Operator>& ops, const std::string& name, std::uint64_t branch,
                            int mask_slot) {
    const HiddenDropout d = hidden_dropout_extra(x);
    if (d.mask_bytes <= 0 || x.o->fuse_elementwise) return;
    const double xs = shard_act(x);
    ops.push_back(elementwise(x, name + "_dropout", d.flops, xs, xs + d.mask_bytes,
                              {use(branch, xs), use(branch, xs, true), use(x.act(mask_slot), d.mask_bytes, true)}));
}

// The backward of a hidden dropout: the branch gradient is the residual
// stream's gradient times mask / (1 - p).
void hidden_dropout_backward(const Dims& x, std::vector<Operator>& ops, const std::string& name,
                             std::uint64_t dresidual, std::uint64_t dbranch, int mask_slot) {
    const HiddenDropout d = hidden_dropout_extra(x);
    if (d.mask_bytes <= 0) return;
    const double xs = shard_act(x);
    ops.push_back(elementwise(x, name + "_dropout_bwd", d.mask_bytes, xs + d.mask_bytes, xs,
                              {use(dresidual, xs), use(x.act(mask_slot), d.mask_bytes), use(dbranch, xs, true)}));
}


void forward_ops(const Dims& x, std::vector<Operator>& ops) {
    const double xs = shard_act(x);
    const double nf = x.norm_flops() * x.Ts * static_cast<double>(x.h);
    const double add = x.Ts * static_cast<double>(x.h);                // one add per element
    const double hb = x.bias ? static_cast<double>(x.h) * x.wb : 0.0;  // a row-parallel bias
    const bool fuse = x.o->fuse_elementwise;
    const std::uint64_t resid = x.act(aslot::resid), mid = x.act(aslot::resid_mid);
    const std::uint64_t n1 = x.act(aslot::norm1), n2 = x.act(aslot::norm2);

    ops.push_back(elementwise(x, "norm1", nf, xs + x.norm_w, xs,
                              {use(resid, xs), use(x.weight(wslot::norm1), x.norm_w), use(n1, xs, true)}));
    ops.push_back(linear_forward(x, qkv_linear(x)));
    attention_forward(x, ops);
    ops.push_back(linear_forward(x, out_linear(x)));
    // Residual (+ the out-projection's bias) and the second norm.
    const std::uint64_t proj = x.act(aslot::out_proj);
    const HiddenDropout drop = hidden_dropout_extra(x);
    const std::string drop_tag = drop.mask_bytes > 0 ? "dropout_" : "";
    if (fuse) {
        std::vector<TensorUse> uses{use(resid, xs), use(proj, xs), use(x.weight(wslot::norm2), x.norm_w),
                                    use(mid, xs, true), use(n2, xs, true)};
        if (drop.mask_bytes > 0) uses.push_back(use(x.act(aslot::attn_drop_mask), drop.mask_bytes, true));
        ops.push_back(elementwise(x, (x.bias ? "bias_" : "") + drop_tag + "residual_add_norm2",
                                  add * (x.bias ? 2 : 1) + nf + drop.flops, 2 * xs + hb + x.norm_w,
                                  2 * xs + drop.mask_bytes, std::move(uses)));
    } else {
        if (x.bias) {
            ops.push_back(elementwise(x, "out_proj_bias_add", add, xs + hb, xs, {use(proj, xs), use(proj, xs, true)}));
        }
        hidden_dropout_forward(x, ops, "out_proj", proj, aslot::attn_drop_mask);
        ops.push_back(
            elementwise(x, "residual_add1", add, 2 * xs, xs, {use(resid, xs), use(proj, xs), use(mid, xs, true)}));
        ops.push_back(elementwise(x, "norm2", nf, xs + x.norm_w, xs,
                                  {use(mid, xs), use(x.weight(wslot::norm2), x.norm_w), use(n2, xs, true)}));
    }
    if (x.m->experts > 0) {
        moe_forward(x, ops);
    } else {
        const MlpIds ids = dense_mlp_ids(x);
        ops.push_back(linear_forward(x, mlp_up_linear(x, ids)));
        mlp_activation_forward(x, ids, ops);
        ops.push_back(linear_forward(x, mlp_down_linear(x, ids)));
    }
    const std::uint64_t down = x.act(aslot::down), next = x.act(aslot::resid, x.layer + 1);
    const bool bias_here = x.bias && x.m->experts == 0;  // experts carry no shared output bias
    if (!fuse && bias_here) {
        ops.push_back(elementwise(x, "mlp_down_bias_add", add, xs + hb, xs, {use(down, xs), use(down, xs, true)}));
    }
    const bool fused_bias = fuse && bias_here;
    if (!fuse) hidden_dropout_forward(x, ops, "mlp", down, aslot::mlp_drop_mask);
    const bool fused_drop = fuse && drop.mask_bytes > 0;
    std::vector<TensorUse> uses{use(mid, xs), use(down, xs), use(next, xs, true)};
    if (fused_drop) uses.push_back(use(x.act(aslot::mlp_drop_mask), drop.mask_bytes, true));
    ops.push_back(elementwise(x, std::string(fused_bias ? "bias_" : "") + (fused_drop ? "dropout_" : "") + "residual_add2",
                              add * (fused_bias ? 2 : 1) + (fused_drop ? drop.flops : 0.0),
                              2 * xs + (fused_bias ? hb : 0.0), xs + (fused_drop ? drop.mask_bytes : 0.0),
                              std::move(uses)));
}

// Backward of a norm, followed by (or fused with) the addition of the
// residual branch's gradient.
void norm_backward(const Dims& x, std::vector<Operator>& ops, const std::string& name, int weight, std::uint64_t dnorm,
                   std::uint64_t input, std::uint64_t dresidual, std::uint64_t dinput) {
    const double xs = shard_act(x);
    const double nf = 2 * x.norm_flops() * x.Ts * static_cast<double>(x.h);
    const double add = x.Ts * static_cast<double>(x.h);
    if (x.o->fuse_elementwise) {
        ops.push_back(elementwise(x, name + "_bwd_residual_add", nf + add, 3 * xs + x.norm_w, xs,
                                  {use(dnorm, xs), use(input, xs), use(x.weight(weight), x.norm_w), use(dresidual, xs),
                                   use(dinput, xs, true)}));
        return;
    }
    const std::uint64_t tmp = flagged(x.act(aslot::norm_grad), kGrad);
    ops.push_back(elementwise(x, name + "_bwd", nf, 2 * xs + x.norm_w, xs,
                              {use(dnorm, xs), use(input, xs), use(x.weight(weight), x.norm_w), use(tmp, xs, true)}));
    ops.push_back(elementwise(x, name + "_residual_grad_add", add, 2 * xs, xs,
                              {use(tmp, xs), use(dresidual, xs), use(dinput, xs, true)}));
}

void backward_ops(const Dims& x, std::vector<Operator>& ops, Recompute recompute) {
    if (recompute == Recompute::full) {
        std::vector<Operator> fwd;
        forward_ops(x, fwd);
        for (auto& op : fwd) {
            op.kernel.name = "recompute_" + op.kernel.name;
            ops.push_back(std::move(op));
        }
    }
    const std::uint64_t dnext = flagged(x.act(aslot::resid, x.layer + 1), kGrad);
    const std::uint64_t dmid = flagged(x.act(aslot::resid_mid), kGrad);
    hidden_dropout_backward(x, ops, "mlp", dnext, flagged(x.act(aslot::down), kGrad), aslot::mlp_drop_mask);
    if (x.m->experts > 0) {
        moe_backward(x, ops);
    } else {
        const MlpIds ids = dense_mlp_ids(x);
        const Linear down = mlp_down_linear(x, ids), up = mlp_up_linear(x, ids);
        ops.push_back(linear_dgrad(x, down));
        ops.push_back(linear_wgrad(x, down));
        mlp_activation_backward(x, ids, ops);
        ops.push_back(linear_dgrad(x, up));
        ops.push_back(linear_wgrad(x, up));
    }
    norm_backward(x, ops, "norm2", wslot::norm2, flagged(x.act(aslot::norm2), kGrad), x.act(aslot::resid_mid), dnext,
                  dmid);
    hidden_dropout_backward(x, ops, "out_proj", dmid, flagged(x.act(aslot::out_proj), kGrad), aslot::attn_drop_mask);
    const Linear out = out_linear(x);
    ops.push_back(linear_dgrad(x, out));
    ops.push_back(linear_wgrad(x, out));
    if (recompute == Recompute::selective) {
        std::vector<Operator> fwd;
        attention_forward(x, fwd);
        for (auto& op : fwd) {
            op.kernel.name = "recompute_" + op.kernel.name;
            ops.push_back(std::move(op));
        }
    }
    attention_backward(x, ops);
    const Linear qkv = qkv_linear(x);
    ops.push_back(linear_dgrad(x, qkv));
    ops.push_back(linear_wgrad(x, qkv));
    norm_backward(x, ops, "norm1", wslot::norm1, flagged(x.act(aslot::norm1), kGrad), x.act(aslot::resid), dmid,
                  flagged(x.act(aslot::resid), kGrad));
}

void check_layer(const ModelSpec& m, std::int64_t layer) {
    if (layer < 0 || layer >= m.layers) {
        throw InternalError(fmt::format("layer {} is outside model '{}' ({} layers)", layer, m.name, m.layers));
    }
}

}  // namespace

// ---- public interface -----------------------------------------------------------

std::uint64_t weight_tensor_id(std::int64_t layer, int which) { return encode(IdKind::weight, layer, which, 0); }
std::uint64_t activation_tensor_id(std::int64_t layer, int which, std::int64_t microbatch) {
    return encode(IdKind::activation, layer, which, microbatch);
}
std::uint64_t kv_tensor_id(std::int64_t layer, std::int64_t microbatch) {
    return encode(IdKind::kv, layer, 0, microbatch);
}

std::int64_t heads_per_shard(const ModelSpec& m, int tp) {
    if (tp < 1 || m.heads % tp != 0) {
        throw ModelError(fmt::format("model '{}': tensor-parallel degree {} does not divide its {} attention heads",
                                     m.name, tp, m.heads));
    }
    return m.heads / tp;
}

std::int64_t kv_heads_per_shard(const ModelSpec& m, int tp) {
    if (tp >= 1 && m.kv_heads % tp == 0) return m.kv_heads / tp;
    if (tp >= 1 && tp % m.kv_heads == 0) return 1;  // each KV head replicated on tp / kv_heads shards
    throw ModelError(fmt::format("model '{}': tensor-parallel degree {} and its {} KV heads do not divide one another",
                                 m.name, tp, m.kv_heads));
}

hw::DType activation_dtype(const Precision& p) {
    switch (p.compute) {
        case DType::fp32:
        case DType::tf32: return DType::fp32;
        case DType::fp16: return DType::fp16;
        case DType::bf16: return DType::bf16;
        case DType::fp8:
        case DType::int8: return p.weights == DType::fp16 ? DType::fp16 : DType::bf16;
    }
    return DType::bf16;
}

hw::AttentionKernel attention_kernel_of(AttentionImpl a) {
    switch (a) {
        case AttentionImpl::flash3:
        case AttentionImpl::cudnn: return hw::AttentionKernel::best;
        case AttentionImpl::flash1:
        case AttentionImpl::flash2:
        case AttentionImpl::triton:
        case AttentionImpl::xformers:
        case AttentionImpl::naive: return hw::AttentionKernel::flash2;
    }
    return hw::AttentionKernel::best;
}

namespace {
// Fused attention kernels run as the options' implementation.
std::vector<Operator> with_attention_kernel(std::vector<Operator> ops, const OperatorOptions& opt) {
    for (auto& op : ops)
        if (op.kernel.kind == KernelKind::attention) op.kernel.attention_kernel = opt.attention_kernel;
    return ops;
}
}  // namespace

std::vector<Operator> layer_forward(const ModelSpec& m, std::int64_t layer, std::int64_t microbatch,
                                    const PassShape& shape, const OperatorOptions& opt) {
    check_layer(m, layer);
    const Dims x = make_dims(m, layer, microbatch, shape, opt);
    std::vector<Operator> ops;
    forward_ops(x, ops);
    return with_attention_kernel(std::move(ops), opt);
}

std::vector<Operator> layer_backward(const ModelSpec& m, std::int64_t layer, std::int64_t microbatch,
                                     const PassShape& shape, const OperatorOptions& opt, Recompute recompute) {
    check_layer(m, layer);
    const Dims x = make_dims(m, layer, microbatch, shape, opt);
    std::vector<Operator> ops;
    backward_ops(x, ops, recompute);
    return with_attention_kernel(std::move(ops), opt);
}

std::vector<Operator> embedding_forward(const ModelSpec& m, std::int64_t microbatch, const PassShape& shape,
                                        const OperatorOptions& opt) {
    const Dims x = make_dims(m, kEmbeddingLayer, microbatch, shape, opt);
    const double T = static_cast<double>(x.T), h = static_cast<double>(x.h);
    const bool learned = m.position == PositionKind::learned;
    // Vocabulary-parallel table: each shard gathers the rows it owns (1/tp of
    // the tokens on average) and the TP reduction assembles the result.
    const double rows = T * h * x.wb / static_cast<double>(x.p);
    const double ids = T * 4.0;
    Operator op = make_op("embedding", KernelKind::embedding, x.act_dt, learned ? T * h : 0.0,
                          ids + rows + (learned ? T * h * x.wb : 0.0), full_act(x),
                          {use(partial_if_tp(x, x.act(aslot::resid, 0)), full_act(x), true)});
    set_sync(x, op, TpSync::after_row_parallel, full_act(x));
    return {std::move(op)};
}

std::vector<Operator> embedding_backward(const ModelSpec& m, std::int64_t microbatch, const PassShape& shape,
                                         const OperatorOptions& opt) {
    const Dims x = make_dims(m, kEmbeddingLayer, microbatch, shape, opt);
    const double T = static_cast<double>(x.T), h = static_cast<double>(x.h);
    const bool learned = m.position == PositionKind::learned;
    // Scatter-add of the rows' gradients into the table gradient (read-modify-write).
    const double rows = T * h * x.gb / static_cast<double>(x.p) + (learned ? T * h * x.gb : 0.0);
    Operator op = make_op("embedding_bwd", KernelKind::embedding, x.act_dt, (learned ? 2 : 1) * T * h,
                          full_act(x) + T * 4.0 + rows, rows,
                          {use(gathered_if_sp(x, flagged(x.act(aslot::resid, 0), kGrad)), full_act(x))});
    op.is_weight_grad = true;
    if (x.sp) set_sync(x, op, TpSync::before_column_parallel, full_act(x));
    return {std::move(op)};
}

namespace {

struct HeadDims {
    Dims x;
    std::int64_t tokens = 0;  // tokens through the LM head
    double norm_tokens = 0;   // tokens through the final norm (per shard under SP)
    std::int64_t v_p = 0;
};

HeadDims head_dims(const ModelSpec& m, std::int64_t microbatch, const PassShape& shape, const OperatorOptions& opt,
                   bool training) {
    HeadDims hd{make_dims(m, kHeadLayer, microbatch, shape, opt)};
    hd.tokens = training ? hd.x.T : shape.batch;  // inference: the last token of each sequence
    hd.norm_tokens = static_cast<double>(hd.tokens) / (hd.x.sp ? static_cast<double>(hd.x.p) : 1.0);
    hd.v_p = ceil_div(m.vocab, hd.x.p);
    return hd;
}

Linear lm_head_linear(const HeadDims& hd) {
    const Dims& x = hd.x;
    const double in = static_cast<double>(hd.tokens * x.h) * x.ab;
    const double logits = static_cast<double>(hd.tokens * hd.v_p) * x.ab;
    Linear l;
    l.name = "lm_head";
    l.weight = wslot::lm_head;
    l.tokens = hd.tokens;
    l.in = x.h;
    l.out = hd.v_p;
    l.x_reads = {use(gathered_if_sp(x, x.act(aslot::final_norm)), in)};
    l.y_writes = {use(x.act(aslot::logits), logits, true)};
    l.dy_reads = {use(flagged(x.act(aslot::logits), kGrad), logits)};
    l.dx_writes = {use(partial_if_tp(x, flagged(x.act(aslot::final_norm), kGrad)), in, true)};
    l.fwd_sync = x.sp ? TpSync::before_column_parallel : TpSync::none;
    l.dgrad_sync = TpSync::after_column_input_grad;
    l.wgrad_sync = x.sp ? TpSync::before_column_parallel : TpSync::none;
    l.sync_bytes = in;
    return l;
}

// The LM head's weight: the embedding table when tied.
std::uint64_t lm_head_weight_id(const ModelSpec& m) {
    return m.tied_embeddings ? weight_tensor_id(kEmbeddingLayer, wslot::table)
                             : weight_tensor_id(kHeadLayer, wslot::lm_head);
}

void retarget_weight(const ModelSpec& m, Operator& op) {
    for (auto& t : op.kernel.tensors) {
        if (t.id == weight_tensor_id(kHeadLayer, wslot::lm_head)) t.id = lm_head_weight_id(m);
        if (t.id == weight_tensor_id(kHeadLayer, wslot::lm_head | kGrad)) t.id = flagged(lm_head_weight_id(m), kGrad);
    }
}

}  // namespace

std::vector<Operator> head_forward(const ModelSpec& m, std::int64_t microbatch, const PassShape& shape,
                                   const OperatorOptions& opt, bool training) {
    const HeadDims hd = head_dims(m, microbatch, shape, opt, training);
    const Dims& x = hd.x;
    const double h = static_cast<double>(x.h);
    const double ns = hd.norm_tokens * h * x.ab;
    std::vector<Operator> ops;
    ops.push_back(elementwise(x, "final_norm", x.norm_flops() * hd.norm_tokens * h, ns + x.norm_w, ns,
                              {use(x.act(aslot::resid, m.layers), ns), use(x.weight(wslot::final_norm), x.norm_w),
                               use(x.act(aslot::final_norm), ns, true)}));
    ops.push_back(linear_forward(x, lm_head_linear(hd)));
    retarget_weight(m, ops.back());
    const double t = static_cast<double>(hd.tokens), v = static_cast<double>(hd.v_p);
    const double logits = t * v * x.ab;
    const std::uint64_t lid = x.act(aslot::logits);
    if (training) {
        // Vocabulary-parallel cross-entropy: the softmax is kept (in place of
        // the logits) for the backward; three TP all-reduces of one float per
        // token (max, target logit, sum of exponentials).
        Operator ce = elementwise(x, "cross_entropy", kSoftmaxFlops * t * v, logits + t * 4.0, logits + t * 4.0,
                                  {use(lid, logits), use(lid, logits, true), use(x.act(aslot::loss), t * 4.0, true)});
        set_sync(x, ce, TpSync::after_row_parallel, 3 * t * 4.0);
        ops.push_back(std::move(ce));
    } else {
        // Greedy sampling: per-shard arg-max, then an all-reduce of (value, index) per sequence.
        Operator s = elementwise(x, "sampling", 2 * t * v, logits, t * 4.0,
                                 {use(lid, logits), use(x.act(aslot::tokens), t * 4.0, true)});
        set_sync(x, s, TpSync::after_row_parallel, t * 8.0);
        ops.push_back(std::move(s));
    }
    return ops;
}

std::vector<Operator> head_backward(const ModelSpec& m, std::int64_t microbatch, const PassShape& shape,
                                    const OperatorOptions& opt) {
    const HeadDims hd = head_dims(m, microbatch, shape, opt, true);
    const Dims& x = hd.x;
    const double h = static_cast<double>(x.h);
    const double t = static_cast<double>(hd.tokens), v = static_cast<double>(hd.v_p);
    const double logits = t * v * x.ab;
    const std::uint64_t lid = x.act(aslot::logits);
    std::vector<Operator> ops;
    ops.push_back(elementwise(x, "cross_entropy_bwd", 2 * t * v, logits + t * 4.0, logits,
                              {use(lid, logits), use(flagged(lid, kGrad), logits, true)}));
    const Linear head = lm_head_linear(hd);
    ops.push_back(linear_dgrad(x, head));
    ops.push_back(linear_wgrad(x, head));
    retarget_weight(m, ops[ops.size() - 2]);
    retarget_weight(m, ops.back());
    const double ns = hd.norm_tokens * h * x.ab;
    ops.push_back(elementwise(
        x, "final_norm_bwd", 2 * x.norm_flops() * hd.norm_tokens * h, 2 * ns + x.norm_w, ns,
        {use(flagged(x.act(aslot::final_norm), kGrad), ns), use(x.act(aslot::resid, m.layers), ns),
         use(x.weight(wslot::final_norm), x.norm_w), use(flagged(x.act(aslot::resid, m.layers), kGrad), ns, true)}));
    return ops;
}

TrainingStateBytes training_state_bytes_per_param(const OperatorOptions& opt) {
    TrainingStateBytes s;
    s.weights = hw::bytes_per_element(opt.precision.weights);
    s.gradients = grad_bytes(opt.precision);
    const bool fp32_weights = opt.precision.weights == DType::fp32 || opt.precision.weights == DType::tf32;
    s.optimizer = 8.0 + (fp32_weights ? 0.0 : 4.0);
    return s;
}

Operator optimizer_step(double params, const OperatorOptions& opt) {
    const TrainingStateBytes s = training_state_bytes_per_param(opt);
    const bool master = s.optimizer > 8.0;
    // Reads the gradient, the FP32 state (master, m, v) and, without a master
    // copy, the weights; writes the state and the working-precision weights.
    return make_op("adam_step", KernelKind::elementwise, DType::fp32, kAdamFlops * params,
                   params * (s.gradients + s.optimizer + (master ? 0.0 : s.weights)),
                   params * (s.optimizer + s.weights), {});
}

double total_flops(const std::vector<Operator>& ops) {
    double f = 0;
    for (const auto& op : ops) f += op.kernel.flops.value;
    return f;
}

double training_hardware_flops_per_token(const ModelSpec& m, std::int64_t seq_len, const OperatorOptions& opt,
                                         Recompute recompute) {
    const PassShape shape{1, seq_len, seq_len};
    OperatorOptions o = opt;
    o.inference = false;
    o.tp = 1;  // the whole model's FLOPs: no shard replicates or splits anything
    o.cp = 1;
    o.sequence_parallel = false;
    const double layer =
        total_flops(layer_forward(m, 0, 0, shape, o)) + total_flops(layer_backward(m, 0, 0, shape, o, recompute));
    const double ends = total_flops(embedding_forward(m, 0, shape, o)) +
                        total_flops(embedding_backward(m, 0, shape, o)) +
                        total_flops(head_forward(m, 0, shape, o, true)) + total_flops(head_backward(m, 0, shape, o));
    return (static_cast<double>(m.layers) * layer + ends) / static_cast<double>(seq_len);
}

}  // namespace sim::workload
