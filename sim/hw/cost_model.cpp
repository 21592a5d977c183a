// The roofline cost model with measured efficiencies, and the registry of
// cost models by name. Every formula here is written out, with its
// assumptions and the origin of each constant, in docs/hardware-model.md;
// section numbers below refer to that file.
#include "sim/hw/cost_model.h"

#include "sim/hw/gemm_tiling.h"

#include "sim/core/checked.h"
#include "sim/core/error.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace sim::hw {

namespace {

// Split-K partial sums are FP32.
constexpr double kAccumBytes = 4.0;
// Smallest k per split worth a split-K candidate.
constexpr std::int64_t kMinSplitK = 128;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0); }  // a + b - 1 could overflow

// Tile, CTA and wave counts are products of a kernel's sizes, each of which
// may be large: checked, because a wrapped count is a wrong (or zero) divisor.
std::int64_t count(const KernelDesc& kd, std::int64_t a, std::int64_t b, std::int64_t c = 1) {
    const auto product = checked_mul(a, b, c);
    if (!product)
        throw ModelError(
            fmt::format("kernel {} (m={}, n={}, k={}, batch={}) is too large to schedule: {} x {} x {} "
                        "tiles do not fit in 64 bits",
                        kd.name, kd.m, kd.n, kd.k, kd.batch, a, b, c));
    return *product;
}

double per_s(double amount, double rate) { return amount <= 0.0 ? 0.0 : amount / rate; }

// Tile sizes tried along one GEMM dimension: halvings of the GPU's tile
// dimensions down to 64, and down to 16 when the problem dimension itself is
// below 64 (skinny kernels).
std::vector<int> tile_dims(const GpuSpec& gpu, std::int64_t extent) {
    std::vector<int> dims;
    for (int start : {gpu.gemm_tile_m, gpu.gemm_tile_n}) {
        for (int d = start; d >= 16; d /= 2) {
            if (d < 64 && extent >= 64) break;
            if (std::find(dims.begin(), dims.end(), d) == dims.end()) dims.push_back(d);
            if (d % 2 != 0) break;
        }
    }
    return dims;
}

struct Work {
    double flops = 0, efficiency = 0, rate = 0;  // compute: flops / (rate * efficiency)
    double hbm_read = 0, hbm_write = 0, l2 = 0;  // bytes
};

double sustained_l2(const GpuSpec& gpu) { return gpu.l2_bandwidth.bytes_per_s * gpu.efficiency.l2; }
double sustained_hbm(const GpuSpec& gpu) { return gpu.memory_bandwidth.bytes_per_s * gpu.efficiency.hbm; }
// §2.7: a grouped GEMM (KernelDesc::grouped) runs as the grouped kernel measured on the GPU:
// a setup per call (GpuEfficiency::grouped_setup) and its own streaming rate (hbm_grouped),
// a pair fitted together, so a kernel takes both or neither. vLLM's Triton MoE (a stack's own
// KernelDesc::ceiling) takes the measured kernel's, unmeasured itself; DeepGEMM's family
// (grouped_dense_ceiling), its dense kernel with a scheduler over the groups, runs as a dense GEMM.
bool grouped_kernel(const KernelDesc& kd) {
    return kd.kind == KernelKind::gemm && kd.grouped && !kd.grouped_dense_ceiling;
}

// A grouped GEMM streams at its own measured fraction where the GPU gives one; a memory-bound
// kernel at its implementation's share of the streaming rate (KernelDesc::hbm_share, §4).
double sustained_hbm(const GpuSpec& gpu, const KernelDesc& kd) {
    const auto& grouped = gpu.efficiency.hbm_grouped;
    if (grouped_kernel(kd) && grouped) return gpu.memory_bandwidth.bytes_per_s * *grouped;
    const bool streaming = kd.kind == KernelKind::elementwise || kd.kind == KernelKind::embedding;
    return streaming ? sustained_hbm(gpu) * kd.hbm_share : sustained_hbm(gpu);
}

