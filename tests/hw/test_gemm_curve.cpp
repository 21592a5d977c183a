// The fitted GEMM efficiency curve (docs/hardware-model.md §2.6): the
// per-GPU pipeline depth k0 and the soft roofline of compute and HBM time.
// Each case states its hand-computed answer.
#include "sim/config/gpu_loader.h"
#include "sim/config/yaml_reader.h"
#include "sim/core/error.h"
#include "sim/hw/cost_model.h"
#include "sim/hw/gemm_tiling.h"
#include "tests/hw/hw_test_gpus.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

TEST_SUITE_BEGIN("unit");

using namespace sim;
using namespace sim::hw;

using test::dense_gemm;

TEST_CASE("gemm_time: max() without overlap, the l_p norm of compute and HBM with it, L2 a plain bound") {
    CHECK(gemm_time(3.0, 4.0, 1.0, 0.0) == 4.0);
    CHECK(gemm_time(3.0, 4.0, 1.0, 2.0) == doctest::Approx(5.0));  // sqrt(9 + 16)
    CHECK(gemm_time(3.0, 4.0, 6.0, 2.0) == doctest::Approx(6.0));  // L2 bound above the norm
    CHECK(gemm_time(1.0, 1.0, 0.0, 1.0) == doctest::Approx(2.0));  // p = 1: no overlap at all
    CHECK(gemm_time(1.0, 1.0, 0.0, 4.0) == doctest::Approx(std::pow(2.0, 0.25)));
    CHECK(gemm_time(2.0, 0.0, 0.0, 3.0) == doctest::Approx(2.0));  // nothing to overlap with
    CHECK(gemm_time(0.0, 0.0, 0.0, 3.0) == 0.0);
}

TEST_CASE("k0 from the GPU sets the pipeline loss of the k loop") {
    GpuSpec g = test::h100();
    g.gemm_k0 = 128.0;
    // 12 x 11 = 132 tiles of 128x256: one full wave, no padding; k = 384 -> k_eff = 384 / (384 + 128) = 0.75.
    const GemmPlan p = evaluate_gemm_plan(g, dense_gemm(12 * 128, 11 * 256, 384), 128, 256, 1);
    CHECK(p.waves == 1);
    CHECK(p.k_eff == doctest::Approx(0.75));
    CHECK(p.efficiency == doctest::Approx(0.803 * 0.75));
    g.gemm_k0 = 0.0;
    CHECK(evaluate_gemm_plan(g, dense_gemm(12 * 128, 11 * 256, 384), 128, 256, 1).k_eff == doctest::Approx(1.0));
}

TEST_CASE("a grouped GEMM streams memory at efficiency.hbm_grouped, a plain one at hbm (docs/moe.md section 4)") {
    GpuSpec g = test::h100();  // 3350 GB/s, hbm 0.91
    g.gemm_overlap = 0.0;      // max(): the memory time alone sets a memory-bound kernel
    // 8 experts of a 4096 x 4096 BF16 weight, one token each: 8 x 2 x 4096 x 4096 bytes of weights.
    KernelDesc k = dense_gemm(1, 4096, 4096);
    k.batch = 8;
    k.flops = Flops{8 * k.flops.value};
    k.bytes_read = Bytes{8 * k.bytes_read.value};
    k.bytes_written = Bytes{8 * k.bytes_written.value};
    const auto cm = make_cost_model("roofline");
    const KernelCost plain = cm->cost(g, k, {});
    k.grouped = true;
    CHECK(cm->cost(g, k, {}).memory_time == plain.memory_time);  // no hbm_grouped: hbm
    g.efficiency.hbm_grouped = 0.5;
    const KernelCost grouped = cm->cost(g, k, {});
    CHECK(grouped.hbm_bytes == plain.hbm_bytes);
    // The same bytes at 0.5 instead of 0.91 of 3350 GB/s.
    CHECK(grouped.memory_time.seconds() == doctest::Approx(plain.hbm_bytes.as_double() / (3350e9 * 0.5)).epsilon(1e-6));
    CHECK(plain.memory_time.seconds() == doctest::Approx(plain.hbm_bytes.as_double() / (3350e9 * 0.91)).epsilon(1e-6));
    CHECK(grouped.duration - grouped.launch_overhead == grouped.memory_time);
    k.grouped = false;  // a batched GEMM that is not grouped keeps hbm
    CHECK(cm->cost(g, k, {}).memory_time == plain.memory_time);
}

