// GPU specs built in code for the hw shape tests, so a change to a data file
// does not move the expectations. Figures are those of topologies/gpus/.
#pragma once

#include "sim/hw/gpu.h"
#include "sim/hw/kernel.h"

namespace sim::hw::test {

inline void set_peak(GpuSpec& g, DType t, double tflops) {
    g.peak[static_cast<std::size_t>(t)] = FlopRate{tflops * 1e12};
}
inline void set_ceiling(GpuSpec& g, DType t, double c) { g.efficiency.gemm[static_cast<std::size_t>(t)] = c; }

// H100 SXM5: 132 SMs, 989.4 TFLOP/s dense bf16, 3350 GB/s HBM3, 50 MiB L2.
inline GpuSpec h100() {
    GpuSpec g;
    g.name = "h100-test";
    g.architecture = "hopper";
    g.sm_count = 132;
    g.tensor_clock_hz = 1.83e9;
    set_peak(g, DType::fp32, 66.9);
    set_peak(g, DType::tf32, 494.7);
    set_peak(g, DType::fp16, 989.4);
    set_peak(g, DType::bf16, 989.4);
    set_peak(g, DType::fp8, 1978.9);
    set_peak(g, DType::int8, 1978.9);
    for (DType t : kAllDTypes) set_ceiling(g, t, 0.803);
    set_ceiling(g, DType::fp8, 0.709);
    set_ceiling(g, DType::int8, 0.709);
    g.memory_kind = "HBM3";
    g.memory_capacity = Bytes{80'000'000'000ULL};
    g.memory_bandwidth = Bandwidth{3350e9};
    g.l2_size = Bytes{50ULL << 20};
    g.l2_bandwidth = Bandwidth{9700e9};
    g.efficiency.hbm = 0.91;
    g.efficiency.l2 = 0.80;
    g.efficiency.launch_overhead = Time::us(4);
    g.efficiency.nccl_nvlink = 0.82;
    g.efficiency.nccl_pcie = 0.76;
    g.nvlink_generation = 4;
    g.nvlink_links = 18;
    g.nvlink_bandwidth = Bandwidth{450e9};
    g.pcie_generation = 5;
    g.pcie_bandwidth = Bandwidth{63e9};
    g.gemm_tile_m = 128;
    g.gemm_tile_n = 256;
    g.gemm_cluster = 2;
    // The flash-attention fit of topologies/kernels/flash-attention.yaml, with
    // FA3's head_dim half point and prologue for FlashAttention-2 and the
    // backward as well, and no FA3 tile table (block x block): the tests that
    // need FA2's own values or the table set them.
    g.attention_fit = AttentionFit{};
    g.attention_fit.block = 128;
    g.attention_fit.seq0 = 128;
    g.attention_fit.head_dim0 = 64;
    g.attention_fit.ref_head_dim = 128;
    g.attention_fit.backward_share = 0.85;
    g.attention_fit.default_share = 0.8;
    g.attention_fit.head_dim0_flash2 = 64;
    g.attention_fit.seq0_backward = 128;
    return g;
}

// T4: fp32, fp16 and int8 only.
inline GpuSpec t4() {
    GpuSpec g = h100();
    g.name = "t4-test";
    g.architecture = "turing";
    g.sm_count = 40;
    g.peak = {};
    g.efficiency.gemm = {};
    set_peak(g, DType::fp32, 8.1);
    set_peak(g, DType::fp16, 65);
    set_peak(g, DType::int8, 130);
    for (DType t : {DType::fp32, DType::fp16, DType::int8}) set_ceiling(g, t, 0.7);
    g.memory_bandwidth = Bandwidth{320e9};
    g.l2_size = Bytes{4ULL << 20};
    g.gemm_tile_m = 128;
    g.gemm_tile_n = 128;
    g.gemm_cluster = 1;
    return g;
}

// A dense GEMM C[m,n] = A[m,k] B[k,n] in `t`: 2mnk FLOPs, operands read and
// the output written once.
inline KernelDesc dense_gemm(std::int64_t m, std::int64_t n, std::int64_t k, DType t = DType::bf16) {
    KernelDesc d;
    d.name = "gemm";
    d.kind = KernelKind::gemm;
    d.dtype = t;
    d.m = m;
    d.n = n;
    d.k = k;
    const double e = bytes_per_element(t);
    d.flops = Flops{2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k)};
    d.bytes_read = Bytes::ceil(static_cast<double>(m * k + k * n) * e);
    d.bytes_written = Bytes::ceil(static_cast<double>(m * n) * e);
    return d;
}

}  // namespace sim::hw::test
