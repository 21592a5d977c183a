// Inside the workload layer: what the operator builders share. The FLOP
// conventions of the elementwise kernels, tensor ids and their slots, the
// dimensions of one pass on one shard (Dims), the constructors of kernels
// and of a weight GEMM with its two backward GEMMs (Linear) by tensor-
// parallel layout, and the attention core (attention_ops.cpp). operators.cpp builds the layers on
// these; nothing outside sim/workload includes this header (but its unit
// tests, tests/workload/test_op_builders.cpp).
#pragma once

#include "sim/core/error.h"
#include "sim/workload/operators.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sim::workload::ops {

using hw::DType;
using hw::KernelKind;
using hw::TensorUse;

// FLOPs per element of the elementwise kernels (a convention: these kernels
// are memory-bound, their FLOPs only feed the HFU count). Backward kernels
// count twice their forward.
inline constexpr double kLayerNormFlops = 8;  // mean, variance, normalise, scale, shift
inline constexpr double kRmsNormFlops = 4;    // square-sum, rsqrt scale, weight
inline constexpr double kGeluFlops = 8;       // tanh approximation
inline constexpr double kSiluFlops = 4;       // x * sigmoid(x)
inline constexpr double kSoftmaxFlops = 5;    // max, subtract, exp, sum, divide
inline constexpr double kAdamFlops = 12;      // moments, bias correction, update
// Flash attention backward / forward FLOPs: the backward runs five matmuls
// (S = QK^T again, dV, dP, dQ, dK) against the forward's two (Dao 2023,
// FlashAttention-2; the benchmark script of the flash-attn repository counts
// backward = 2.5 x forward).
inline constexpr double kFlashBackwardFactor = 2.5;

inline constexpr double kDropoutFlops = 2;  // dropout: random draw compare + scale, per element

// ---- tensor ids -------------------------------------------------------------
// kind (2 bits) | layer + 2 (20 bits) | which (16 bits) | micro-batch (26 bits)
inline constexpr int kMbBits = 26;
inline constexpr int kWhichBits = 16;
inline constexpr int kLayerBits = 20;
enum class IdKind : std::uint64_t { weight = 1, activation = 2, kv = 3 };
// Flags inside `which`.
inline constexpr int kPartial = 1 << 13;   // the partial sum a row-parallel kernel writes before its TP reduction
inline constexpr int kGathered = 1 << 14;  // the all-gathered copy of a sequence-parallel tensor
inline constexpr int kGrad = 1 << 15;      // the gradient of a tensor (or of a weight)

inline std::uint64_t encode(IdKind kind, std::int64_t layer, int which, std::int64_t mb) {
    check(layer >= -2 && layer + 2 < (std::int64_t{1} << kLayerBits), "tensor id: layer index out of range");
    check(which >= 0 && which < (1 << kWhichBits), "tensor id: slot out of range");
    check(mb >= 0 && mb < (std::int64_t{1} << kMbBits), "tensor id: micro-batch index out of range");
    return (static_cast<std::uint64_t>(kind) << 62) |
           (static_cast<std::uint64_t>(layer + 2) << (kMbBits + kWhichBits)) |
           (static_cast<std::uint64_t>(which) << kMbBits) | static_cast<std::uint64_t>(mb);
}

inline std::uint64_t flagged(std::uint64_t id, int flag) { return id | (static_cast<std::uint64_t>(flag) << kMbBits); }

static_assert(kMaxLayers + 2 < (std::int64_t{1} << kLayerBits), "every layer index (and embedding, head) fits an id");

// Weight slots.
namespace wslot {
inline constexpr int qkv = 0, out = 1, mlp_up = 2, mlp_down = 3, norm1 = 4, norm2 = 5, router = 6;
// Multi-head latent attention (mla_ops.cpp): q down/up (or one q projection
// in `qkv`), kv down/up, and the RMSNorms of the two latents.
// The absorbed decode path reads kv_up's two halves apart: W_UK under kv_up,
// W_UV under w_uv.
inline constexpr int q_down = 7, q_up = 8, kv_down = 9, kv_up = 10, q_norm = 11, kv_norm = 12, w_uv = 13;
// Multi-token prediction (mtp_ops.cpp): the 2h -> h projection, and enorm and
// hnorm (one slot: h weights each).
inline constexpr int mtp_eh = 14, mtp_norms = 15;
inline constexpr int expert = 16;                  // expert e: up 16 + 2e, down 17 + 2e
inline constexpr int table = 0, position = 1;      // kEmbeddingLayer
inline constexpr int lm_head = 0, final_norm = 1;  // kHeadLayer
}  // namespace wslot
static_assert(wslot::expert + 2 * kMaxExperts <= kPartial, "every expert's weight slots sit below the flag bits");