TEST_CASE("a grouped call pays efficiency.grouped_setup once beside its launch: launch + setup + bytes / rate") {
    GpuSpec g = test::h100();  // launch 4 us
    g.gemm_overlap = 0.0;      // max(): the memory time alone sets a memory-bound kernel
    g.memory_bandwidth = Bandwidth{4e12};
    g.efficiency.hbm_grouped = 0.5;  // 2 TB/s
    g.efficiency.grouped_setup = Time::us(7);
    // 8 experts of a 4096 x 4096 BF16 weight, one token each: each reads 2 x (4096 + 4096^2) bytes
    // and writes 2 x 4096 (33.6 MB an expert, inside the 50 MiB L2: read once), 8 x 33 570 816
    // = 268 566 528 bytes in all, 134.283264 us at 2 TB/s. Whatever the groups and bytes, 7 us more.
    KernelDesc k = dense_gemm(1, 4096, 4096);
    k.batch = 8;
    k.flops = Flops{8 * k.flops.value};
    k.bytes_read = Bytes{8 * k.bytes_read.value};
    k.bytes_written = Bytes{8 * k.bytes_written.value};
    k.grouped = true;
    const auto cm = make_cost_model("roofline");
    const KernelCost c = cm->cost(g, k, {});
    CHECK(c.hbm_bytes.value == 268566528ULL);
    CHECK(c.memory_time == Time::ps(134283264));
    CHECK(c.launch_overhead == Time::us(11));
    CHECK(c.duration == Time::us(11) + Time::ps(134283264));
    // The setup goes with the rate it was fitted beside: a stack's own grouped kernel (vLLM's
    // Triton MoE) takes both; a plain batched GEMM and DeepGEMM's family (a dense kernel with a
    // scheduler over the groups) neither: 4 us and 268 566 528 B at 0.91 x 4 TB/s, 73.782 us.
    KernelDesc other = k;
    other.ceiling = 0.5;
    CHECK(cm->cost(g, other, {}).duration == Time::us(11) + Time::ps(134283264));
    other = k;
    other.grouped = false;
    CHECK(cm->cost(g, other, {}).launch_overhead == Time::us(4));
    other = k;
    other.grouped_dense_ceiling = true;
    const KernelCost dense = cm->cost(g, other, {});
    CHECK(dense.launch_overhead == Time::us(4));
    CHECK(dense.memory_time == Time::from_seconds_ceil(268566528.0 / (0.91 * 4e12)));
    g.efficiency.grouped_setup = Time{};  // no key: no setup
    CHECK(cm->cost(g, k, {}).duration == Time::us(4) + Time::ps(134283264));
}

