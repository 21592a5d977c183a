// The H20 file (topologies/gpus/h20.yaml): its cut tensor rates and its
// HBM in the roofline, against hand computations.
#include "sim/config/gpu_loader.h"
#include "sim/hw/cost_model.h"

#include <doctest/doctest.h>

TEST_SUITE_BEGIN("unit");

using namespace sim;
using namespace sim::hw;

namespace {

KernelDesc bf16_gemm(std::int64_t m, std::int64_t n, std::int64_t k) {
    KernelDesc d;
    d.name = "gemm";
    d.kind = KernelKind::gemm;
    d.dtype = DType::bf16;
    d.m = m;
    d.n = n;
    d.k = k;
    d.flops = Flops{2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k)};
    d.bytes_read = Bytes::ceil(static_cast<double>(m * k + k * n) * 2.0);
    d.bytes_written = Bytes::ceil(static_cast<double>(m * n) * 2.0);
    return d;
}

}  // namespace

TEST_CASE("H20: Hopper dtypes at about 15% of the H100's rates, 96 GB at 4 TB/s") {
    config::GpuCatalog catalog;
    const GpuSpec& g = catalog.get("h20");
    CHECK(g.sm_count == 78);
    CHECK(g.peak_of(DType::bf16).per_s == doctest::Approx(148e12));
    CHECK(g.peak_of(DType::fp8).per_s == doctest::Approx(296e12));
    CHECK(g.peak_of(DType::bf16).per_s / catalog.get("h100-sxm").peak_of(DType::bf16).per_s ==
          doctest::Approx(0.1496).epsilon(0.001));
    CHECK(g.supported_dtypes() == "fp32, tf32, fp16, bf16, fp8, int8");
    CHECK(g.memory_capacity.as_double() == doctest::Approx(96.0 * 1024 * 1024 * 1024));
}

TEST_CASE("a BF16 GEMM on H20 costs what the roofline says by hand") {
    config::GpuCatalog catalog;
    const GpuSpec& g = catalog.get("h20");
    // 2 x 39 = 78 tiles of 128x256: one wave on 78 SMs.
    const KernelDesc d = bf16_gemm(2 * 128, 39 * 256, 16384);
    const KernelCost c = make_cost_model("roofline-fixed-tile")->cost(g, d, {});
    const double k = 16384.0;
    const double tile_s = 2.0 * 128 * 256 * k / (148e12 / 78 * 0.803 * (k / (k + kGemmK0)));
    CHECK(c.waves == 1);
    CHECK(c.compute_time.seconds() == doctest::Approx(tile_s).epsilon(1e-6));
}

TEST_CASE("a BF16 decode GEMV on H20 is bound by its 4 TB/s HBM") {
    config::GpuCatalog catalog;
    const KernelDesc d = bf16_gemm(1, 8192, 8192);
    const KernelCost c = make_cost_model("roofline")->cost(catalog.get("h20"), d, {});
    // 8192^2 x 2 B = 134.2 MB at 4000 GB/s x 0.91 = 36.9 us, plus the 5.5 us launch.
    const double expected_us = 5.5 + 8192.0 * 8192.0 * 2.0 / (4000e9 * 0.91) * 1e6;
    CHECK(c.duration.us_f() == doctest::Approx(expected_us).epsilon(0.01));
    CHECK_FALSE(c.compute_bound());
}

TEST_SUITE_END();