// Activation slots.
namespace aslot {
inline constexpr int resid = 0, norm1 = 1, q = 2, kv = 3, k = 4, v = 5, kv_new = 6, scores = 7, probs = 8, attn = 9,
                     lse = 10, out_proj = 11, resid_mid = 12, norm2 = 13, gate = 14, up = 15, silu = 16, act = 17,
                     down = 18, router = 19, topk = 20, combine = 21, norm_grad = 22;
inline constexpr int kv_recv = 23;  // context parallelism: the two receive buffers of the K/V ring (23, 24)
inline constexpr int probs_dropped = 25, probs_mask = 26;      // attention dropout (unfused attention)
inline constexpr int attn_drop_mask = 27, mlp_drop_mask = 28;  // hidden dropout masks of the two residual branches
// MLA: the q and kv latents before and after their norms; the absorbed
// decode path's latent query (q_nope W_UK with q_rope) and latent output.
// mla_dx: the kv path's share of the norm's output gradient, added to the q path's.
inline constexpr int q_latent = 29, q_latent_norm = 30, kv_latent = 31, kv_latent_norm = 32, q_absorbed = 33,
                     o_latent = 34, mla_dx = 35;
// Multi-token prediction: the concatenated [enorm, hnorm] outputs and the projection's output columns.
inline constexpr int mtp_cat = 36, mtp_eh = 37;
// The router in FP32 (MoeRouting::router_fp32): the FP32 copies of its input and of its weight.
inline constexpr int router_in32 = 38, router_w32 = 39;
inline constexpr int final_norm = 1, logits = 2, loss = 3, tokens = 4;  // kHeadLayer
inline constexpr int expert = 64;  // expert e: 64 + 8e + {0 in, 1 gate, 2 up, 3 silu, 4 act, 5 out}
}  // namespace aslot
static_assert(aslot::expert + 8 * (kMaxExperts + 1) <= kPartial,
              "every expert's activation slots, and the shared experts' after them, sit below the flag bits");

// ---- shapes of one pass -----------------------------------------------------