TEST_CASE("a grouped FP8 GEMM computes at efficiency.gemm_grouped_fp8, unless its family runs at the dense rate") {
    GpuSpec g = test::h100();  // FP8 1978.9 TF, gemm.fp8 0.709
    g.gemm_k0 = 0.0;           // k_eff 1: the ceiling alone is left
    g.gemm_k0_fp8 = 0.0;
    // 12 x 11 experts of one 128 x 256 tile each: 132 tiles, one full wave, no padding.
    KernelDesc k = dense_gemm(128, 256, 4096);
    k.dtype = DType::fp8;
    k.batch = 132;
    k.flops = Flops{132 * k.flops.value};
    k.grouped = true;
    CHECK(evaluate_gemm_plan(g, k, 128, 256, 1).efficiency == doctest::Approx(0.709));  // no key: dense
    g.efficiency.gemm_grouped_fp8 = 0.6;
    const GemmPlan p = evaluate_gemm_plan(g, k, 128, 256, 1);
    CHECK(p.efficiency == doctest::Approx(0.6));
    // 2 x 132 x 128 x 256 x 4096 = 3.543e10 FLOPs at 0.6 x 1978.9 TF: 29.8 us (24.5 at the dense 0.709).
    CHECK(p.compute_s * 1e6 == doctest::Approx(29.84).epsilon(1e-3));
    k.grouped_dense_ceiling = true;  // DeepGEMM's m-grouped kernel: the dense ceiling
    CHECK(evaluate_gemm_plan(g, k, 128, 256, 1).efficiency == doctest::Approx(0.709));
    k.grouped_dense_ceiling = false;
    k.ceiling = 0.3;  // a stack's own FP8 ceiling comes first
    CHECK(evaluate_gemm_plan(g, k, 128, 256, 1).efficiency == doctest::Approx(0.3));
    k.ceiling = 0.0;
    k.grouped = false;  // a plain batched FP8 GEMM keeps the dense ceiling
    CHECK(evaluate_gemm_plan(g, k, 128, 256, 1).efficiency == doctest::Approx(0.709));
    k.grouped = true;
    k.dtype = DType::bf16;  // BF16 grouped GEMMs keep gemm.bf16 (0.803)
    CHECK(evaluate_gemm_plan(g, k, 128, 256, 1).efficiency == doctest::Approx(0.803));
}

namespace {
// G experts of one grouped FP8 GEMM of m x n x k each (the cutlass family).
KernelDesc grouped_fp8(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t groups) {
    KernelDesc d = dense_gemm(m, n, k, DType::fp8);
    d.batch = groups;
    d.flops = Flops{static_cast<double>(groups) * d.flops.value};
    d.grouped = true;
    return d;
}
}  // namespace

TEST_CASE("a cluster rounds each GEMM's tile counts up to whole clusters, and the padding computes") {
    GpuSpec g = test::h100();
    g.gemm_k0_fp8 = 0.0;  // k_eff 1
    // m 100, n 300 in 64 x 128 tiles: 2 x 3 tiles; clusters of 2 x 2 run 2 x 4 of them.
    const KernelDesc k = dense_gemm(100, 300, 4096, DType::fp8);
    const GemmPlan plain = evaluate_gemm_plan(g, k, 64, 128, 1);
    const GemmPlan clustered = evaluate_gemm_plan(g, k, 64, 128, 1, 2, 2);
    CHECK(plain.tiles == 6);
    CHECK(clustered.tiles == 8);
    CHECK(plain.fill_eff == doctest::Approx(100.0 * 300.0 / (128.0 * 384.0)));      // 0.610
    CHECK(clustered.fill_eff == doctest::Approx(100.0 * 300.0 / (128.0 * 512.0)));  // 0.458
    CHECK(evaluate_gemm_plan(g, k, 64, 128, 1, 1, 1).tiles == plain.tiles);         // 1 x 1: no cluster
}

