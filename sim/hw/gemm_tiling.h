// GEMM kernels whose library fixes the tiling by a rule instead of the cost
// model's search (docs/hardware-model.md §2.7): the rule, and a GEMM plan with
// thread-block clusters. The roofline's own search is in cost_model.h.
#pragma once

#include "sim/hw/cost_model.h"

#include <optional>

namespace sim::hw {

// A kernel's output tile and its thread-block cluster (CTAs along m and n).
struct FixedTiling {
    int tile_m = 0, tile_n = 0, cluster_m = 1, cluster_n = 1;
};

// The tiling of CUTLASS's grouped FP8 kernel as PyTorch dispatches it on Hopper
// (torch._scaled_grouped_mm: the `cutlass` family of KernelDesc::grouped FP8
// GEMMs, neither grouped_dense_ceiling nor a stack's own ceiling), chosen by the
// kernel's per-group m, n, k; nullopt for every other kernel.
std::optional<FixedTiling> fixed_tiling(const GpuSpec& gpu, const KernelDesc& k);

// evaluate_gemm_plan with clusters of cluster_m x cluster_n CTAs: each GEMM's
// (each group's) tile counts are rounded up to whole clusters, and the padding
// tiles compute like the others.
GemmPlan evaluate_gemm_plan(const GpuSpec& gpu, const KernelDesc& k, int tile_m, int tile_n, int split_k, int cluster_m,
                            int cluster_n);

}  // namespace sim::hw
