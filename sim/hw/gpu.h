// One GPU model's figures, loaded from topologies/gpus/<name>.yaml. Plain
// data: the cost model and the memory accounting read it; nothing here
// computes.
#pragma once

#include "sim/core/units.h"
#include "sim/hw/dtype.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace sim::hw {

struct GpuEfficiency {
    // Best fraction of dense peak reached by library GEMMs on large square
    // shapes, per dtype (index = DType); 0 where the dtype is unsupported.
    std::array<double, kDTypeCount> gemm{};
    double hbm = 0.9;          // sustained fraction of peak memory bandwidth
    double l2 = 0.8;           // sustained fraction of L2 bandwidth
    Time launch_overhead{};    // per kernel
    double nccl_nvlink = 0.0;  // fraction of per-direction NVLink rate NCCL rings reach (0: no NVLink)
    double nccl_pcie = 0.8;
    // Fraction of dense fp16/bf16 (or the kernel dtype's) peak that the best
    // fused (flash) attention kernel reaches at head_dim 128 on long
    // sequences. Optional in the GPU file; when absent the cost model uses
    // AttentionFit::default_share x the GPU's GEMM ceiling for the dtype.
    std::optional<double> attention;
    // The same for FlashAttention-2 on a GPU where it is not the best kernel
    // (Hopper: FA2 uses the Ampere mma.sync path, not wgmma/TMA). Optional;
    // when absent a flash2 kernel runs at `attention`.
    std::optional<double> attention_flash2;
    // The sustained fraction of peak memory bandwidth at which a grouped GEMM
    // (an MoE layer's experts in one kernel, KernelDesc::grouped) streams its
    // operands: measured well below a dense GEMM's (docs/moe.md section 4).
    // Optional; when absent a grouped GEMM streams at `hbm`.
    std::optional<double> hbm_grouped;
    // The fraction of the FP8 dense peak a grouped FP8 GEMM reaches on large
    // shapes (CUTLASS's grouped kernel behind torch._scaled_grouped_mm): below
    // the dense cuBLASLt ceiling gemm[fp8] (docs/moe.md section 4). Optional;
    // when absent a grouped FP8 GEMM computes at gemm[fp8].
    std::optional<double> gemm_grouped_fp8;
    // GPU time a grouped GEMM call takes beyond the launch, whatever its bytes and
    // groups: PyTorch's one-block kernel writing the groups' pointers and shapes, and
    // CUTLASS's grouped kernel's descriptor updates (docs/hardware-model.md §2.7).
    // Fitted together with hbm_grouped, and taken with it; zero (the key absent)
    // where no grouped kernel was measured.
    Time grouped_setup{};
};

// The shape factors of the flash-attention cost (docs/hardware-model.md §3),
// fitted on kernel measurements: loaded from topologies/kernels/
// flash-attention.yaml (which cites the data of each) into every GPU spec by
// sim/config. Zero here: a spec built without the file has no attention model.
struct AttentionFit {
    double block = 0;           // query (and key) block rows of one CTA
    double seq0 = 0;            // kv-loop prologue, in keys: seq factor kv / (kv + seq0)
    double head_dim0 = 0;       // head_dim half-efficiency point: d / (d + head_dim0)
    double ref_head_dim = 0;    // the head_dim efficiency.attention is measured at
    double backward_share = 0;  // backward kernel's rate over the forward's
    double default_share = 0;   // efficiency.attention when the GPU file has none, x the GEMM ceiling
    // The Triton kernel's time over FlashAttention-2's on the same shape,
    // forward and backward (>= 1; kernel benchmarks, docs/hardware-model.md §3).
    double triton_forward = 1, triton_backward = 1;
    // FlashAttention-2's own half point (its Ampere mma.sync path loses less
    // at small head_dim than FA3's wgmma pipeline): kernels timed as FA2, and
    // the best kernel of a GPU before Hopper, which is FA2.
    double head_dim0_flash2 = 0;
    // The backward kernel's prologue in keys (K, V loaded and dK, dV written
    // per CTA, D = rowsum(dO * O) and dQ's conversion around it): seq0's
    // counterpart for the backward kernel.
    double seq0_backward = 0;
    // FlashAttention-3's forward tiles on Hopper (query rows x key columns
    // of one CTA) by head_dim, ascending: a head_dim runs with the first
    // entry at least as large; past the last, or for any other kernel,
    // block x block. They set the CTA count and the causal diagonal's work.
    struct Tile {
        int head_dim = 0, block_m = 0, block_n = 0;
    };
    std::vector<Tile> flash3_tiles;
};

struct GpuSpec {
    std::string name;          // catalog name, e.g. "h100-sxm"
    std::string architecture;  // volta | turing | ampere | ada | hopper
    int sm_count = 0;
    double tensor_clock_hz = 0.0;
    // Dense peak per dtype; nullopt where the hardware does not support it.
    std::array<std::optional<FlopRate>, kDTypeCount> peak{};
    std::string memory_kind;
    Bytes memory_capacity;
    Bandwidth memory_bandwidth;
    Bytes l2_size;
    Bandwidth l2_bandwidth;
    int nvlink_generation = 0;  // 0: none
    int nvlink_links = 0;
    Bandwidth nvlink_bandwidth;  // per direction, whole GPU
    int pcie_generation = 0;
    Bandwidth pcie_bandwidth;  // per direction, x16
    GpuEfficiency efficiency;
    AttentionFit attention_fit;
    int gemm_tile_m = 128;
    int gemm_tile_n = 128;
    // CTAs per thread-block cluster along m that receive each B tile once
    // through TMA multicast (Hopper and later: 2; earlier: 1). It divides the
    // L2 reads of B panels. Optional in the GPU file (gemm_tile.cluster); the
    // loader defaults it by architecture.
    int gemm_cluster = 1;
    // The GEMM efficiency curve (docs/hardware-model.md §2): a tile's
    // pipeline prologue/epilogue worth `gemm_k0` of k. Optional in the GPU
    // file (gemm_curve); the defaults are the model before the curve was fitted.
    double gemm_k0 = 64.0;  // = kGemmK0 (cost_model.h)
    // k0 of FP8 GEMMs (gemm_curve.k0_fp8), whose kernels run a deeper k tile
    // and, per k block, scale and promote the accumulator; negative: gemm_k0.
    double gemm_k0_fp8 = -1.0;
    double k0_of(DType t) const { return t == DType::fp8 && gemm_k0_fp8 >= 0.0 ? gemm_k0_fp8 : gemm_k0; }
    // Overlap exponent p of a GEMM's compute and memory times: the kernel
    // takes (compute^p + hbm^p + l2^p)^(1/p); 0 means max() (perfect overlap).
    double gemm_overlap = 0.0;

    bool supports(DType t) const { return peak[static_cast<std::size_t>(t)].has_value(); }
    // Peak for `t`; ModelError naming the GPU and dtype when unsupported.
    FlopRate peak_of(DType t) const;
    // efficiency.gemm for `t`; ModelError when unsupported. `grouped`: the
    // ceiling of a grouped kernel (gemm_grouped_fp8 for FP8 where given).
    double gemm_ceiling(DType t, bool grouped = false) const;
    // "fp32, fp16, int8": the supported dtypes, for messages.
    std::string supported_dtypes() const;
};

}  // namespace sim::hw