TEST_CASE("CUTLASS's grouped FP8 kernel runs PyTorch's tile in 2 x 2 clusters: 256 rows an expert cost 512") {
    GpuSpec g = test::h100();  // hopper, 132 SMs
    g.gemm_k0_fp8 = 0.0;
    g.efficiency.gemm_grouped_fp8 = 0.6;
    // DeepSeek-V3's up projection, 4 experts: n 4096 and k 7168 are both >= 2048, so from 129 rows
    // a group it is "large": 256 x 128 tiles. 256 rows: 1 tile row, 2 with the cluster's padding;
    // 32 tile columns; 4 x 2 x 32 = 256 CTAs in 2 waves of 132 (wave_eff 256 / 264), fill 256 / 512.
    const KernelDesc k256 = grouped_fp8(256, 4096, 7168, 4);
    const auto t = fixed_tiling(g, k256);
    REQUIRE(t.has_value());
    CHECK(t->tile_m == 256);
    CHECK(t->tile_n == 128);
    CHECK(t->cluster_m == 2);
    CHECK(t->cluster_n == 2);
    const GemmPlan p256 = choose_gemm_plan(g, k256);
    CHECK(p256.tile_m == 256);
    CHECK(p256.split_k == 1);
    CHECK(p256.tiles == 256);
    CHECK(p256.wave_eff == doctest::Approx(256.0 / 264.0));
    CHECK(p256.fill_eff == doctest::Approx(0.5));
    CHECK(p256.efficiency == doctest::Approx(0.6 * 256.0 / 264.0 * 0.5));  // 0.291
    // 512 rows run the same 256 CTAs, full: twice the FLOPs in the same compute time.
    const GemmPlan p512 = choose_gemm_plan(g, grouped_fp8(512, 4096, 7168, 4));
    CHECK(p512.fill_eff == doctest::Approx(1.0));
    CHECK(p512.compute_s == doctest::Approx(p256.compute_s));
    // 2 x 4 x 256 x 4096 x 7168 FLOPs at 0.291 x 1978.9 TF: 104.45 us.
    CHECK(p256.compute_s * 1e6 == doctest::Approx(104.45).epsilon(1e-3));
    // Small (m or n <= 128): 64 x 128; neither small nor large: 128 x 256.
    CHECK(fixed_tiling(g, grouped_fp8(128, 4096, 7168, 4))->tile_m == 64);
    CHECK(fixed_tiling(g, grouped_fp8(4096, 128, 7168, 4))->tile_m == 64);
    CHECK(fixed_tiling(g, grouped_fp8(256, 2048, 768, 4))->tile_n == 256);   // only n >= 2048
    CHECK(fixed_tiling(g, grouped_fp8(2048, 2048, 768, 4))->tile_m == 256);  // m and n >= 2048
    // Only that kernel: not DeepGEMM's family, not a stack's own FP8 kernel, not BF16, not off Hopper.
    KernelDesc other = k256;
    other.grouped_dense_ceiling = true;
    CHECK_FALSE(fixed_tiling(g, other).has_value());
    other = k256;
    other.ceiling = 0.5;
    CHECK_FALSE(fixed_tiling(g, other).has_value());
    other = k256;
    other.dtype = DType::bf16;
    CHECK_FALSE(fixed_tiling(g, other).has_value());
    other = k256;
    other.grouped = false;
    CHECK_FALSE(fixed_tiling(g, other).has_value());
    GpuSpec b = g;
    b.architecture = "blackwell";
    CHECK_FALSE(fixed_tiling(b, k256).has_value());
    CHECK(choose_gemm_plan(b, k256).fill_eff == doctest::Approx(1.0));  // searched: a tile that fits 256
}

TEST_CASE("k0_fp8 sets the pipeline loss of FP8 GEMMs only") {
    GpuSpec g = test::h100();
    g.gemm_k0 = 128.0;
    g.gemm_k0_fp8 = 384.0;
    // The same one full wave of 132 tiles, k = 384: FP8 -> 384 / (384 + 384) = 0.5, BF16 keeps 0.75.
    KernelDesc k = dense_gemm(12 * 128, 11 * 256, 384);
    k.dtype = DType::fp8;
    const GemmPlan p = evaluate_gemm_plan(g, k, 128, 256, 1);
    CHECK(p.k_eff == doctest::Approx(0.5));
    CHECK(p.efficiency == doctest::Approx(g.gemm_ceiling(DType::fp8) * 0.5));
    CHECK(evaluate_gemm_plan(g, dense_gemm(12 * 128, 11 * 256, 384), 128, 256, 1).k_eff == doctest::Approx(0.75));
    g.gemm_k0_fp8 = -1.0;  // unset: FP8 uses k0
    CHECK(evaluate_gemm_plan(g, k, 128, 256, 1).k_eff == doctest::Approx(0.75));
}

