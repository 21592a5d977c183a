// The memory footprint of one GPU in closed form: a layer's weights, the
// activations it stores for backward, its KV cache, the pipeline boundary
// activation, the embedding and head tables and the workspace, all in whole
// bytes (footprint.cpp; formulas and the rounding rule in
// docs/workload-model.md §10). The parallel layer adds them up per stage.
#pragma once

#include "sim/core/units.h"
#include "sim/workload/model.h"
#include "sim/workload/operators.h"

#include <cstdint>

namespace sim::workload {

inline constexpr std::int64_t kAnyMoeLayer = std::int64_t{1} << 40;
// Activations stored for backward by one layer for one micro-batch
// (Korthikanti et al. 2022: s*b*h*(34 + 5*a*s/h) / t without SP, with the
// flash-attention and selective-recompute variants). An MoE layer's expert
// tensors follow its load: under a per-layer histogram `layer`'s own (the
// pooled one for a layer without rows), else, and for kAnyMoeLayer or a
// leading dense layer, the worst MoE layer's (docs/moe.md section 5).
Bytes layer_activation_bytes(const ModelSpec& m, const PassShape& shape, const OperatorOptions& opt,
                             Recompute recompute, std::int64_t layer = kAnyMoeLayer);
// KV cache bytes per layer for `batch` sequences of `context` tokens, per TP shard.
Bytes layer_kv_bytes(const ModelSpec& m, std::int64_t batch, std::int64_t context, const OperatorOptions& opt);
// Bytes of one layer's weights on one TP shard.
// `layer` picks a dense or an MoE layer (first_dense_layers); the default
// (past any layer count) is an MoE layer of an MoE model.
Bytes layer_weight_bytes(const ModelSpec& m, const OperatorOptions& opt, std::int64_t layer = kAnyMoeLayer);
// Bytes of the activation crossing a pipeline boundary for one micro-batch.
Bytes boundary_activation_bytes(const ModelSpec& m, const PassShape& shape, const OperatorOptions& opt);
// Parameters of one layer held by one TP shard (norms and row-parallel
// biases are replicated; with MoE, all experts).
double layer_params_per_shard(const ModelSpec& m, const OperatorOptions& opt, std::int64_t layer = kAnyMoeLayer);
// The experts' part of layer_params_per_shard: experts / ep experts, each
// split over etp (expert_tp(); 0 for a dense layer). The router stays with the dense part.
double layer_expert_params_per_shard(const ModelSpec& m, const OperatorOptions& opt, std::int64_t layer = kAnyMoeLayer);
// Bytes of the embedding tables (token, + position when learned) on one TP
// shard (the token table is split by vocabulary).
Bytes embedding_weight_bytes(const ModelSpec& m, const OperatorOptions& opt);
// Bytes of the head on one TP shard: final norm, and the LM head matrix unless
// tied (a tied head on another pipeline stage than the embedding holds a copy
// of the embedding table: add embedding_weight_bytes there).
Bytes head_weight_bytes(const ModelSpec& m, const OperatorOptions& opt);
// Bytes of the multi-token-prediction modules' projections (2h x h / tp) and
// norms (enorm, hnorm, final) on one TP shard, all mtp_layers of them; their
// transformer layers count as layers (layer_weight_bytes).
Bytes mtp_module_weight_bytes(const ModelSpec& m, const OperatorOptions& opt);
// Bytes of one MLA layer's absorbed decode matrices on one TP shard, held
// besides its raw weights when opt.mla_absorbed_weights (inference): W_Q_UK
// (q latent, or hidden without one, x heads/tp x kv_lora) and W_UV_O
// (heads/tp x kv_lora x hidden) in the weights' dtype, W_QR (q latent x
// heads/tp x rope) in the activations' dtype; 0 otherwise (docs/moe.md
// section 7b).
Bytes mla_absorbed_weight_bytes(const ModelSpec& m, const OperatorOptions& opt);
// Transient memory besides stored activations, weights and KV cache: a fixed
// library workspace (cuBLAS, 32 MiB) plus the largest short-lived tensor: the
// logits (+ FP32 softmax in training) or, in inference, one layer's live
// intermediates (and the naive attention score matrix; with
// opt.fused_moe_chunk_tokens, the fused-MoE kernel's buffers for a chunk).
Bytes workspace_bytes(const ModelSpec& m, const PassShape& shape, const OperatorOptions& opt, bool training);

}  // namespace sim::workload