// A GEMM's ceiling: the stack's own (KernelDesc::ceiling) where it names one, else the
// GPU's, of a grouped kernel where the GEMM is one that does not run at the dense rate.
double gemm_ceiling(const GpuSpec& gpu, const KernelDesc& kd) {
    if (kd.ceiling > 0.0) return kd.ceiling;
    return gpu.gemm_ceiling(kd.dtype, kd.grouped && !kd.grouped_dense_ceiling);
}

double kernel_flops(const KernelDesc& k) {
    if (k.flops.value > 0.0) return k.flops.value;
    if (k.kind == KernelKind::gemm && k.m > 0 && k.n > 0 && k.k > 0)
        return 2.0 * static_cast<double>(k.m) * static_cast<double>(k.n) * static_cast<double>(k.k) *
               static_cast<double>(std::max<std::int64_t>(1, k.batch));
    return 0.0;
}

bool has_gemm_shape(const KernelDesc& k) { return k.m > 0 && k.n > 0 && k.k > 0 && k.batch > 0; }

// §3: the kernel family that runs. FlashAttention-2's: the kernels timed as
// FA2 (flash2, triton), and the best kernel (or cuDNN's) of a GPU before
// Hopper, where the best is FA2. Hopper and later run the FA3 class.
bool runs_flash2(const GpuSpec& gpu, AttentionKernel kernel) {
    if (kernel == AttentionKernel::flash2 || kernel == AttentionKernel::triton) return true;
    return gpu.architecture != "hopper" && gpu.architecture != "blackwell";
}

// §3: one CTA's tile, query rows x key columns. FA3's forward tiles by
// head_dim for the best kernel on Hopper (its own source's table); block x
// block for every other kernel, the backward and cuDNN's included.
std::pair<double, double> attention_tile(const GpuSpec& gpu, const KernelDesc& kd) {
    const AttentionFit& fit = gpu.attention_fit;
    if (kd.attention_kernel == AttentionKernel::best && !kd.backward && kd.k > 0 && gpu.architecture == "hopper")
        for (const auto& t : fit.flash3_tiles)
            if (kd.k <= t.head_dim) return {t.block_m, t.block_n};
    return {fit.block, fit.block};
}

// §3: fused attention. Compute at the attention ceiling scaled by head_dim,
// kv length, the causal diagonal, waves and the backward share.
// The shape constants are GpuSpec::attention_fit (topologies/kernels/
// flash-attention.yaml, fitted on kernel measurements).
Work attention_work(const GpuSpec& gpu, const KernelDesc& kd) {
    const AttentionFit& fit = gpu.attention_fit;
    if (!(fit.block > 0) || !(fit.ref_head_dim > 0) || !(fit.backward_share > 0))
        throw ModelError(
            fmt::format("GPU {} has no attention fit (topologies/kernels/flash-attention.yaml)", gpu.name));
    const double ceiling = gpu.gemm_ceiling(kd.dtype);
    const double best = gpu.efficiency.attention.value_or(fit.default_share * ceiling);
    const double flash2 = gpu.efficiency.attention_flash2.value_or(best);
    const bool fa2 = runs_flash2(gpu, kd.attention_kernel);
    double share = best;
    if (kd.attention_kernel == AttentionKernel::flash2) share = flash2;
    if (kd.attention_kernel == AttentionKernel::triton)
        share = flash2 / (kd.backward ? fit.triton_backward : fit.triton_forward);
    double eff = share;
    if (kd.k > 0) {
        const double d = static_cast<double>(kd.k);
        const double d0 = fa2 ? fit.head_dim0_flash2 : fit.head_dim0;
        eff = share * (d / (d + d0)) / (fit.ref_head_dim / (fit.ref_head_dim + d0));
    }
    eff = std::min(eff, ceiling);
    const double m = static_cast<double>(kd.m);
    if (kd.n > 0) {
        const double n = static_cast<double>(kd.n);
        const double kv = kd.causal && kd.m > 0 ? std::max(1.0, n - m / 2.0) : n;
        eff *= kv / (kv + (kd.backward ? fit.seq0_backward : fit.seq0));
    }
    const auto [bm, bn] = attention_tile(gpu, kd);
    if (kd.causal && m >= bm) {
        // A query block of bm rows computes whole key blocks of bn up to its
        // last row: bm/2 keys a row past the diagonal, plus the last key
        // block's overhang, (bn - gcd(bm, bn))/2 on average; a row's useful
        // keys average m/2.
        const double g = static_cast<double>(std::gcd(static_cast<std::int64_t>(bm), static_cast<std::int64_t>(bn)));
        const double excess = bm / 2.0 + (bn - g) / 2.0;
        eff *= m / (m + 2.0 * excess);
    }
    if (kd.m >= 64 && kd.batch > 0) {
        const std::int64_t ctas = count(kd, kd.batch, ceil_div(kd.m, static_cast<std::int64_t>(bm)));
        const std::int64_t waves = ceil_div(ctas, gpu.sm_count);
        eff *= static_cast<double>(ctas) / (static_cast<double>(waves) * gpu.sm_count);
    }
    if (kd.backward) eff *= fit.backward_share;
    Work w;
    w.flops = kernel_flops(kd);
    w.efficiency = eff;
    w.rate = gpu.peak_of(kd.dtype).per_s;
    w.hbm_read = kd.bytes_read.as_double();
    w.hbm_write = kd.bytes_written.as_double();
    w.l2 = w.hbm_read + w.hbm_write;
    return w;
}