TEST_CASE("a GEMM's duration with overlap p is launch + (compute^p + hbm^p)^(1/p)") {
    GpuSpec g = test::h100();
    const auto model = make_cost_model("roofline-fixed-tile");
    // 12 x 11 tiles, k = 8192: compute-bound with an HBM time of the same order.
    const KernelDesc k = dense_gemm(12 * 128, 11 * 256, 8192);
    const KernelCost plain = model->cost(g, k, {});
    g.gemm_overlap = 2.0;
    const KernelCost soft = model->cost(g, k, {});
    // The components are unchanged; only their combination is.
    CHECK(soft.compute_time == plain.compute_time);
    CHECK(soft.memory_time == plain.memory_time);
    const double c = plain.compute_time.seconds(), h = plain.memory_time.seconds();
    const double expect = std::sqrt(c * c + h * h);
    CHECK((soft.duration - soft.launch_overhead).seconds() == doctest::Approx(expect).epsilon(1e-9));
    CHECK(plain.duration - plain.launch_overhead == std::max({plain.compute_time, plain.memory_time, plain.l2_time}));
    CHECK(soft.duration > plain.duration);
}

TEST_CASE("overlap applies to GEMMs only: a streaming kernel keeps max()") {
    GpuSpec g = test::h100();
    g.gemm_overlap = 2.0;
    KernelDesc e;
    e.name = "add";
    e.kind = KernelKind::elementwise;
    e.dtype = DType::bf16;
    e.flops = Flops{1e9};
    e.bytes_read = Bytes{1ULL << 30};
    e.bytes_written = Bytes{1ULL << 30};
    const KernelCost c = make_cost_model("roofline")->cost(g, e, {});
    CHECK(c.duration - c.launch_overhead == std::max({c.compute_time, c.memory_time, c.l2_time}));
}

TEST_CASE("the GPU file's gemm_curve block: read, defaulted, and checked") {
    std::ifstream in(config::gpu_path("h100-sxm"));
    std::stringstream text;
    text << in.rdbuf();
    std::string base = text.str();
    const auto cut = base.find("\ngemm_curve:");
    if (cut != std::string::npos) base = base.substr(0, cut + 1);
    const auto load = [](const std::string& yaml) { return config::load_gpu(config::load_string(yaml, "gpu.yaml")); };
    SUBCASE("absent: the model before the curve (k0 64, max())") {
        const GpuSpec g = load(base);
        CHECK(g.gemm_k0 == 64.0);
        CHECK(g.gemm_overlap == 0.0);
    }
    SUBCASE("given") {
        const GpuSpec g = load(base + "gemm_curve: {k0: 80, overlap: 3}\n");
        CHECK(g.gemm_k0 == 80.0);
        CHECK(g.gemm_overlap == 3.0);
        CHECK(g.k0_of(DType::fp8) == 80.0);  // k0_fp8 absent: FP8 uses k0
    }
    SUBCASE("k0_fp8 given: FP8 GEMMs use it, other dtypes k0") {
        const GpuSpec g = load(base + "gemm_curve: {k0: 80, k0_fp8: 500}\n");
        CHECK(g.k0_of(DType::fp8) == 500.0);
        CHECK(g.k0_of(DType::bf16) == 80.0);
        CHECK_THROWS_AS(load(base + "gemm_curve: {k0_fp8: -5}\n"), ConfigError);
    }
    SUBCASE("an overlap in (0, 1) would speed a kernel up past max(): rejected") {
        CHECK_THROWS_AS(load(base + "gemm_curve: {overlap: 0.5}\n"), ConfigError);
    }
    SUBCASE("unknown keys are rejected") {
        CHECK_THROWS_AS(load(base + "gemm_curve: {k0: 80, tile_area0: 3}\n"), ConfigError);
    }
}

TEST_SUITE_END();
