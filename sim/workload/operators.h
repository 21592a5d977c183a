// Per-layer operators: the kernel sequence a transformer layer runs for one
// micro-batch, with exact FLOPs, bytes and shapes, sharded for tensor
// parallelism. The parallel layer places these on GPUs; the cost model times
// them. Formulas are listed in docs/workload-model.md.
#pragma once

#include "sim/hw/kernel.h"
#include "sim/workload/model.h"
#include "sim/workload/moe.h"

#include <cstdint>
#include <vector>

namespace sim::workload {

enum class Recompute { none, selective, full };
// What Recompute::selective recomputes (Megatron-Core --recompute-modules):
// the attention core (core_attn, the default) and MLA's q and kv up
// projections (mla_up_proj: their outputs, the per-head queries, keys and
// values, are not kept; docs/workload-model.md, "Selective recompute").
struct RecomputeModules {
    bool core_attn = true;
    bool mla_up_proj = false;
};

struct Precision {
    hw::DType compute = hw::DType::bf16;  // matmul inputs
    hw::DType weights = hw::DType::bf16;  // stored weights (inference may quantize)
    hw::DType kv = hw::DType::bf16;       // KV cache
};

// Dropout probabilities of a training run (Megatron --hidden-dropout and
// --attention-dropout; 0 disables). Inference never drops.
struct Dropout {
    double hidden = 0;     // on the two residual branches (fused with the bias and residual add)
    double attention = 0;  // on the attention probabilities
};

// The attention kernel a stack runs (FlashAttention 1/2/3, cuDNN fused
// attention, a Triton flash kernel, xFormers, or unfused matmul-softmax-matmul).
enum class AttentionImpl { flash1, flash2, flash3, cudnn, triton, xformers, naive };
inline constexpr const char* kAttentionImplNames[] = {"flash1", "flash2",   "flash3", "cudnn",
                                                      "triton", "xformers", "naive"};
inline const char* to_string(AttentionImpl a) { return kAttentionImplNames[static_cast<int>(a)]; }
// The fused kernel whose measured efficiency times an implementation
// (docs/workload-model.md, "Attention kernels"): FA3 runs as the GPU's best
// flash kernel, cuDNN as its own (the best's rate without FA3's tile table),
// Triton as its own, the others at FlashAttention-2's.
hw::AttentionKernel attention_kernel_of(AttentionImpl a);
// An FP8 GEMM runs as the stack's FP8 kernels: at the stack's ceiling where it
// names one (0: the GPU's), and, when grouped, as its grouped family
// (OperatorOptions::fp8_gemm_ceiling, fp8_grouped_gemm_dense). Other kernels
// are left as they are.
void apply_stack_fp8_gemm(hw::KernelDesc& k, double ceiling, bool grouped_dense);

// The fraction of the GPU's sustained streaming rate (efficiency.hbm) that a
// stack's memory-bound kernels reach, by class, forward and backward
// (docs/hardware-model.md §4): the norms (with a residual add fused into
// them, where the workload fuses it) and the MLP's activation (GeLU, or
// SwiGLU's SiLU and product). 1 = the streaming rate.
struct MemoryBoundShares {
    double norm = 1.0, norm_bwd = 1.0;
    double activation = 1.0, activation_bwd = 1.0;
};

struct OperatorOptions {
    Precision precision;
    bool flash_attention = true;
    hw::AttentionKernel attention_kernel = hw::AttentionKernel::best;  // which fused kernel (flash only)
    Dropout dropout;                                                   // training passes only
    bool causal = true;
    bool fuse_elementwise = true;  // fused chains drop intermediate HBM round trips and launches
    int tp = 1;                    // tensor-parallel degree (heads and FFN split)
    bool sequence_parallel = false;
    // Context-parallel degree (training): each rank holds 1/cp of every
    // sequence's tokens (Megatron's load-balanced causal split); the shape
    // still describes whole sequences. Attention becomes a ring of cp steps.
    int cp = 1;
    // Inference: K and V go to the KV cache (precision.kv) and the LM head
    // runs on the last token of each sequence only. Implied for the layers
    // when context > new_tokens (decode, chunked prefill); set it for a
    // prefill, whose shape (new_tokens == context) is the same as training's.
    bool inference = false;
    // Expert parallelism: the experts are split over ep ranks (the expert
    // layer's tokens travel by all-to-all); moe says how tokens route.
    int ep = 1;
    // Expert tensor parallelism: each expert's matrices split over etp GPUs;
    // 0 means etp = tp. With etp < tp (and with etp = tp under the alltoall
    // dispatcher with sequence parallelism and ep > 1) each TP rank routes
    // its own sequence-parallel shard of the tokens, and each expert is
    // split over etp GPUs (whole with etp = 1) that gather their tokens
    // (docs/moe.md section 1a).
    int etp = 0;
    int expert_tp() const { return etp > 0 ? etp : tp; }
    // Whether each TP rank routes its own tokens (docs/moe.md section 1a):
    // always with etp < tp (MoE parallel folding) and under the allgather
    // dispatcher (section 3l); with etp = tp > 1 too when Megatron-Core's
    // alltoall dispatcher (moe_alltoall_metadata) runs it with ep > 1.
    bool routes_own_shard() const;
    // Data-parallel attention (docs/moe.md section 8b): the DP ranks whose
    // tokens the dense MLPs (dp_dense_gather) and the LM head
    // (dp_head_gather) gather before running tensor-parallel over all tp x
    // dp GPUs of the engine, SGLang's default; 1 = each rank its own tokens
    // with the layer's weights over its tp GPUs (--moe-dense-tp-size 1,
    // --enable-dp-lm-head).
    int dp_dense_gather = 1;
    int dp_head_gather = 1;
    // The shared experts whole on every GPU, run on the GPU's own tokens with
    // no collective, where the routed part runs on a rank's own shard (etp !=
    // tp): SGLang under DeepEP builds them with tp_size 1 (DeepseekV2MoE),
    // so with data-parallel attention over A > 1 GPUs a rank, or under plain
    // TP (A = tp), each GPU runs them on its 1/A of the rank's tokens
    // (docs/moe.md section 8b). false: tensor-parallel over the layer's TP
    // group on its gathered tokens.
    bool shared_experts_whole = false;
    MoeRouting moe;
    RecomputeModules recompute_modules;  // under Recompute::selective
    // The tokens going to the experts (dispatch, and the output gradients in
    // the backward) travel in FP8 with a scale per 128 elements; the
    // combines stay in the activation type (docs/moe.md section 3b).
    bool fp8_dispatch = false;
    // The same for decode passes only, whatever the compute type: the
    // software profile's decode exchange is DeepEP's low-latency one, whose
    // dispatch SGLang runs in FP8 (docs/moe.md section 3k). The plan builder
    // sets fp8_dispatch from it for each decode pass.
    bool fp8_dispatch_decode = false;
    // Megatron-Core's MoEAlltoAllTokenDispatcher (SoftwareProfile::
    // moe_dispatcher alltoall): with more than one local expert it re-sorts
    // the received tokens by local expert after the dispatch and back before
    // the combine, one more pass over them each way (docs/moe.md section 3f).
    bool moe_sort_chunks = false;
    // The same dispatcher's routing metadata on the EP group (docs/moe.md
    // section 3g): the gate weights' own all-to-all after the tokens' (and
    // its backward), and, when dropless (no capacity factor), the all-gather
    // of every rank's tokens per expert before the permutation.
    bool moe_alltoall_metadata = false;
    // Megatron-Core's MoEAllGatherTokenDispatcher (SoftwareProfile::
    // moe_dispatcher allgather; docs/moe.md section 3l): no all-to-all; each
    // rank routes its own tokens, all-gathers every rank's tokens, gate
    // weights and routing map over the etp x ep ranks, selects those of its
    // local experts, and reduce-scatters the experts' output over them.
    bool moe_allgather = false;
    // Megatron-Core 0.9's unfused permutation (SoftwareProfile::
    // moe_permute_unfused): the combine and both backward passes run as
    // several PyTorch kernels over the routed copies, and the gate weights
    // stay at the source rank, so no all-to-all carries them.
    bool moe_permute_unfused = false;
    // The stack's generation attention kernel (SoftwareProfile::
    // decode_attention_issue): CUDA-core lane instructions per K/V element
    // and query head of a decode step (one new token per sequence); 0 = a
    // kernel that shares each KV head among its query heads on tensor cores.
    double decode_attention_issue = 0.0;
    // Training loss: the stack's cross-entropy casts the logits to FP32 and
    // runs one op per pass (SoftwareProfile::cross_entropy_fp32_unfused;
    // docs/workload-model.md §6) instead of one fused pass each way.
    bool cross_entropy_fp32_unfused = false;
    // MLA decode with W_UK and W_UV absorbed into the query up- and output
    // projections at load (SoftwareProfile::mla_absorbed_weights; docs/moe.md
    // section 7b): decode runs q latent -> heads x kv_lora (weights' dtype),
    // q latent -> heads x rope (activation dtype) and heads x kv_lora ->
    // hidden, and the GPU holds those matrices besides the raw weights.
    bool mla_absorbed_weights = false;
    // Training and prompts: MLA's queries and keys joined from their nope and
    // rope parts by copies, and the values copied out of kv_up's output
    // (SoftwareProfile::mla_qkv_concat; docs/moe.md section 7): three
    // memory passes forward, two backward.
    bool mla_qkv_concat = false;
    // Inference: a prompt's MLA tensors as vLLM 0.7's eager PyTorch path
    // holds them at its output projection's all-reduce bound the workspace
    // from below (SoftwareProfile::mla_prefill_eager; docs/moe.md section 7b).
    bool mla_prefill_eager = false;
    // Training and prompts: MLA's rotary embedding applied by PyTorch
    // operations instead of in the up projections' epilogues
    // (SoftwareProfile::mla_rope_unfused; docs/moe.md section 3j): seven
    // passes over the rope parts forward, fourteen backward, and six small
    // kernels for the cos and sin tables, for the queries and the rope key.
    bool mla_rope_unfused = false;
    // Inference: the fused-MoE kernel's buffers for up to this many tokens
    // are part of the workspace (SoftwareProfile::fused_moe_chunk_tokens); 0 =
    // the experts' inputs of every token, as for any MLP.
    std::int64_t fused_moe_chunk_tokens = 0;
    // The stack's FP8 GEMMs reach this fraction of the FP8 peak at best
    // (SoftwareProfile::fp8_gemm_ceiling; hw::KernelDesc::ceiling); 0 = the GPU's.
    double fp8_gemm_ceiling = 0.0;
    // Grouped FP8 GEMMs compute at the dense FP8 ceiling (SoftwareProfile::
    // fp8_grouped_gemm deepgemm; hw::KernelDesc::grouped_dense_ceiling).
    bool fp8_grouped_gemm_dense = false;
    // Inference: each FP8 GEMM whose input is an activation is preceded by a
    // kernel that quantizes it, one FP32 scale per this many elements of a
    // row (SoftwareProfile::fp8_input_quant_group; docs/moe.md section 7b).
    // The router's GEMM is left out (the checkpoint keeps its weight in
    // BF16). 0 = none.
    std::int64_t fp8_input_quant_group = 0;
    // Kernels of the group-limited top-k routing of a model with expert
    // groups (SoftwareProfile::grouped_topk_kernels); 1 = one routing kernel.
    int grouped_topk_kernels = 1;
    // Kernels the stack runs to route a MoE layer's tokens besides the
    // router GEMM, forward and backward (SoftwareProfile::moe_router_kernels,
    // moe_router_bwd_kernels; docs/moe.md section 3i); 1 = one routing
    // kernel each way.
    int moe_router_kernels = 1;
    int moe_router_bwd_kernels = 1;
    // Elementwise kernels over tokens x hidden after the experts of a model
    // with shared experts, before the layer's reduction: the routed output
    // scaled and the shared experts' output added
    // (SoftwareProfile::shared_expert_combine_kernels); 0 = folded into the
    // combine.
    int shared_expert_combine_kernels = 0;
    // The share of the GPU's streaming rate the stack's norm and activation
    // kernels reach (SoftwareProfile::memory_bound; hw::KernelDesc::hbm_share):
    // 1 each for fused kernels, less for eager PyTorch's.
    MemoryBoundShares memory_bound;
};

// The shape of one pass of a micro-batch through a layer.
struct PassShape {
    std::int64_t batch = 1;       // sequences
    std::int64_t new_tokens = 1;  // tokens per sequence processed now (prompt for prefill, 1 for decode)
    std::int64_t context = 1;     // tokens attended to, including the new ones (KV length)
};

// Where a tensor-parallel collective follows an operator (Megatron layout).
enum class TpSync {
    none,
    after_row_parallel,       // forward: all-reduce (reduce-scatter under SP) of the output
    after_column_input_grad,  // backward: all-reduce (reduce-scatter under SP) of the input gradient
    before_column_parallel    // SP only: all-gather of the input before a column-parallel GEMM
};

// A collective over every GPU of a data-parallel-attention engine (tp x dp:
// SGLang's whole TP group), around the dense MLP and the LM head when they
// gather the DP ranks' tokens (OperatorOptions::dp_dense_gather,
// dp_head_gather; docs/moe.md section 8b).
enum class EngineSync { none, all_gather, reduce_scatter, all_reduce };

struct Operator {
    hw::KernelDesc kernel;
    TpSync tp_sync = TpSync::none;
    // Bytes per GPU of the activation the TP collective moves (full, unsharded size).
    Bytes tp_sync_bytes;
    bool is_weight_grad = false;  // backward weight-gradient GEMM (can overlap DP communication)
    // Context parallelism: step k of cp of a ring-attention pass (-1: not a
    // ring step). Step k >= 1 needs the chunk that arrives from the previous
    // CP rank: cp_ring_bytes per rank (K and V; in the backward also the dK,
    // dV partials), sent by that rank once it holds the chunk.
    int cp_step = -1;
    Bytes cp_ring_bytes;
    // Expert parallelism: an all-to-all over the EP group, of this many
    // bytes per rank, precedes the kernel (token dispatch or combine, and
    // their backward); zero when none.
    Bytes ep_a2a_bytes;
    // Megatron-Core's alltoall dispatcher (OperatorOptions::
    // moe_alltoall_metadata): a second all-to-all over the same group, of
    // this many bytes per rank, right after the tokens' (the gate weights,
    // or their gradients); and an all-gather over the EP group, of this many
    // bytes of output, before the kernel (tokens per expert). Zero: none.
    Bytes ep_probs_a2a_bytes;
    Bytes ep_count_gather_bytes;
    // Expert tensor parallelism 1 < etp < tp (docs/moe.md section 1a): an
    // all-gather over the expert-TP group after the EP all-to-all(s) and
    // before the kernel (bytes: its full output), or a reduce-scatter over
    // it before the EP all-to-all (bytes: its full input). Zero: none.
    Bytes etp_gather_bytes;
    Bytes etp_scatter_bytes;
    // Data-parallel attention's gathered layout (docs/moe.md section 8b): a
    // collective over the engine's GPUs before the kernel and one after it;
    // bytes: the full gathered buffer of every DP rank's tokens.
    EngineSync engine_before = EngineSync::none;
    Bytes engine_before_bytes;
    EngineSync engine_after = EngineSync::none;
    Bytes engine_after_bytes;
    // The allgather dispatcher (OperatorOptions::moe_allgather): all-gathers
    // over the etp x ep ranks before the kernel (the routing map and gate
    // weights, then the tokens or the output gradients; bytes: the full
    // output), and a reduce-scatter over them after it (bytes: its full
    // input). Zero: none.
    Bytes tpep_meta_gather_bytes;
    Bytes tpep_gather_bytes;
    Bytes tpep_scatter_bytes;
    // Low-precision training: this GEMM's activation operand arrives already
    // quantized (the FP8-dispatched tokens of a routed expert's up
    // projection, quantized once per token before the exchange): no
    // cast-transpose, only the transposed copy for the weight gradient.
    bool input_quantized = false;
};

// Unique tensor ids, so that the L2 model sees the same weight of the same
// layer as the same tensor across micro-batches and steps. `layer` is a layer
// index, or kEmbeddingLayer / kHeadLayer for the embedding and the head. The
// input of layer L (the residual stream) is activation (L, 0): what layer L-1
// (or the embedding, for L = 0) writes and what the head reads as (layers, 0).
inline constexpr std::int64_t kEmbeddingLayer = -1;
inline constexpr std::int64_t kHeadLayer = -2;
std::uint64_t weight_tensor_id(std::int64_t layer, int which);
std::uint64_t activation_tensor_id(std::int64_t layer, int which, std::int64_t microbatch);
std::uint64_t kv_tensor_id(std::int64_t layer, std::int64_t microbatch);

std::vector<Operator> layer_forward(const ModelSpec& m, std::int64_t layer, std::int64_t microbatch,
                                    const PassShape& shape, const OperatorOptions& opt);
// Backward of one layer: input-gradient and weight-gradient GEMMs as separate
// kernels; under Recompute::full the forward is recomputed first, under
// selective only the attention core.
std::vector<Operator> layer_backward(const ModelSpec& m, std::int64_t layer, std::int64_t microbatch,
                                     const PassShape& shape, const OperatorOptions& opt, Recompute recompute);
std::vector<Operator> embedding_forward(const ModelSpec& m, std::int64_t microbatch, const PassShape& shape,
                                        const OperatorOptions& opt);
// Final norm + LM head (+ loss in training).
std::vector<Operator> head_forward(const ModelSpec& m, std::int64_t microbatch, const PassShape& shape,
                                   const OperatorOptions& opt, bool training);
std::vector<Operator> head_backward(const ModelSpec& m, std::int64_t microbatch, const PassShape& shape,
                                    const OperatorOptions& opt);
// Multi-token-prediction module `depth` (0 <= depth < m.mtp_layers) of a
// training step, after the main head on the last stage (mtp_ops.cpp):
// embedding gather, enorm and hnorm, eh_proj, the layer m.layers + depth and
// the shared head with its loss; and its backward, in reverse.
std::vector<Operator> mtp_forward(const ModelSpec& m, std::int64_t depth, std::int64_t microbatch,
                                  const PassShape& shape, const OperatorOptions& opt);
std::vector<Operator> mtp_backward(const ModelSpec& m, std::int64_t depth, std::int64_t microbatch,
                                   const PassShape& shape, const OperatorOptions& opt, Recompute recompute);
// Backward of the embedding gather: the scatter-add of the weight gradient.
std::vector<Operator> embedding_backward(const ModelSpec& m, std::int64_t microbatch, const PassShape& shape,
                                         const OperatorOptions& opt);
// Adam step over `params` parameters held by this GPU (FP32 master weights).
// `bytes_per_param` > 0 replaces the fused kernel's HBM traffic with that many
// bytes per parameter, half read and half written (a stack whose optimizer
// makes more passes: docs/software-profiles.md §2c).
Operator optimizer_step(double params, const OperatorOptions& opt, double bytes_per_param = 0.0);
// `passes` elementwise passes over the unsharded gradient of `params`
// parameters before its reduce-scatter, each reading and writing it once, as
// PyTorch FSDP orders them: the first (autograd's assembly of the flat
// gradient) in the gradient's dtype (`grad_bytes` an element), then, when the
// reduce dtype (`reduce_bytes`) differs, the cast to it, then the others in
// the reduce dtype (docs/software-profiles.md §2b).
Operator gradient_shard_passes(double params, int passes, double grad_bytes, double reduce_bytes);
// What a stack does to a gradient bucket of `params` parameters, held in the
// reduce dtype (`reduce_bytes` an element), before the bucket's collective
// (docs/software-profiles.md §2b, `grad_prereduce`): with `nan_check` the
// bucket's L2 norm (one read) that the host reads back, with `scale` the
// in-place multiply by the scaling factor (a read and a write). The kernel
// after the norm is marked host_sync (the norm itself when no scale follows).
// Empty when neither is set.
std::vector<Operator> gradient_bucket_prologue(double params, double reduce_bytes, bool nan_check, bool scale);

// Shapes per tensor-parallel shard. ModelError when tp does not divide heads,
// or neither divides the other for kv_heads (kv heads are replicated when
// tp > kv_heads and kv_heads divides tp).
std::int64_t heads_per_shard(const ModelSpec& m, int tp);
std::int64_t kv_heads_per_shard(const ModelSpec& m, int tp);
// Storage type of activations (and of their gradients): FP32 for fp32/tf32
// math, the 16-bit type for fp16/bf16, and BF16 around FP8/INT8 matmuls.
hw::DType activation_dtype(const Precision& p);

// Sum of the operators' FLOPs (hardware FLOPs: recompute and the flash
// backward's re-computation included, causal masking honoured).
double total_flops(const std::vector<Operator>& ops);
// Hardware FLOPs per token of one training step (forward, backward, recompute;
// every layer, embedding and head), for HFU. Compare with
// training_flops_per_token (model FLOPs, MFU).
double training_hardware_flops_per_token(const ModelSpec& m, std::int64_t seq_len, const OperatorOptions& opt,
                                         Recompute recompute);

// The memory closed forms (footprints per GPU) are in footprint.h.

// Training state per parameter, in bytes (ZeRO's accounting): weights in
// precision.weights; gradients in the same 16- or 32-bit type (16-bit when the
// weights are 8-bit); Adam's first and second moments in FP32 (8) plus an
// FP32 master copy (4) unless the weights are already FP32.
struct TrainingStateBytes {
    double weights = 0, gradients = 0, optimizer = 0;
    double total() const { return weights + gradients + optimizer; }
};
TrainingStateBytes training_state_bytes_per_param(const OperatorOptions& opt);

}  // namespace sim::workload