// §4: memory-bound kernels run their few FLOPs on the CUDA cores (FP32
// vector peak) and move every byte once through L2 and HBM.
Work streaming_work(const GpuSpec& gpu, const KernelDesc& kd) {
    Work w;
    w.flops = kernel_flops(kd);
    w.efficiency = 1.0;
    w.rate = gpu.supports(DType::fp32) ? gpu.peak_of(DType::fp32).per_s : gpu.peak_of(kd.dtype).per_s;
    w.hbm_read = kd.bytes_read.as_double();
    w.hbm_write = kd.bytes_written.as_double();
    w.l2 = w.hbm_read + w.hbm_write;
    return w;
}

class RooflineCostModel final : public CostModel {
public:
    explicit RooflineCostModel(bool search) : search_(search) {}
    std::string name() const override { return search_ ? "roofline" : "roofline-fixed-tile"; }

    KernelCost cost(const GpuSpec& gpu, const KernelDesc& kd, const L2Residency& l2) const override {
        check(gpu.sm_count > 0, "GPU spec without SMs");
        check(kd.hbm_share > 0.0 && kd.hbm_share <= 1.0, "a kernel's share of the streaming rate is in (0, 1]");
        gpu.peak_of(kd.dtype);  // every kind: an unsupported dtype is an error
        KernelCost c;
        Work w;
        switch (kd.kind) {
            case KernelKind::gemm:
                if (has_gemm_shape(kd)) {
                    const GemmPlan p = search_ ? choose_gemm_plan(gpu, kd)
                                               : evaluate_gemm_plan(gpu, kd, gpu.gemm_tile_m, gpu.gemm_tile_n, 1);
                    w.flops = kernel_flops(kd);
                    w.efficiency = p.efficiency;
                    w.rate = gpu.peak_of(kd.dtype).per_s;
                    w.hbm_read = p.hbm_read_bytes;
                    w.hbm_write = p.hbm_write_bytes;
                    w.l2 = p.l2_request_bytes;
                    c.tile_m = p.tile_m;
                    c.tile_n = p.tile_n;
                    c.split_k = p.split_k;
                    c.waves = p.waves;
                } else {
                    w = streaming_work(gpu, kd);
                    w.efficiency = gemm_ceiling(gpu, kd);
                    w.rate = gpu.peak_of(kd.dtype).per_s;
                }
                break;
            case KernelKind::attention: w = attention_work(gpu, kd); break;
            case KernelKind::elementwise:
            case KernelKind::embedding:
            case KernelKind::communication: w = streaming_work(gpu, kd); break;
        }
        const double hbm = std::max(0.0, w.hbm_read - l2.resident_read_bytes.as_double()) + w.hbm_write;
        // The fixed part of the kernel's time: neither a stack's kernel_efficiency nor
        // communication beside it stretches it (exec/executor.cpp).
        c.launch_overhead = gpu.efficiency.launch_overhead;
        if (grouped_kernel(kd)) c.launch_overhead = c.launch_overhead + gpu.efficiency.grouped_setup;
        c.compute_efficiency = w.efficiency;
        c.compute_time = w.flops > 0 ? compute_time(Flops{w.flops}, FlopRate{w.rate * w.efficiency}) : Time{};
        if (kd.issue_instructions > 0.0 && gpu.tensor_clock_hz > 0.0)
            c.compute_time =
                std::max(c.compute_time,
                         Time::from_seconds_ceil(kd.issue_instructions / (static_cast<double>(gpu.sm_count) *
                                                                          hw::kIssueLanesPerSm * gpu.tensor_clock_hz)));
        c.hbm_bytes = Bytes::ceil(hbm);
        c.l2_request_bytes = Bytes::ceil(w.l2);
        c.memory_time = transfer_time(c.hbm_bytes, Bandwidth{sustained_hbm(gpu, kd)});
        c.l2_time = transfer_time(c.l2_request_bytes, Bandwidth{sustained_l2(gpu)});
        c.duration = c.launch_overhead + std::max({c.compute_time, c.memory_time, c.l2_time});
        if (kd.kind == KernelKind::gemm && has_gemm_shape(kd) && gpu.gemm_overlap > 0.0)
            c.duration =
                c.launch_overhead + Time::from_seconds_ceil(gemm_time(c.compute_time.seconds(), c.memory_time.seconds(),
                                                                      c.l2_time.seconds(), gpu.gemm_overlap));
        return c;
    }

private:
    bool search_;
};

