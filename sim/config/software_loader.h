// Software profiles: one YAML file per framework stack under
// topologies/software/ (docs/software-profiles.md), loaded by the stack's
// name (`software: {name: ...}` of a scenario or a validation point). A
// profile says what the stack costs the host per kernel it issues, how many
// launches may be pending, whether it fuses elementwise chains, and which
// overlaps it can do. Every value carries its evidence: `source:` (code,
// profiles, benchmarks) or `fitted_on:` (whole runs, tools/fit-profiles.py);
// the loader refuses a value with neither, and unknown keys, at
// file:line:column. A profile may name another of its folder with
// `extends: <profile>` (a release over its stack's general file): it starts
// from that profile's values and evidence and replaces only the keys it
// states (docs/software-profiles.md §2a).
#pragma once

#include "sim/config/provenance.h"
#include "sim/config/yaml_reader.h"
#include "sim/workload/operators.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sim::config {

struct SoftwareProfile {
    std::string name;  // the stack; "default" when a run names no stack
    // The releases this file covers ("0.6": every 0.6.x), empty for the
    // stack's general profile. The file is <name>.yaml, or
    // <name>-<version>.yaml when a version is given (software_profile()).
    std::string version;
    std::string description;
    // CPU time the framework spends issuing one kernel (Python, dispatcher,
    // cudaLaunchKernel). The executor's host thread per GPU issues kernels in
    // compute-stream order at this cost; a kernel cannot start before it is
    // issued (docs/software-profiles.md). 0 = never host-bound.
    Time kernel_issue{};
    Provenance kernel_issue_from;
    // Kernels issued but not finished before a launch blocks the host.
    int launch_queue_depth = 1024;
    Provenance launch_queue_depth_from;
    // Fused elementwise chains (bias+GeLU, bias+dropout+add, ...), the
    // default of a scenario's workload.fuse_elementwise.
    bool fuse_elementwise = true;
    Provenance fuse_elementwise_from;
    // The GPU time of a kernel in this stack's whole runs relative to
    // parasim's kernel model (which kernel and collective benchmarks set):
    // each kernel's time past its launch overhead is divided by it. 1 = the
    // benchmarks' speed. Fitted on whole runs where a profile has them
    // (tools/fit-profiles.py): a residual for what the model leaves out
    // (sustained clocks, library choices, framework work on the GPU), not a
    // mechanism.
    double kernel_efficiency = 1.0;
    Provenance kernel_efficiency_from;
    // MoE token dispatch in FP8 when the workload's dtype is fp8 (DeepSeek-V3
    // report section 3.3, DeepEP): the dispatch all-to-all and the backward
    // one that feeds the experts carry 1 byte an element plus an FP32 scale
    // per 128 (docs/moe.md section 3b); combines stay BF16. Optional key,
    // default false.
    bool moe_fp8_dispatch = false;
    Provenance moe_fp8_dispatch_from;
    // The expert-parallel token exchange the stack runs (docs/moe.md section
    // 3a): "auto" (any registered all-to-all, DeepEP's node-deduplicating
    // exchange included where it is faster) or "alltoall" (a plain
    // all-to-all of every routed copy: Megatron-Core's MoEAlltoAllTokenDispatcher
    // on NCCL, which does not deduplicate a token's copies per node) or
    // "allgather" (Megatron-Core's MoEAllGatherTokenDispatcher: no
    // all-to-all; the tokens, gate weights and routing map all-gathered over
    // the etp x ep ranks and the experts' output reduce-scattered over them,
    // docs/moe.md section 3l). Optional key, default "auto"; a scenario's
    // workload.moe.dispatcher replaces it for one run.
    std::string moe_dispatcher = "auto";
    Provenance moe_dispatcher_from;
    // How the stack permutes the routed tokens and applies their gate weights
    // (docs/moe.md section 7, "What Megatron-Core 0.9 ran for Mixtral"):
    // "fused" (one pass each way, the gate weights travelling with the
    // tokens) or "unfused" (Megatron-Core 0.9's PyTorch permute and
    // unpermute: the combine zero-fills, scatter-adds, weights and sums the
    // routed copies in four kernels at the source rank, so the gate weights
    // are never exchanged; its backward runs four kernels, the dispatch's
    // backward a zero-fill and a scatter-add). Optional key, default "fused".
    bool moe_permute_unfused = false;
    Provenance moe_permute_from;
    // Where the stack runs an MoE layer's shared experts when its routed part
    // runs on each GPU's own tokens under expert parallelism (docs/moe.md
    // section 8b): "tp" (the default; Megatron-Core's SharedExpertMLP over the
    // layer's TP group, with its all-gather and reduce-scatter) or "whole"
    // (SGLang under DeepEP: DeepseekV2MoE builds them with tp_size 1 and runs
    // them on the MoE layer's scattered input, no collective of their own).
    // Optional key `moe_shared_experts`.
    bool moe_shared_experts_whole = false;
    Provenance moe_shared_experts_from;
    // The generation (decode) attention kernel: lane instructions it issues on
    // the CUDA cores per key/value element per query head, or 0 for a
    // kernel that reads each KV head's cache once for its whole group of
    // query heads and does the math on tensor cores (FlashAttention,
    // FlashInfer, TensorRT-LLM's XQA). Non-zero for a kernel that runs one
    // thread block per (sequence, query head) on CUDA cores, as TensorRT-LLM's
    // masked multi-head attention did for grouped-query models before XQA: its
    // time is at least the issue time of those instructions
    // (docs/software-profiles.md §3, "Generation attention").
    double decode_attention_issue = 0.0;
    Provenance decode_attention_issue_from;
    // The dtype the data-parallel gradient collectives carry
    // (docs/software-profiles.md §2b): "weights" (the weights' dtype, FP32
    // for FP32 weights and 2 bytes otherwise), "fp32", or "fp32_if_bf16"
    // (Megatron: BF16 training accumulates and reduces gradients in FP32).
    // Optional key, default "weights".
    std::string grad_reduce_dtype = "weights";
    Provenance grad_reduce_dtype_from;
    // With sharded gradients (ZeRO >= 2: PyTorch FSDP), whether every
    // micro-batch's backward reduce-scatters its gradients (FSDP outside
    // no_sync) instead of the last one only. Optional key
    // `grad_sync: every_microbatch | last_microbatch`, default the latter.
    bool grad_sync_every_microbatch = false;
    Provenance grad_sync_from;
    // With sharded gradients (ZeRO >= 2), the passes the stack makes over a
    // layer's whole (unsharded) gradient on the GPU before its reduce-scatter,
    // each reading and writing it once (PyTorch FSDP's flat gradient: the
    // views' gradients copied into it, and the pre-divide). Optional key
    // `grad_shard_passes`, default 0 (docs/software-profiles.md §2b).
    int grad_shard_passes = 0;
    Provenance grad_shard_passes_from;
    // What the stack does to each gradient bucket on the GPU before its
    // data-parallel collective, in the reduce dtype (docs/software-profiles.md
    // §2b): `nan_check`, the bucket's L2 norm read back by the host (Megatron's
    // check_for_nan_in_grad: one read of the bucket, then the host waits for
    // it), and `scale`, the in-place multiply by the gradient scaling factor
    // (Megatron's 1/dp without --ddp-average-in-collective: a read and a
    // write). Optional key `grad_prereduce: [nan_check, scale]`, default none.
    bool grad_prereduce_nan_check = false;
    bool grad_prereduce_scale = false;
    Provenance grad_prereduce_from;
    // With pipeline parallelism (no virtual stages), whether every pipeline
    // rank but the first reduces its gradients after its schedule ends
    // instead of bucket by bucket during its last backward (Megatron's default
    // delay_grad_reduce, with bucketing off on those ranks; docs/parallelism.md,
    // "Data parallelism and ZeRO"). Optional key `delay_grad_reduce`, default false.
    bool delay_grad_reduce = false;
    Provenance delay_grad_reduce_from;
    // HBM bytes the stack's optimizer step (with its gradient clipping) reads
    // and writes per parameter held by the GPU. 0 (the default): the fused
    // Adam kernel of docs/workload-model.md §6. A stack whose AdamW runs one
    // PyTorch op per line, per tensor, makes more passes (Composer's
    // DecoupledAdamW: docs/software-profiles.md §2c). Optional key
    // `optimizer_bytes_per_param`.
    double optimizer_bytes_per_param = 0.0;
    Provenance optimizer_bytes_per_param_from;
    // How the stack computes the training loss over the LM head's logits
    // (docs/software-profiles.md §2d): "fused" (the default: one pass over
    // the 16-bit logits forward and one backward) or "fp32_unfused"
    // (Megatron's vocab-parallel cross-entropy without
    // --cross-entropy-loss-fusion: the logits cast to FP32 and one PyTorch
    // op per pass). Optional key `cross_entropy`.
    bool cross_entropy_fp32_unfused = false;
    Provenance cross_entropy_from;
    // overlap.tp_comm (Transformer Engine userbuffers): how the reduce-scatter
    // after a row-parallel forward GEMM (attention projection, MLP down) runs
    // (docs/software-profiles.md §2f, docs/parallelism.md "Overlaps"):
    // "ring_exchange" (the default: tp token chunks over point-to-point
    // copies) or "pipeline" (the GEMM in tp_comm_pipeline_splits chunks of
    // its output features, each chunk's reduce-scatter a collective whose
    // kernels hold tp_comm_pipeline_sms SMs). Optional keys
    // `tp_comm_row_fprop`, `tp_comm_pipeline_splits`, `tp_comm_pipeline_sms`.
    bool tp_comm_row_fprop_pipeline = false;
    Provenance tp_comm_row_fprop_from;
    int tp_comm_pipeline_splits = 4;
    Provenance tp_comm_pipeline_splits_from;
    int tp_comm_pipeline_sms = 16;
    Provenance tp_comm_pipeline_sms_from;
    // SMs the expert-parallel dispatch and combine kernels hold while they
    // run (Group::sms of the EP groups; docs/moe.md section 8a): DeepEP's
    // normal kernels run on Buffer.num_sms SMs. 0 (the default): the
    // collective library's comm_sms. Optional key `moe_a2a_sms`.
    int moe_a2a_sms = 0;
    Provenance moe_a2a_sms_from;
    // The fraction of its rate alone that an expert-parallel exchange of an
    // overlapped schedule (two_batch, moe_a2a: on the EP stream, beside the
    // other micro-batch's kernels) reaches (Group::beside_compute_rate;
    // docs/moe.md section 8a, "The exchange beside compute"): DeepEP's
    // normal kernels beside DeepSeek's compute against DeepEP's unit test.
    // Decode exchanges (DeepEP's low-latency kernels) keep their rate. 1 (the
    // default): not slowed. Optional key `moe_a2a_beside_compute`.
    double moe_a2a_beside_compute = 1.0;
    Provenance moe_a2a_beside_compute_from;
    // The all-to-all algorithm of the EP groups' decode exchanges (docs/moe.md
    // section 3k): "auto" (the default: as prefill) or a registered
    // all-to-all, e.g. "deepep-ll" (DeepEP's low-latency kernels, which
    // SGLang's --deepep-mode auto runs for decode); with "deepep-ll" the decode
    // dispatch carries FP8 with its scales. Optional key `moe_a2a_decode`.
    std::string moe_a2a_decode = "auto";
    Provenance moe_a2a_decode_from;
    // Set with moe_a2a_decode: deepep-ll (its dispatch is FP8 with a scale per
    // 128 elements, as SGLang calls it); not a key of its own.
    bool moe_fp8_dispatch_decode = false;
    // MLA decode (docs/moe.md section 7b): "per_head" multiplies each head's
    // query by its slice of kv_up's W_UK and its latent output by W_UV at run
    // time; "absorbed" runs with W_UK folded into the query up-projection
    // (W_Q_UK: q latent -> heads x kv_lora) and W_UV into the output
    // projection (W_UV_O: heads x kv_lora -> hidden), precomputed at load in
    // the weights' dtype and kept beside the raw weights, which prompts still
    // use (vLLM 0.7's MLACommonImpl). Optional key `mla_decode_weights`.
    bool mla_absorbed_weights = false;
    Provenance mla_decode_weights_from;
    // MLA's queries, keys and values in training and prompts (docs/moe.md
    // section 7): "fused" (the default) has the up projections' epilogues
    // write them as the attention core reads them; "concat" is Megatron-Core
    // before its fused MLA RoPE (multi_latent_attention.py at 64cb6bd7): the
    // rope parts joined to the heads by torch.cat and the values made
    // contiguous, three copies forward and two backward. Optional key `mla_qkv`.
    bool mla_qkv_concat = false;
    Provenance mla_qkv_from;
    // The memory profile's peak in a prompt of an MLA model (docs/moe.md
    // section 7b, "The prompt's MLA tensors at the memory profile's peak"):
    // "layer" (the default) is parasim's count of one layer's live
    // intermediates; "eager" is vLLM 0.7's PyTorch prompt path, whose
    // output projection all-reduces out of place while the latents, the
    // queries, kv_up's output, the joined keys, the values padded to the
    // query head size and the attention output are still referenced.
    // Optional key `mla_prefill_workspace`.
    bool mla_prefill_eager = false;
    Provenance mla_prefill_workspace_from;
    // MLA's rotary embedding in training and prompts (docs/moe.md section
    // 3j): "fused" (the default) applies it inside the up projections'
    // epilogues; "unfused" is Megatron-Core's _apply_rotary_pos_emb_bshd
    // (YaRN RoPE, which refuses apply_rope_fusion at 64cb6bd7): one kernel
    // per PyTorch operation on the queries' and the rope key's rope parts.
    // Optional key `mla_rope`.
    bool mla_rope_unfused = false;
    Provenance mla_rope_from;
    // The pipeline's sends under a schedule of one chunk a rank (1F1B,
    // GPipe; docs/moe.md section 3m): "async" (the default) lets a stage's
    // next forward or backward start while its last send is in flight;
    // "blocking" is Megatron-Core's batched p2p without overlap
    // (batch_p2p_comm with wait_on_reqs and batch_p2p_sync, which NeMo sets
    // for vp 1): the next item waits for the send to complete.
    // Optional key `pipeline_sends`.
    bool pipeline_sends_blocking = false;
    Provenance pipeline_sends_from;
    // The Triton fused-MoE kernel's intermediate buffers (docs/moe.md section
    // 7b): for up to this many tokens at a time it holds the experts' up
    // output, its activation and the down output of each (token, expert)
    // pair, so the engine's memory profile pays them at its largest batch.
    // Optional key `fused_moe_chunk_tokens`, 0 (default) = not modelled.
    std::int64_t fused_moe_chunk_tokens = 0;
    Provenance fused_moe_chunk_tokens_from;
    // Static-batch inference: the engine prefills a batch's prompts in
    // consecutive sub-batches whose sequences x (prompt - 1) tokens stay
    // within this bound (TurboMind's max_context_token_num: its context
    // decoder leaves each prompt's last token to the first decode step;
    // docs/software-profiles.md §2f). Optional key `prefill_max_tokens`,
    // 0 (default) = the whole micro-batch in one pass.
    std::int64_t prefill_max_tokens = 0;
    Provenance prefill_max_tokens_from;
    // Static-batch inference: what the engine does every decode step beside
    // the model's kernels (docs/software-profiles.md §2g; TurboMind v0.1's
    // LlamaBatch loop). `decode_step_kernels` small kernels (sampling tail,
    // stop criterion, output gather); `decode_step_host_syncs` times the host
    // waits for the GPU, each leaving it idle for `decode_step_sync_latency`
    // plus one kernel_issue (the next launch); and a device-to-host copy of
    // `decode_step_copy_bytes` per sequence, during which the GPU is idle
    // too (the host waits for it). Optional block `decode_step`, all 0
    // (default) = none of it.
    int decode_step_kernels = 0;
    Provenance decode_step_kernels_from;
    int decode_step_host_syncs = 0;
    Provenance decode_step_host_syncs_from;
    Time decode_step_sync_latency{};
    Provenance decode_step_sync_latency_from;
    double decode_step_copy_bytes = 0;
    Provenance decode_step_copy_bytes_from;
    // The fraction of the FP8 dense peak the stack's FP8 GEMMs reach on large
    // shapes, where they are not the GPU's best library (cuBLASLt, whose
    // ceiling the GPU file gives): vLLM 0.7's block-scaled (128 x 128 weight,
    // 1 x 128 activation scales) Triton kernels (docs/moe.md section 7b).
    // Optional key `fp8_gemm_ceiling`, 0 (default) = the GPU's ceiling.
    double fp8_gemm_ceiling = 0.0;
    Provenance fp8_gemm_ceiling_from;
    // The kernel family of the stack's grouped FP8 (MoE expert) GEMMs:
    // `cutlass` (default; CUTLASS's grouped kernel, as torch._scaled_grouped_mm
    // runs) at the GPU's efficiency.gemm_grouped_fp8, or `deepgemm` (DeepSeek's
    // m-grouped kernels) at the dense FP8 ceiling (docs/moe.md section 4).
    // Optional key `fp8_grouped_gemm`.
    bool fp8_grouped_gemm_dense = false;
    Provenance fp8_grouped_gemm_from;
    // Inference: the stack quantizes the activation input of each FP8 GEMM
    // in a kernel of its own, to FP8 with one FP32 scale per this many
    // elements of a row (vLLM's per_token_group_quant_fp8 before its
    // block-FP8 linears and before each of the fused MoE's two GEMMs;
    // docs/moe.md section 7b). Optional key `fp8_input_quant_group`, 0
    // (default) = no separate kernel (the GEMM reads FP8 rows as they come).
    std::int64_t fp8_input_quant_group = 0;
    Provenance fp8_input_quant_group_from;
    // The kernels the stack runs for the top-k routing of a model with expert
    // groups (DeepSeek's group-limited top-k) after the router GEMM (docs/moe.md
    // section 7b). Optional key `grouped_topk_kernels`, 1 (default) = one
    // fused routing kernel.
    int grouped_topk_kernels = 1;
    Provenance grouped_topk_kernels_from;
    // The kernels the stack runs to route a MoE layer's tokens besides the
    // router GEMM: the score function, top-k, gate weights, capacity, the
    // load-balancing loss and its bookkeeping, forward, and their autograd
    // backward (Megatron-Core's TopKRouter without router fusion runs each
    // PyTorch operation as a kernel of its own; docs/moe.md section 3i).
    // Optional keys `moe_router_kernels` and `moe_router_bwd_kernels`, 1
    // (default) = one fused routing kernel each way.
    int moe_router_kernels = 1;
    Provenance moe_router_kernels_from;
    int moe_router_bwd_kernels = 1;
    Provenance moe_router_bwd_kernels_from;
    // The stack pads each token's MLA cache entry (the latent and rope key of
    // one layer) to a multiple of this many bytes in its KV pool (vLLM 0.7's
    // VLLM_CUDA_MEM_ALIGN_KV_CACHE: 576 BF16 values, 1152 bytes, held in 1280;
    // docs/moe.md section 7b). Only the pool's size changes: kernels read the
    // entry, not its padding. Optional key `mla_kv_cache_align_bytes`, 0
    // (default) = entries packed.
    std::int64_t mla_kv_cache_align_bytes = 0;
    Provenance mla_kv_cache_align_bytes_from;
    // Serving: memory a GPU of the engine holds outside PyTorch's allocator
    // (NCCL communicators, the custom all-reduce's buffers), which vLLM's
    // memory profile subtracts from its budget with the weights and the
    // activation peak before it sizes the KV pool (vllm/utils.py
    // memory_profiling: non_kv_cache_memory = non_torch_increase +
    // torch_peak_increase + weights_memory; docs/moe.md section 7b). Optional
    // key `non_torch_memory`, 0 (default) = none held.
    double non_torch_memory_bytes = 0;
    Provenance non_torch_memory_from;
    // Elementwise kernels the stack runs over tokens x hidden after the
    // routed experts of a model with shared experts: vLLM's DeepseekV2MoE
    // scales the fused MoE's output by routed_scaling_factor and then adds
    // the shared experts' output, two PyTorch operations (docs/moe.md
    // section 7b). Optional key `shared_expert_combine_kernels`, 0 (default)
    // = folded into the combine.
    int shared_expert_combine_kernels = 0;
    Provenance shared_expert_combine_kernels_from;
    // The share of the GPU's streaming rate (efficiency.hbm) that the
    // stack's norm and activation kernels reach, forward and backward: 1 for
    // fused kernels; eager PyTorch's ATen kernels reach less, as measured
    // (docs/software-profiles.md §2e). Optional block `memory_bound:` of the
    // keys norm, norm_bwd, activation, activation_bwd, each 1 when absent.
    workload::MemoryBoundShares memory_bound;
    Provenance memory_bound_norm_from, memory_bound_norm_bwd_from, memory_bound_activation_from,
        memory_bound_activation_bwd_from;
    // Overlaps the stack can do (documentation: the run says which it used).
    std::vector<std::string> overlaps;
    Provenance overlaps_from;
    // Serving only (`parasim serve`; docs/serving.md, "Host time of the
    // serving engine"): CPU time that the GPU plan does not contain. Optional
    // block `serving:`, every key optional, 0 when absent (no host cost).
    // sequence_overhead: per sequence of an iteration, serial with the GPU
    // (the engine's per-request bookkeeping around each step);
    // request_overhead and token_overhead: the front end (API server) work
    // per request (HTTP, tokenisation, hand-off to the engine) and per output
    // token streamed (detokenisation, one response chunk), two FIFO queues on
    // one CPU, streaming first (intake runs while no token waits);
    // request_latency: a delay per request that occupies no CPU (hops
    // between processes, waiting for a step boundary).
    Time serving_sequence_overhead{}, serving_request_overhead{}, serving_token_overhead{}, serving_request_latency{};
    Provenance serving_sequence_overhead_from, serving_request_overhead_from, serving_token_overhead_from,
        serving_request_latency_from;
    // Disaggregated serving's handover (docs/serving.md, "The handover's
    // software"): kv_descriptor_post, the host time to post one transfer
    // descriptor (one block of one layer's K or V, or MLA's latent), serial
    // on each receiving GPU's worker before its flows start (0: not
    // modelled); first_token (transfer | decode_step, the flag true for
    // decode_step): the decode engine recomputes the last prompt token and
    // that step samples the first token the client sees (vLLM's NIXL
    // connector), instead of the first token reaching the client when the
    // cache has landed.
    Time serving_kv_descriptor_post{};
    bool serving_first_token_on_decode = false;
    Provenance serving_kv_descriptor_post_from, serving_first_token_from;
};

