// Kernel cost: how long a kernel takes on a GPU and how much of its traffic
// the L2 serves. An interface so other models (a measured lookup table, a
// learned model) can replace the roofline by name.
#pragma once

#include "sim/hw/gpu.h"
#include "sim/hw/kernel.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sim::hw {

struct KernelCost {
    Time duration;                    // launch overhead included
    Time launch_overhead;             // the fixed part: the launch, and a grouped call's setup (§2.7)
    Time compute_time;                // flops / (peak * efficiency)
    Time memory_time;                 // hbm_bytes / (hbm_bw * eff_hbm)
    Time l2_time;                     // l2_bytes / (l2_bw * eff_l2)
    double compute_efficiency = 0.0;  // the GEMM efficiency applied (tiling x waves x ceiling)
    Bytes l2_request_bytes;           // bytes the SMs request from L2
    Bytes hbm_bytes;                  // bytes that came from (or went to) HBM
    // GEMM only: the plan the model chose (0 for other kinds).
    int tile_m = 0, tile_n = 0, split_k = 0;
    std::int64_t waves = 0;
    bool compute_bound() const { return compute_time >= memory_time && compute_time >= l2_time; }
};

// Bytes of a kernel's traffic already resident in L2 (from the cross-kernel
// residency model); the cost model subtracts them from HBM traffic.
struct L2Residency {
    Bytes resident_read_bytes;
};

class CostModel {
public:
    virtual ~CostModel() = default;
    virtual std::string name() const = 0;
    // ModelError if the GPU lacks the kernel's dtype. A pure function of its
    // arguments: the executor memoises it per (descriptor, L2 hits).
    virtual KernelCost cost(const GpuSpec& gpu, const KernelDesc& k, const L2Residency& l2) const = 0;
};

// The roofline with measured efficiencies of docs/hardware-model.md.
std::unique_ptr<CostModel> make_roofline_cost_model();

// Registry of cost models by name:
//   "roofline"            - tile and split-K chosen per shape, like cuBLAS heuristics;
//   "roofline-fixed-tile" - always the GPU file's gemm_tile, no split-K.
// Unknown name: ModelError listing the registered names.
std::unique_ptr<CostModel> make_cost_model(const std::string& name);
struct CostModelInfo {
    std::string name;
    std::string description;
};
std::vector<CostModelInfo> list_cost_models();

// How a GEMM runs on a GPU: one tiling (tile_m x tile_n output tiles, k split
// `split_k` ways) and what the roofline makes of it. Formulas in
// docs/hardware-model.md §2; all times in seconds before rounding.
struct GemmPlan {
    int tile_m = 0, tile_n = 0, split_k = 1;
    std::int64_t tiles = 0;   // ceil(m/tm) * ceil(n/tn) * batch * split_k
    std::int64_t waves = 0;   // ceil(tiles / sm_count)
    double wave_eff = 1.0;    // tiles / (waves * sm_count)
    double fill_eff = 1.0;    // m*n / (padded m * padded n)
    double k_eff = 1.0;       // k_split / (k_split + gpu.k0_of(dtype))
    double efficiency = 0.0;  // ceiling[dtype] * wave_eff * fill_eff * k_eff
    double l2_request_bytes = 0.0;
    double hbm_read_bytes = 0.0;  // before subtracting cross-kernel L2 residency
    double hbm_write_bytes = 0.0;
    double compute_s = 0.0, hbm_s = 0.0, l2_s = 0.0;
    double overlap = 0.0;   // gpu.gemm_overlap
    double time_s() const;  // gemm_time of the three
};

// Pipeline prologue/epilogue of a tile expressed in k for a GPU file without
// `gemm_curve` (see the docs); GpuSpec::gemm_k0 defaults to it.
inline constexpr double kGemmK0 = 64.0;

// A GEMM's time from its compute, HBM and L2 times: their max when
// `overlap` is 0, else (c^p + h^p + l^p)^(1/p) with p = overlap (docs §2).
double gemm_time(double compute, double hbm, double l2, double overlap);

// One given tiling; InternalError for a kernel without a GEMM shape.
GemmPlan evaluate_gemm_plan(const GpuSpec& gpu, const KernelDesc& k, int tile_m, int tile_n, int split_k);
// The fastest of the candidate tilings (the GPU's tile first, then smaller
// and transposed tiles, then split-K when one wave is not filled).
GemmPlan choose_gemm_plan(const GpuSpec& gpu, const KernelDesc& k);

}  // namespace sim::hw