struct Registered {
    const char* name;
    const char* description;
    std::unique_ptr<CostModel> (*make)();
};

const std::vector<Registered>& registry() {
    static const std::vector<Registered> models = {
        {"roofline", "roofline with measured efficiencies; GEMM tile and split-K chosen per shape",
         [] { return std::unique_ptr<CostModel>(new RooflineCostModel(true)); }},
        {"roofline-fixed-tile", "the same roofline, always with the GPU file's gemm_tile and no split-K",
         [] { return std::unique_ptr<CostModel>(new RooflineCostModel(false)); }},
    };
    return models;
}

}  // namespace

double GemmPlan::time_s() const { return gemm_time(compute_s, hbm_s, l2_s, overlap); }

// §2: a GEMM near the ridge point neither streams from HBM at the full
// rate nor computes at the full tensor rate: its loads and MMAs overlap
// imperfectly. An l_p norm of the compute and HBM times (max() as p grows);
// the L2 time stays a plain bound.
double gemm_time(double compute, double hbm, double l2, double overlap) {
    const double top = std::max(compute, hbm);
    if (overlap <= 0.0 || top <= 0.0) return std::max(top, l2);
    const auto term = [&](double t) { return std::pow(t / top, overlap); };
    return std::max(top * std::pow(term(compute) + term(hbm), 1.0 / overlap), l2);
}

// §2: one tiling of C[m,n] += A[m,k] B[k,n] (x batch).
GemmPlan evaluate_gemm_plan(const GpuSpec& gpu, const KernelDesc& kd, int tm, int tn, int s) {
    return evaluate_gemm_plan(gpu, kd, tm, tn, s, 1, 1);
}