// Bytes per gradient element the data-parallel reduce carries under
// profile `p` for weights of `weight_bytes` bytes an element
// (docs/software-profiles.md §2b): 4 for FP32 weights or an FP32 reduce,
// else 2.
double gradient_reduce_bytes(const SoftwareProfile& p, double weight_bytes, bool weights_bf16);

// The name of the profile used when a run names no software stack.
inline constexpr const char* kDefaultSoftware = "default";

// Parses one profile (the root map of a file); `expected_name`, when not
// empty, must equal its `name`. `dir` is the folder its `extends:` base is
// read from (a profile with a base and no folder is an error).
SoftwareProfile load_software_profile(const Node& root, const std::string& expected_name, const std::string& dir = "");
SoftwareProfile load_software_file(const std::string& path);
// Why the profile's moe_dispatcher cannot run with its other MoE keys (empty
// when it can): the allgather dispatcher has no all-to-all for DeepEP's
// decode kernels (moe_a2a_decode) or an FP8 dispatch (moe_fp8_dispatch) to
// replace (docs/moe.md section 3l).
std::string moe_dispatcher_conflict(const SoftwareProfile& p);

// data_dir() + "/topologies/software".
std::string default_software_dir();
// The profile of stack `name` ("" = kDefaultSoftware) from `dir`
// (default_software_dir() when empty). A stack without a file is an error.
SoftwareProfile software_profile(const std::string& name, const std::string& dir = "");
// The profile of release `version` of stack `name`: the file
// <name>-<v>.yaml for the longest prefix v of the version's dot-separated
// components that has one ("0.6.1": 0.6.1, then 0.6, then 0; a leading 'v'
// is dropped; a pre-release "0.6a" also tries 0.6), else <name>.yaml. A version with characters other than
// letters, digits, '.', '-' and '_' names no file.
SoftwareProfile software_profile(const std::string& name, const std::string& version, const std::string& dir);
// Names of the *.yaml files in `dir`, sorted.
std::vector<std::string> software_profile_names(const std::string& dir = "");

}  // namespace sim::config
