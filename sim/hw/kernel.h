// What a kernel asks of a GPU: the operator's work and traffic, as the
// workload layer describes it, plus the tensors it touches so the L2 model can
// tell hits from misses across kernels.
#pragma once

#include "sim/core/units.h"
#include "sim/hw/dtype.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sim::hw {

enum class KernelKind {
    gemm,          // dense matmul (possibly batched): uses m, n, k, batch
    attention,     // fused (flash) or unfused attention core
    elementwise,   // norms, activations, residual adds, softmax, optimizer: memory-bound
    embedding,     // gather from a table
    communication  // a collective's reduction kernel (SMs + HBM while it runs)
};

// best: the GPU's best flash kernel (FA3 on Hopper, FA2 before it); flash2:
// FlashAttention-2 (on Hopper its Ampere-style path); triton: the
// FlashAttention-1-era Triton port (flash_attn_triton.py, llm-foundry's
// attn_impl: triton), timed as flash2 slowed by AttentionFit::triton_forward /
// triton_backward; cudnn: cuDNN's fused attention, timed as best except that
// FA3's tile table (AttentionFit::flash3_tiles) is not its own.
enum class AttentionKernel : std::uint8_t { best, flash2, triton, cudnn };

// Lanes an SM issues per clock: 4 sub-partitions, each one warp instruction
// (32 lanes) per clock, on Volta, Ampere and Hopper (NVIDIA's V100, A100 and
// H100 architecture whitepapers: four processing blocks per SM, each with one
// warp scheduler dispatching one warp instruction per clock).
inline constexpr double kIssueLanesPerSm = 4 * 32;

// A named tensor a kernel reads or writes, for L2 residency across kernels.
// `id` is unique within a simulation (the workload layer assigns it).
struct TensorUse {
    std::uint64_t id = 0;
    Bytes size;
    bool write = false;
};

struct KernelDesc {
    std::string name;
    KernelKind kind = KernelKind::elementwise;
    DType dtype = DType::fp16;
    Flops flops;
    Bytes bytes_read;  // compulsory bytes read from memory (before L2 reuse)
    Bytes bytes_written;
    // GEMM shape (C[m,n] += A[m,k] B[k,n]) repeated `batch` times.
    // Attention uses the same fields: m = query tokens per sequence, n = key
    // tokens (KV length), k = head_dim, batch = sequences x query heads.
    // 0 means "shape unknown": the cost model then applies its ceilings
    // without the shape factors.
    std::int64_t m = 0, n = 0, k = 0, batch = 1;
    // GEMM only: the part of bytes_read that the epilogue reads once per
    // output element (an output accumulated with beta = 1, e.g. a weight
    // gradient summed over micro-batches; a bias), as opposed to the operand
    // panels that tiles re-read through L2.
    Bytes epilogue_read;
    // Attention only: causal mask (flops already halved by the workload), and
    // whether this is the backward kernel (dQ, dK, dV).
    bool causal = false;
    bool backward = false;
    // Attention only: which fused kernel runs. `best` is the fastest flash
    // kernel of the GPU (efficiency.attention: FA3 on Hopper, FA2 on
    // Ampere); `flash2` asks for FlashAttention-2 where a faster kernel
    // exists (efficiency.attention_flash2, when the GPU file gives it).
    AttentionKernel attention_kernel = AttentionKernel::best;
    // Instructions (per lane: one warp instruction counts 32) the kernel
    // issues on the CUDA cores beside its tensor-core math; 0 = none worth
    // modelling. Its compute time is at least their issue time, sm_count x
    // kIssueLanesPerSm per clock. Set for a generation attention kernel that
    // works per query head on CUDA cores (docs/software-profiles.md §3,
    // "Generation attention").
    double issue_instructions = 0.0;
    // GEMM only: the fraction of the dtype's peak that this kernel's
    // implementation reaches on large shapes, where it is not the GPU's best
    // library's (gemm_ceiling); 0 = the GPU's. A stack whose FP8 GEMMs are
    // block-scaled Triton kernels sets it (SoftwareProfile::fp8_gemm_ceiling).
    double ceiling = 0.0;
    // GEMM only: one grouped kernel of `batch` GEMMs, each with its own weights (MoE experts,
    // workload::merge_grouped): it pays the GPU's efficiency.grouped_setup a call and streams at
    // its hbm_grouped where given, unless grouped_dense_ceiling (DeepGEMM), and of FP8 computes at
    // its gemm_grouped_fp8 (docs/moe.md section 4, docs/hardware-model.md §2.7).
    bool grouped = false;
    // Memory-bound kernels (elementwise, embedding) only: the fraction of the
    // GPU's sustained streaming rate (efficiency.hbm) that this kernel's
    // implementation reaches on its compulsory bytes; 1 = the streaming rate
    // (a fused kernel). A stack that runs eager PyTorch norms and activations
    // sets it from a kernel measurement (SoftwareProfile::memory_bound;
    // docs/hardware-model.md §4).
    double hbm_share = 1.0;
    // GEMM only, with `grouped`: the stack's grouped kernel computes at the dense
    // ceiling (DeepGEMM's m-grouped FP8 kernels, which are its dense kernel with a
    // scheduler over the groups: SoftwareProfile::fp8_grouped_gemm deepgemm).
    bool grouped_dense_ceiling = false;
    // The host synchronises with the GPU before it issues this kernel: it
    // waits until the kernel could start (its inputs done, its stream free),
    // then spends its issue cost, so the GPU idles for at least that cost
    // and the host's lead over the GPU is lost (Megatron-Core's alltoall
    // dispatcher reading the token counts to the host before its exchange;
    // docs/software-profiles.md §3, docs/moe.md section 3i). Only a host
    // model with a cost per kernel sees it (SoftwareProfile::kernel_issue).
    bool host_sync = false;
    std::vector<TensorUse> tensors;
};

}  // namespace sim::hw