GemmPlan evaluate_gemm_plan(const GpuSpec& gpu, const KernelDesc& kd, int tm, int tn, int s, int cm, int cn) {
    check(has_gemm_shape(kd), "GEMM plan for a kernel without m, n, k and batch");
    check(tm > 0 && tn > 0 && s >= 1, "GEMM plan with an empty tile or split");
    check(cm >= 1 && cn >= 1, "GEMM plan with an empty cluster");
    check(gpu.sm_count > 0, "GPU spec without SMs");
    const double peak = gpu.peak_of(kd.dtype).per_s;
    const double ceiling = gemm_ceiling(gpu, kd);
    const double e = bytes_per_element(kd.dtype);
    const std::int64_t m = kd.m, n = kd.n, k = kd.k, b = kd.batch;
    const double md = static_cast<double>(m), nd = static_cast<double>(n), kd_ = static_cast<double>(k),
                 bd = static_cast<double>(b), sm = static_cast<double>(gpu.sm_count);

    GemmPlan p;
    p.tile_m = tm;
    p.tile_n = tn;
    p.split_k = s;
    p.overlap = gpu.gemm_overlap;
    const std::int64_t tiles_m = ceil_div(m, tm), tiles_n = ceil_div(n, tn);
    // §2.7: a cluster's CTAs are scheduled together, so the tiles that run are whole
    // clusters (the padding tiles read nothing and compute zeros).
    const std::int64_t run_m = ceil_div(tiles_m, cm) * cm, run_n = ceil_div(tiles_n, cn) * cn;
    p.tiles = count(kd, count(kd, run_m, run_n), b, s);
    p.waves = ceil_div(p.tiles, gpu.sm_count);
    p.wave_eff = static_cast<double>(p.tiles) / (static_cast<double>(p.waves) * sm);
    p.fill_eff = md * nd / (static_cast<double>(count(kd, run_m, tm)) * static_cast<double>(count(kd, run_n, tn)));
    const std::int64_t k_split = ceil_div(k, s);
    const double ks = static_cast<double>(k_split);
    p.k_eff = kd_ / (ks * s) * ks / (ks + gpu.k0_of(kd.dtype));
    p.efficiency = ceiling * p.wave_eff * p.fill_eff * p.k_eff;
    p.compute_s = kernel_flops(kd) / (peak * p.efficiency);

    // Traffic. Shape bytes use the dtype's element size; the workload's own
    // compulsory bytes (which may mix dtypes) scale them.
    const double a_bytes = md * kd_ * e, b_bytes = kd_ * nd * e;
    const double footprint = a_bytes + b_bytes;  // per batch element
    // Epilogue reads (an accumulated C, a bias) are read once, not per tile.
    const double epilogue = std::min(kd.epilogue_read.as_double(), kd.bytes_read.as_double());
    const double operand_read = kd.bytes_read.as_double() - epilogue;
    const double given_read = operand_read > 0 ? operand_read : footprint * bd;
    const double scale = given_read / (footprint * bd);
    const double out_bytes = kd.bytes_written.value > 0 ? kd.bytes_written.as_double() : md * nd * e * bd;
    const std::int64_t cluster = std::max(1, gpu.gemm_cluster);
    const double b_panel_reads = static_cast<double>(ceil_div(tiles_m, cluster));
    const double l2_reads = a_bytes * static_cast<double>(tiles_n) + b_bytes * b_panel_reads;  // per batch
    const double partials = s > 1 ? static_cast<double>(s) * md * nd * kAccumBytes * bd : 0.0;

    const double l2_size = gpu.l2_size.as_double();
    double reads = footprint;
    if (footprint > l2_size) {
        // The output tiles one wave computes, as a block of rows_w x cols_w
        // tiles about square in elements (of the tiles that run: a cluster's
        // padding tiles hold SMs too, §2.7).
        const double run_tiles = static_cast<double>(run_m) * static_cast<double>(run_n);
        const double w_out = std::min(run_tiles, std::max(1.0, std::floor(sm / s)));
        const double rows_w = std::clamp(std::round(std::sqrt(w_out * tn / tm)), 1.0, static_cast<double>(run_m));
        const double cols_w = std::min(static_cast<double>(run_n), std::ceil(w_out / rows_w));
        const double wave_set = (std::min(rows_w * tm, md) + std::min(cols_w * tn, nd)) * kd_ * e;
        if (wave_set <= l2_size) {
            // A wave's panels fit: one operand's block stays resident while
            // the other streams, once per block.
            reads = std::min(a_bytes + b_bytes * std::ceil(static_cast<double>(tiles_m) / rows_w),
                             b_bytes + a_bytes * std::ceil(static_cast<double>(tiles_n) / cols_w));
        } else {
            // They do not: every wave fetches its own panels.
            reads = std::ceil(run_tiles / w_out) * wave_set;
        }
        reads = std::clamp(reads, footprint, l2_reads);
    }
    p.l2_request_bytes = l2_reads * bd * scale + epilogue + out_bytes + 2.0 * partials;
    p.hbm_read_bytes = reads * bd * scale + epilogue + (partials > l2_size ? partials : 0.0);
    p.hbm_write_bytes = out_bytes + (partials > l2_size ? partials : 0.0);
    p.hbm_s = per_s(p.hbm_read_bytes + p.hbm_write_bytes, sustained_hbm(gpu, kd));
    p.l2_s = per_s(p.l2_request_bytes, sustained_l2(gpu));
    return p;
}