struct Dims {
    const ModelSpec* m = nullptr;
    const OperatorOptions* o = nullptr;
    PassShape s;
    std::int64_t layer = 0, mb = 0;
    std::int64_t cp = 1;  // context-parallel degree: T holds 1/cp of each sequence
    std::int64_t p = 1, a_p = 0, g_p = 0, d = 0, h = 0, f_p = 0, fup_p = 0, T = 0;
    // The attention core, per head: query/key width dq, value width dv,
    // K and V elements cached or stored per token and KV head (kv_row: 2d,
    // or dq + dv, or MLA's latent whose value is a slice of its key); the
    // value width entering the output projection (dout). All d but under MLA.
    std::int64_t dq = 0, dv = 0, kv_row = 0, dout = 0;
    // The tensors the core reads and writes (an MLA absorbed pass uses its latent ones).
    int q_slot = aslot::q, o_slot = aslot::attn;
    bool kv_from_cache = false;  // the core reads K and V from the KV cache (kv_tensor_id)
    const MlaAttention* mla = nullptr;
    bool absorbed = false;  // MLA over the latent cache with W_UK and W_UV absorbed (decode)
    bool parallel = false;  // the parallel block (one norm read by both branches)
    double Ts = 0;          // tokens a norm / residual kernel handles (T / tp under sequence parallel)
    double ab = 2;          // activation (and activation-gradient) bytes per element
    double in_b = 2;        // bytes per element of a GEMM's activation operands (FP8/INT8 when the math is)
    double wb = 2;          // weight bytes per element
    double kb = 2;          // K/V bytes per element (KV cache dtype in inference, activations in training)
    double gb = 2;          // weight-gradient bytes per element
    DType gemm_dt = DType::bf16, act_dt = DType::bf16, attn_dt = DType::bf16;
    bool sp = false;  // sequence parallel with tp > 1
    bool kv_mode = false;
    bool swiglu = false;
    Biases bias;
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

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
// The attention core's shape for the layer's attention kind (Dims::dq ...).
void set_attention_core(Dims& x);
// Bytes per element of weight gradients (16-bit at least).
double grad_bytes(const Precision& p);
// The shapes of one pass of `s` through layer `layer` on one shard; ModelError when they cannot be formed.
Dims make_dims(const ModelSpec& m, std::int64_t layer, std::int64_t mb, const PassShape& s, const OperatorOptions& o);

// Gathered (sequence-parallel) read of a norm output, or the plain one.
inline std::uint64_t gathered_if_sp(const Dims& x, std::uint64_t id) { return x.sp ? flagged(id, kGathered) : id; }
inline std::uint64_t partial_if_tp(const Dims& x, std::uint64_t id) { return x.p > 1 ? flagged(id, kPartial) : id; }

inline double full_act(const Dims& x) { return static_cast<double>(x.T * x.h) * x.ab; }
inline double shard_act(const Dims& x) { return x.Ts * static_cast<double>(x.h) * x.ab; }

// ---- operator builders (op_builders.cpp) ----------------------------------------
TensorUse use(std::uint64_t id, double bytes, bool write = false);
Operator make_op(std::string name, KernelKind kind, DType dt, double flops, double read, double written,
                 std::vector<TensorUse> tensors);
Operator elementwise(const Dims& x, std::string name, double flops, double read, double written,
                     std::vector<TensorUse> tensors);
// `op` at `share` of the GPU's streaming rate (hw::KernelDesc::hbm_share): a
// norm or activation kernel of a stack whose implementation of it streams
// slower (OperatorOptions::memory_bound).
Operator at_share(Operator op, double share);
Operator gemm(std::string name, DType dt, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
              double read, double written, std::vector<TensorUse> tensors);
void set_sync(const Dims& x, Operator& op, TpSync sync, double bytes);
// Data-parallel attention's gathered layout (docs/moe.md section 8b): the
// shapes of `x` once the `ranks` DP ranks' tokens are gathered (their
// sequences side by side, every rank padded to this one's, SGLang's MAX_LEN
// under the symmetric plan) and the layer runs tensor-parallel over all
// x.p x ranks GPUs of the engine, without sequence parallelism.
Dims dp_gathered_dims(const Dims& x, int ranks);
// The collectives over the engine around ops[first..] run on `g`'s gathered
// tokens: their own TP collectives removed, a gather before the first and a
// scatter after the last, each of the gathered buffer's full size. A pass
// that extends sequences (new_tokens > 1) pads to the sum (SUM_LEN) and
// all-reduces both ways; a decode step all-gathers and reduce-scatters.
void set_engine_syncs(const Dims& g, std::vector<Operator>& ops, std::size_t first);
// Inference FP8 input quantization (docs/moe.md section 7b): a kernel that
// reads `rows` x `width` activations of type `act` and writes them in FP8
// with one FP32 scale per `group` elements of a row (vLLM's
// per_token_group_quant_fp8): read rows x width x act bytes, written
// rows x width + rows x ceil(width / group) x 4.
inline constexpr double kQuantFlops = 3;       // absolute value, group maximum, scale and round
inline constexpr double kQuantScaleBytes = 4;  // one FP32 scale per group
Operator fp8_group_quant(std::string name, DType act, double rows, std::int64_t width, std::int64_t group);

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

// ---- linears by tensor-parallel layout (op_builders.cpp) ----------------------
// A layer's projections are calls to these: each takes the GEMM (tokens x in
// -> out on this shard, weight slot `weight`), the activation it reads and
// the ones it writes (id and bytes; the gradient of each is its id flagged
// kGrad), and fills the tensors of the three GEMMs and the TP collectives of
// its Megatron layout (docs/workload-model.md section 7). Callers
// change only what is particular to them (biases, where a gradient goes).

// No TP collective of its own: a routed or shared expert (its collectives
// come with the dispatch and combine) or a projection from a latent that
// every rank holds whole. Reads `input`, writes `outputs`; the backward
// reads the outputs' gradients and writes the input's.
Linear plain_linear(std::string name, int weight, std::int64_t tokens, std::int64_t in, std::int64_t out,
                    const TensorUse& input, const std::vector<TensorUse>& outputs);
// A weight replicated on every TP rank (the router, MLA's down projections)
// that reads the norm output `input` whole: gathered over TP under sequence
// parallelism; its input gradient is whole too (no reduction). Which reader
// runs the all-gather is the caller's choice (fwd_sync or wgrad_sync, with
// sync_bytes), so that one gather serves the readers after it.
Linear replicated_linear(const Dims& x, std::string name, int weight, std::int64_t tokens, std::int64_t in,
                         std::int64_t out, const TensorUse& input, const std::vector<TensorUse>& outputs);
// Megatron's ColumnParallelLinear: the whole input (all-gathered over TP
// under sequence parallelism before the forward and again before the weight
// gradient), this rank's columns of the outputs; the input gradient is a
// partial sum, all-reduced over TP (reduce-scattered under SP).
Linear column_parallel_linear(const Dims& x, std::string name, int weight, std::int64_t tokens, std::int64_t in,
                              std::int64_t out, const TensorUse& input, const std::vector<TensorUse>& outputs);
// Megatron's RowParallelLinear: this rank's columns of the input (a
// column-parallel output), a partial sum of the whole `output`, all-reduced
// over TP (reduce-scattered under SP). Its output gradient is the residual
// stream's (`residual`, flagged kGrad here; all-gathered under SP), of the
// output's size.
Linear row_parallel_linear(const Dims& x, std::string name, int weight, std::int64_t tokens, std::int64_t in,
                           std::int64_t out, const TensorUse& input, const TensorUse& output, std::uint64_t residual);

double weight_bytes(const Dims& x, const Linear& l);
Operator linear_forward(const Dims& x, const Linear& l);
// dX[tokens, in] = dY[tokens, out] W^T
Operator linear_dgrad(const Dims& x, const Linear& l);
// dW[in, out] += X^T dY (accumulated across micro-batches, hence read and written).
Operator linear_wgrad(const Dims& x, const Linear& l);
std::vector<TensorUse> grads_of(const std::vector<TensorUse>& uses, bool write);

// ---- MLPs (operators.cpp) and the MoE block (moe_ops.cpp) --------------------------

// The MLP of one expert (or the dense MLP): ids of its tensors.
struct MlpIds {
    std::string prefix;  // "mlp", "expert" or "shared_expert"
    int w_up = 0, w_down = 0;
    std::int64_t tokens = 0;
    // Activation ids. The dense MLP's `in` (the norm output) and `out` (the
    // reduced down projection) are the plain ids: its column- and
    // row-parallel linears flag the gathered and partial copies.
    std::uint64_t in = 0, gate = 0, up = 0, silu = 0, act = 0, out = 0;
    bool dense = true;  // dense MLP: TP syncs around it; experts sync after the combine
};
// Local expert e with `tokens` tokens; the shared experts in slot `slot`, on every token.
MlpIds expert_mlp_ids(const Dims& x, std::int64_t e, std::int64_t tokens);
MlpIds shared_mlp_ids(const Dims& x, std::int64_t slot);
void mlp_forward(const Dims& x, const MlpIds& ids, std::vector<Operator>& ops);
void mlp_backward(const Dims& x, const MlpIds& ids, std::vector<Operator>& ops);
void moe_forward(const Dims& x, std::vector<Operator>& ops);
void moe_backward(const Dims& x, std::vector<Operator>& ops);

// ---- the attention core (attention_ops.cpp) ---------------------------------------
struct AttentionTensors {
    TensorUse q, o, lse;
    std::vector<TensorUse> k, v, kv;  // naive reads K and V separately, flash both at once
};

double q_bytes(const Dims& x);
// The core's output (and the output projection's input): heads x dout.
double o_bytes(const Dims& x);
// Bytes of the K part of kv_bytes (the rest is V; under MLA's absorbed path
// V is a slice of K and reads nothing more).
double k_bytes(const Dims& x);
// K and V of the whole context for the micro-batch, per shard (under context
// parallelism: of the 1/cp of the context this rank holds, one ring chunk).
double kv_bytes(const Dims& x);
AttentionTensors attention_tensors(const Dims& x);
// 4 * b * heads * pairs * head_dim (see attention_ops.cpp).
double flash_forward_flops(const Dims& x, bool causal);
// HBM bytes of Transformer Engine's merge passes around a layer's ring steps
// (context parallelism), per rank on average over the cp ranks, from the
// rank's Q, O and K+V bytes (docs/parallelism.md, "Context parallelism").
struct CpMergeBytes {
    double read = 0, written = 0;
    double flops_per_byte = 0.25;  // exp, multiply, add on 16-bit elements: a memory-bound pass
};
CpMergeBytes cp_merge_forward_bytes(double q, double o, double kv, std::int64_t cp);
CpMergeBytes cp_merge_backward_bytes(double q, double o, double kv, std::int64_t cp);
// Flash, ring (cp > 1) or naive attention, with attention dropout.
void attention_forward(const Dims& x, std::vector<Operator>& ops);
void attention_backward(const Dims& x, std::vector<Operator>& ops);

// ---- attention blocks by kind: the projections around the core, the core,
// up to the output projection (gqa_ops.cpp, mla_ops.cpp) ----------------------
// Forward: from the norm's output to the tensor the output projection reads.
void gqa_block_forward(const Dims& x, std::vector<Operator>& ops);
void mla_block_forward(const Dims& x, std::vector<Operator>& ops);
// Backward: from the output projection's input gradient to the norm's
// (partial) input gradient; `recompute` selective recomputes the core first.
void gqa_block_backward(const Dims& x, std::vector<Operator>& ops, Recompute recompute);
void mla_block_backward(const Dims& x, std::vector<Operator>& ops, Recompute recompute);
// The selective recompute of the core, named recompute_*.
void recompute_attention_core(const Dims& x, std::vector<Operator>& ops);

}  // namespace sim::workload::ops
