// Memory closed forms per GPU: weights, activations stored for backward
// (Korthikanti et al. 2022), KV cache, workspace. See docs/workload-model.md.
#include <algorithm>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/workload/footprint.h"

namespace sim::workload {

namespace {

double as_d(std::int64_t v) { return static_cast<double>(v); }

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The rounding rule of every footprint below (docs/workload-model.md,
// "Whole bytes"): each closed form adds its tensors' sizes exactly, at
// bytes_per_element (for block-scaled formats, the payload bits and the
// block scale's share), and rounds the sum up to a whole byte once. A size
// is never shortened. Model sizes are bounded one by one, not in product: a
// footprint past 2^64 bytes is the input's doing (ModelError, exit 2), not a
// wrapped count.
Bytes whole_bytes(double exact) {
    if (exact >= 18446744073709551616.0)
        throw ModelError(fmt::format("a memory footprint of {:.3g} bytes per GPU does not fit 2^64 bytes", exact));
    return Bytes::ceil(exact);
}

double norm_params(const ModelSpec& m) { return as_d(m.norm == NormKind::layernorm ? 2 * m.hidden : m.hidden); }

std::int64_t ffn_per_shard(const ModelSpec& m, int tp) { return ceil_div(m.ffn, tp); }

std::int64_t ffn_up_per_shard(const ModelSpec& m, int tp) {
    return (m.ffn_kind == FfnKind::swiglu ? 2 : 1) * ffn_per_shard(m, tp);
}

// Elements per token of one MLP's up (+ gate) and down inputs, `ffn` wide,
// on one TP shard.
double mlp_inputs_per_shard(const ModelSpec& m, std::int64_t ffn, int tp) {
    return as_d((m.ffn_kind == FfnKind::swiglu ? 3 : 2) * ceil_div(ffn, tp));
}

// The tokens the hot EP rank's experts compute in `layer` when each of the
// ep ranks routes `tokens`: its own load under a per-layer histogram (the
// pooled one for a layer without rows); for kAnyMoeLayer, a leading dense
// layer, or loads that do not differ by layer, the worst MoE layer's.
std::int64_t hot_tokens(const ModelSpec& m, const OperatorOptions& opt, std::int64_t tokens, std::int64_t layer) {
    if (layer != kAnyMoeLayer && m.is_moe_layer(layer) && loads_differ_by_layer(opt.moe))
        return expert_load(m.experts, m.top_k, opt.ep, tokens, opt.moe, layer).hot_tokens;
    return worst_hot_tokens(m.experts, m.top_k, opt.ep, tokens, opt.moe, m.first_dense_layers, m.layers + m.mtp_layers);
}

// One GPU of an MoE layer whose ranks route their own tokens
// (OperatorOptions::routes_own_shard; docs/moe.md sections 1a, 3l and 5):
// the rows its local experts compute (`layer`'s load, as hot_tokens), the
// same under both Megatron-Core dispatchers: the rows the allgather
// dispatcher selects out of the N it gathered over the etp x ep ranks of its
// tp_ep group, or the rows the alltoall dispatcher holds after its
// expert-TP all-gather (the hot EP rank's G, moe_ops.cpp moe_shape).
struct OwnShardRows {
    double gathered = 0;       // allgather: N = etp x ep x T_r (T_r: T / tp under sequence parallelism, else T)
    double held = 0;           // L (G): the hot EP rank's local experts' rows, c copies of each token
    double local_experts = 0;  // E / ep
    bool gathers = false;      // allgather: etp x ep > 1, the all-gather runs (into the global buffer)
};

OwnShardRows own_shard_rows(const ModelSpec& m, const OperatorOptions& opt, std::int64_t tokens, std::int64_t layer) {
    const bool sp = opt.sequence_parallel && opt.tp > 1;
    const std::int64_t routed = sp ? ceil_div(tokens, opt.tp) : tokens;
    const std::int64_t etp = opt.expert_tp(), ep = std::max(1, opt.ep);
    const std::int64_t copies = sp ? 1 : etp;  // without SP the etp peers route the same tokens
    OwnShardRows r;
    r.gathered = as_d(etp * ep) * as_d(routed);
    r.held = as_d(copies) * as_d(hot_tokens(m, opt, (etp / copies) * routed, layer));
    r.local_experts = as_d(m.experts / ep);
    r.gathers = etp * ep > 1;
    return r;
}

}  // namespace

namespace {
// One MLP of intermediate size `ffn` on one TP shard, with its biases.
double mlp_params_per_shard(const ModelSpec& m, std::int64_t ffn, int tp) {
    const double h = as_d(m.hidden);
    const double f_p = as_d(ceil_div(ffn, tp)), fup_p = (m.ffn_kind == FfnKind::swiglu ? 2 : 1) * f_p;
    return h * fup_p + f_p * h + (m.bias.mlp ? fup_p + h : 0.0);
}
}  // namespace

double layer_params_per_shard(const ModelSpec& m, const OperatorOptions& opt, std::int64_t layer) {
    const double a_p = as_d(heads_per_shard(m, opt.tp)), g_p = as_d(kv_heads_per_shard(m, opt.tp));
    const double d = as_d(m.head_dim), h = as_d(m.hidden);
    const double biases = (m.bias.qkv ? (a_p + 2 * g_p) * d : 0.0) + (m.bias.out ? h : 0.0);
    double attn = h * (a_p + 2 * g_p) * d + a_p * d * h + biases + (m.qk_norm() ? 2 * d : 0.0);
    if (const auto* mla = m.mla()) {
        // MLA (model.cpp, mla_params): the down projections and their norms
        // replicated on every TP rank, the up and output projections split by head.
        const auto& x = *mla;
        const double q_lora = as_d(x.q_lora_rank), kv_lora = as_d(x.kv_lora_rank);
        const double qk = as_d(x.qk_nope_head_dim + x.qk_rope_head_dim);
        const double q = x.q_lora_rank > 0 ? h * q_lora + q_lora + q_lora * a_p * qk : h * a_p * qk;
        attn = q + h * (kv_lora + as_d(x.qk_rope_head_dim)) + kv_lora +
               kv_lora * a_p * as_d(x.qk_nope_head_dim + x.v_head_dim) + a_p * as_d(x.v_head_dim) * h;
    }
    const double norms = as_d(m.norms_per_layer()) * norm_params(m);
    if (m.experts > 0 && m.is_moe_layer(layer)) {
        // Shared experts run on every token like a dense MLP: they stay with
        // the dense part, split over TP, or whole (docs/moe.md section 8b).
        const int shared_tp = opt.shared_experts_whole ? 1 : opt.tp;
        const double shared = as_d(m.shared_experts) * mlp_params_per_shard(m, m.expert_ffn(), shared_tp);
        return attn + norms + layer_expert_params_per_shard(m, opt, layer) + h * as_d(m.experts) + shared;
    }
    // Under data-parallel attention's gathered layout the dense MLP is split
    // over the engine's tp x dp GPUs (docs/moe.md section 8b).
    return attn + norms + mlp_params_per_shard(m, m.ffn, opt.tp * std::max(1, opt.dp_dense_gather));
}

double layer_expert_params_per_shard(const ModelSpec& m, const OperatorOptions& opt, std::int64_t layer) {
    if (m.experts <= 0 || !m.is_moe_layer(layer)) return 0.0;
    // ep divides experts (checked by the strategy).
    return as_d(m.experts / std::max(1, opt.ep)) * mlp_params_per_shard(m, m.expert_ffn(), opt.expert_tp());
}

Bytes layer_weight_bytes(const ModelSpec& m, const OperatorOptions& opt, std::int64_t layer) {
    return whole_bytes(layer_params_per_shard(m, opt, layer) * hw::bytes_per_element(opt.precision.weights));
}

Bytes embedding_weight_bytes(const ModelSpec& m, const OperatorOptions& opt) {
    const double h = as_d(m.hidden);
    const double table = as_d(ceil_div(m.vocab, opt.tp)) * h;
    const double pos = m.position == PositionKind::learned ? as_d(m.max_seq) * h : 0.0;
    return whole_bytes((table + pos) * hw::bytes_per_element(opt.precision.weights));
}

Bytes head_weight_bytes(const ModelSpec& m, const OperatorOptions& opt) {
    const int shards = opt.tp * std::max(1, opt.dp_head_gather);  // the engine's GPUs when gathered (section 8b)
    const double matrix = m.tied_embeddings ? 0.0 : as_d(ceil_div(m.vocab, shards)) * as_d(m.hidden);
    return whole_bytes((matrix + norm_params(m)) * hw::bytes_per_element(opt.precision.weights));
}

Bytes mtp_module_weight_bytes(const ModelSpec& m, const OperatorOptions& opt) {
    const double h = as_d(m.hidden);
    const double module = 2.0 * h * as_d(ceil_div(m.hidden, opt.tp)) + 3.0 * norm_params(m);  // eh_proj, 3 norms
    return whole_bytes(as_d(m.mtp_layers) * module * hw::bytes_per_element(opt.precision.weights));
}

Bytes layer_kv_bytes(const ModelSpec& m, std::int64_t batch, std::int64_t context, const OperatorOptions& opt) {
    // MLA caches the compressed latent and the shared rope key per token,
    // the same on every TP rank (DeepSeek-V2 section 2.1.2).
    if (const auto* x = m.mla())
        return whole_bytes(as_d(batch) * as_d(context) * as_d(x->cache_width()) *
                           hw::bytes_per_element(opt.precision.kv));
    return whole_bytes(2.0 * as_d(batch) * as_d(context) * as_d(kv_heads_per_shard(m, opt.tp)) * as_d(m.head_dim) *
                       hw::bytes_per_element(opt.precision.kv));
}

Bytes boundary_activation_bytes(const ModelSpec& m, const PassShape& shape, const OperatorOptions& opt) {
    const double ab = hw::bytes_per_element(activation_dtype(opt.precision));
    const double sp = opt.sequence_parallel && opt.tp > 1 ? as_d(opt.tp) : 1.0;
    return whole_bytes(as_d(shape.batch) * as_d(shape.new_tokens) * as_d(m.hidden) * ab / sp / as_d(opt.cp));
}

// Korthikanti et al. 2022 (Reducing Activation Recomputation in Large
// Transformer Models), Section 4, generalised from (16-bit, a*d = h, MHA,
// 2-matrix MLP with ffn = 4h) to any activation size, GQA, head_dim and
// SwiGLU. Per token, in bytes, with ab the activation size (2 in the paper)
// and 1-byte dropout masks:
//   replicated unless SP:  2 norm inputs 2*ab*h, QKV input ab*h, MLP input ab*h, 2 dropout masks 2*h
//   split by TP:           Q,K ab*(a+g)*d, V ab*g*d, out-proj input ab*a*d,
//                          activation input ab*f_up, down-proj input ab*f
//   attention scores:      (2*ab + 1)*a*context (softmax output, dropout mask and output)
// For the paper's shapes this is s*b*h*(34 + 5*a*s/h) (t = 1), and
// s*b*h*(10 + 24/t + 5*a*s/(h*t)) with TP t, all / t with SP.
Bytes layer_activation_bytes(const ModelSpec& m, const PassShape& shape, const OperatorOptions& opt,
                             Recompute recompute, std::int64_t layer) {
    const double ab = hw::bytes_per_element(activation_dtype(opt.precision));
    const double tokens = as_d(shape.batch) * as_d(shape.new_tokens) / as_d(opt.cp);  // 1/cp of each sequence
    const double h = as_d(m.hidden), d = as_d(m.head_dim);
    const double sp = opt.sequence_parallel && opt.tp > 1 ? as_d(opt.tp) : 1.0;
    if (recompute == Recompute::full) {
        double kept = 0;  // the layer input only, unless the exchange is kept (docs/moe.md 3c)
        if (m.experts > 0 && opt.ep > 1 && !opt.moe.recompute_exchange) {
            const auto t = std::max<std::int64_t>(1, shape.batch * shape.new_tokens / opt.cp);
            const double to_experts = opt.fp8_dispatch ? kFp8DispatchBytesPerElement : ab;
            kept = as_d(hot_tokens(m, opt, t, layer)) * h * to_experts + tokens * ab * h;
        }
        return whole_bytes(tokens * ab * h / sp + kept);
    }
    const double a_p = as_d(heads_per_shard(m, opt.tp)), g_p = as_d(kv_heads_per_shard(m, opt.tp));
    // MoE: each token's MLP tensors once per chosen expert; under expert
    // parallelism, the tokens the straggler rank's experts receive; with
    // loads by layer (a per-layer histogram) `layer`'s own (hot_tokens;
    // docs/moe.md section 5).
    double k = m.experts > 0 ? as_d(m.top_k) : 1.0;
    // Megatron-Core's allgather dispatcher (docs/moe.md section 5): the
    // routed experts' tensors are those of the L rows the GPU selected out of
    // the N it gathered, whole rows on every GPU of the tp_ep group (not 1 /
    // tp of them under sequence parallelism) and each expert's 3 f_e / etp
    // inputs; and the local slices of the gathered routing map (bool) and
    // gate weights, which the selection of the gate weights keeps for its
    // backward (masked_select saves its input and mask). The gathered tokens
    // and the output before the reduce-scatter are not kept (workspace).
    // The alltoall dispatcher (and any other run whose ranks route their own
    // tokens, routes_own_shard) keeps the same rows' tensors: after the
    // exchange and, etp > 1, the expert-TP all-gather each GPU holds the hot
    // EP rank's G rows whole (etp x T_r x k balanced, etp times the 1 / tp of
    // the k copies counted otherwise), which the first expert GEMM saves with
    // the experts' intermediates (3 f_e / etp under SwiGLU); the received
    // copy before the gather and the sorted one feed autograd functions that
    // save no tensor (gather_from_sequence_parallel_region, sort_chunks_by_idxs).
    double routed_saved = 0;
    if (m.experts > 0 && opt.routes_own_shard()) {
        const auto own =
            own_shard_rows(m, opt, std::max<std::int64_t>(1, shape.batch * shape.new_tokens / opt.cp), layer);
        routed_saved = own.held * (h + mlp_inputs_per_shard(m, m.expert_ffn(), opt.expert_tp())) * ab;
        if (opt.moe_allgather) routed_saved += own.gathered * own.local_experts * (1.0 + ab);
        k = 0;  // the per-token k copies below are replaced by these
    } else if (m.experts > 0 && opt.ep > 1) {
        const auto t = std::max<std::int64_t>(1, shape.batch * shape.new_tokens / opt.cp);
        k = as_d(hot_tokens(m, opt, t, layer)) / as_d(t);
    }
    // The parallel block stores one norm input and one norm output, which
    // both branches read.
    const double replicated =
        m.block == BlockLayout::parallel ? ab * h + ab * h + 2 * h : 2 * ab * h + ab * h + k * ab * h + 2 * h;
    // An MoE layer's MLP tensors are its experts' (moe.ffn, each of the k
    // copies) and its shared experts' (once), not the dense `ffn` (fixed:
    // Qwen3 and DeepSeek-V3 counted k x their dense ffn, 8x to 9x too much).
    double mlp = k * ab * as_d(ffn_up_per_shard(m, opt.tp) + ffn_per_shard(m, opt.tp));
    if (m.experts > 0 && (m.expert_ffn() != m.ffn || m.shared_experts > 0))
        mlp = k * ab * mlp_inputs_per_shard(m, m.expert_ffn(), opt.tp) +
              ab * mlp_inputs_per_shard(m, m.shared_experts * m.expert_ffn(), opt.tp);
    double split = ab * (a_p + g_p) * d + ab * g_p * d + ab * a_p * d + mlp;
    double latents = 0;
    if (const auto* x = m.mla()) {
        // MLA (mla_ops.cpp): the q latent before and after its norm, the kv
        // latent (+ rope key) and its normed latent, replicated over TP;
        // per head Q and K of qk_nope + qk_rope, V and the output of v_head_dim.
        const double dq = as_d(x->qk_head_dim()), dv = as_d(x->v_head_dim);
        latents = ab * (2 * as_d(x->q_lora_rank) + as_d(x->cache_width()) + as_d(x->kv_lora_rank));
        split = ab * a_p * (2 * dq + 2 * dv) + mlp;
        // mla_up_proj recompute keeps only the core's output of Q, K, V, O.
        if (recompute == Recompute::selective && opt.recompute_modules.mla_up_proj) split = ab * a_p * dv + mlp;
    }
    // The router's logits, FP32 under MoeRouting::router_fp32; and then the
    // FP32 copies of its input (the tokens it routes: a rank's own shard, or
    // the gathered T) and of its weight, which the GEMM saves for its
    // backward (docs/moe.md section 3i).
    const bool fp32_router = m.experts > 0 && opt.moe.router_fp32;
    const double router = m.experts > 0 ? (fp32_router ? 4.0 : ab) * as_d(m.experts) : 0.0;
    double router_copies = 0;
    if (fp32_router) {
        const auto t = std::max<std::int64_t>(1, shape.batch * shape.new_tokens / opt.cp);
        const bool own_sp = opt.routes_own_shard() && sp > 1.0;
        router_copies = (as_d(own_sp ? ceil_div(t, opt.tp) : t) + as_d(m.experts)) * h * 4.0;
    }
    const bool scores_stored = !opt.flash_attention && recompute == Recompute::none;
    const double scores = scores_stored ? (2 * ab + 1) * a_p * as_d(shape.context) : 0.0;
    return whole_bytes(tokens * ((replicated + router) / sp + split + scores + latents) + routed_saved + router_copies);
}

Bytes workspace_bytes(const ModelSpec& m, const PassShape& shape, const OperatorOptions& opt, bool training) {
    constexpr double kLibraryWorkspace = 32.0 * 1024 * 1024;  // cuBLAS(Lt) workspace
    const double ab = hw::bytes_per_element(activation_dtype(opt.precision));
    const double v_p = as_d(ceil_div(m.vocab, opt.tp));
    const double tokens = as_d(shape.batch) * as_d(shape.new_tokens) / as_d(opt.cp);
    const double head_tokens = training ? tokens : as_d(shape.batch);
    double transient = head_tokens * v_p * (ab + (training ? 4.0 : 0.0));  // logits (+ FP32 softmax)
    if (!training) {
        // One layer's live intermediates: residual, QKV output, MLP up output and activation.
        const double a_p = as_d(heads_per_shard(m, opt.tp)), g_p = as_d(kv_heads_per_shard(m, opt.tp));
        // MLA: the queries and the expanded keys and values of a prompt.
        const auto* x = m.mla();
        const double qkv = x ? a_p * as_d(2 * x->qk_head_dim() + x->v_head_dim) : (a_p + 2 * g_p) * as_d(m.head_dim);
        // The MLP's inputs: a dense layer's `ffn`; an MoE layer's experts'
        // (fixed: k x the dense `ffn` overcounted DeepSeek-V3 and Qwen3 8-9x);
        // the larger where a model has both kinds of layer.
        double mlp = mlp_inputs_per_shard(m, m.ffn, opt.tp);
        double chunk_bytes = 0;  // the fused-MoE kernel's buffers, when the stack has them
        if (m.experts > 0) {
            const double k = as_d(m.top_k);
            const double shared = mlp_inputs_per_shard(m, m.shared_experts * m.expert_ffn(), opt.tp);
            double moe = k * mlp_inputs_per_shard(m, m.expert_ffn(), opt.tp) + shared;
            if (opt.fused_moe_chunk_tokens > 0) {
                // Buffers for a chunk of c tokens: each (token, expert) pair's
                // up output (2 f_e / etp under SwiGLU), its activation
                // (f_e / etp) and its down output (hidden), in the
                // activations' dtype (docs/moe.md section 7b).
                const double c = std::min(tokens, as_d(opt.fused_moe_chunk_tokens));
                chunk_bytes = c * ab * k * (mlp_inputs_per_shard(m, m.expert_ffn(), opt.expert_tp()) + as_d(m.hidden));
                moe = shared;
            }
            if (m.first_dense_layers > 0 && mlp * tokens * ab > moe * tokens * ab + chunk_bytes) {
                chunk_bytes = 0;  // a dense layer's MLP is the larger
            } else {
                mlp = moe;
            }
        }
        double layer = tokens * ab * (2 * as_d(m.hidden) + qkv + mlp) + chunk_bytes;
        if (!opt.flash_attention) {
            layer += 2 * as_d(shape.batch) * a_p * as_d(shape.new_tokens) * as_d(shape.context) * ab;  // S and P
        }
        transient = std::max(transient, layer);
        if (x != nullptr && opt.mla_prefill_eager) {
            // vLLM 0.7's MLA prompt (docs/moe.md section 7b): while the output
            // projection's result is all-reduced into a new tensor, the layer
            // still references the residual and the normed input (2 hidden),
            // the q latent before and after its norm, the kv projection's output
            // (latent + rope key), the latent made contiguous and its norm, and
            // per head the queries (qk), kv_up's output (nope + v), the joined
            // keys (qk), the values padded to the query head size (qk) and the
            // attention output cut to v: the projection's output and the
            // all-reduce's are 2 hidden more. The MoE's buffers are freed by then.
            const double dq = as_d(x->qk_head_dim()), dv = as_d(x->v_head_dim);
            const double latents = (x->q_lora_rank > 0 ? 2 * as_d(x->q_lora_rank) : 0.0) + as_d(x->cache_width()) +
                                   2 * as_d(x->kv_lora_rank);
            const double heads = a_p * (3 * dq + as_d(x->qk_nope_head_dim) + 2 * dv);
            transient = std::max(transient, tokens * ab * (4 * as_d(m.hidden) + latents + heads));
        }
    }
    // Megatron-Core's allgather dispatcher (docs/moe.md section 5): the
    // gathered tokens land in its global buffer ("mpu"), allocated once at the
    // largest size asked and reused by every layer, so held beside the
    // transients; its transients are the gathered rows' output before the
    // reduce-scatter (N x h) and, in the backward, their gradient with the
    // gathered gate weights' (N x (h + E)), one layer at a time.
    double held = 0;
    if (m.experts > 0 && opt.moe_allgather) {
        const auto ag = own_shard_rows(m, opt, std::max<std::int64_t>(1, shape.batch * shape.new_tokens / opt.cp),
                                       kAnyMoeLayer);  // the buffer's size: the worst layer's
        const double h = as_d(m.hidden);
        if (ag.gathers) held = ag.gathered * h * ab;
        transient = std::max(transient, ag.gathered * (h + (training ? as_d(m.experts) : 0.0)) * ab);
    }
    return whole_bytes(kLibraryWorkspace + held + transient);
}

Bytes mla_absorbed_weight_bytes(const ModelSpec& m, const OperatorOptions& opt) {
    const auto* x = m.mla();
    if (x == nullptr || !opt.inference || !opt.mla_absorbed_weights) return Bytes{0};
    const double wb = hw::bytes_per_element(opt.precision.weights);
    const double ab = hw::bytes_per_element(activation_dtype(opt.precision));
    const double a_p = as_d(heads_per_shard(m, opt.tp)), lat = as_d(x->kv_lora_rank);
    const double q_in = as_d(x->q_lora_rank > 0 ? x->q_lora_rank : m.hidden);
    return whole_bytes((q_in * a_p * lat + a_p * lat * as_d(m.hidden)) * wb +
                       q_in * a_p * as_d(x->qk_rope_head_dim) * ab);
}

}  // namespace sim::workload