// §2.7: PyTorch's dispatch of CUTLASS's grouped FP8 kernel on Hopper (torch._scaled_grouped_mm
// with fast accumulation; pytorch/pytorch@017943b7:aten/src/ATen/native/cuda/ScaledGroupMM.cu,
// dispatch_fp8_grouped_gemm_on_tile_size), on the mean rows of a group: a small GEMM (m or n at
// most 128) takes 64 x 128 tiles, a large one (two of m, n, k at least 2,048) 256 x 128, any other
// 128 x 256; every one in clusters of 2 x 2 CTAs, whose multiples CUTLASS's group scheduler rounds
// each group's tile counts up to (PersistentTileSchedulerSm90Group).
std::optional<FixedTiling> fixed_tiling(const GpuSpec& gpu, const KernelDesc& kd) {
    if (kd.kind != KernelKind::gemm || !kd.grouped || kd.dtype != DType::fp8 || kd.grouped_dense_ceiling ||
        kd.ceiling > 0.0 || gpu.architecture != "hopper")
        return std::nullopt;
    constexpr std::int64_t kSmall = 128, kLarge = 2048;
    constexpr int kCluster = 2;
    const bool small = kd.m <= kSmall || kd.n <= kSmall;
    const int large_dims = (kd.m >= kLarge) + (kd.n >= kLarge) + (kd.k >= kLarge);
    if (small) return FixedTiling{64, 128, kCluster, kCluster};
    if (large_dims >= 2) return FixedTiling{256, 128, kCluster, kCluster};
    return FixedTiling{128, 256, kCluster, kCluster};
}

GemmPlan choose_gemm_plan(const GpuSpec& gpu, const KernelDesc& kd) {
    if (const auto f = fixed_tiling(gpu, kd))
        return evaluate_gemm_plan(gpu, kd, f->tile_m, f->tile_n, 1, f->cluster_m, f->cluster_n);
    GemmPlan best = evaluate_gemm_plan(gpu, kd, gpu.gemm_tile_m, gpu.gemm_tile_n, 1);
    // Fastest first; among equally fast plans (memory-bound GEMMs) the one
    // with the least compute time, then the earlier candidate.
    const auto consider = [&](int tm, int tn, int s) {
        const GemmPlan p = evaluate_gemm_plan(gpu, kd, tm, tn, s);
        const double t = p.time_s(), t_best = best.time_s();
        if (t < t_best * (1.0 - 1e-6) || (t <= t_best * (1.0 + 1e-6) && p.compute_s < best.compute_s * (1.0 - 1e-6)))
            best = p;
    };
    const int native_area = gpu.gemm_tile_m * gpu.gemm_tile_n;
    const std::vector<int> dims_m = tile_dims(gpu, kd.m), dims_n = tile_dims(gpu, kd.n);
    for (int tm : dims_m) {
        for (int tn : dims_n) {
            if (tm * tn > native_area) continue;
            consider(tm, tn, 1);
            const std::int64_t out = count(kd, ceil_div(kd.m, tm), ceil_div(kd.n, tn), kd.batch);
            if (out >= gpu.sm_count) continue;
            for (int s : {2, 4, 8, 16}) {
                if (ceil_div(kd.k, s) < kMinSplitK) break;
                consider(tm, tn, s);
            }
        }
    }
    return best;
}

std::unique_ptr<CostModel> make_roofline_cost_model() { return std::make_unique<RooflineCostModel>(true); }

std::unique_ptr<CostModel> make_cost_model(const std::string& name) {
    std::string names;
    for (const auto& r : registry()) {
        if (name == r.name) return r.make();
        names += (names.empty() ? "" : ", ") + std::string(r.name);
    }
    throw ModelError(fmt::format("unknown cost model '{}' (registered: {})", name, names));
}

std::vector<CostModelInfo> list_cost_models() {
    std::vector<CostModelInfo> out;
    for (const auto& r : registry()) out.push_back({r.name, r.description});
    return out;
}

}  // namespace sim::hw
