// Blackwell hardware: block-scaled dtypes (fp6, nvfp4, mxfp4) with their scale
// bytes, the B200 file's FP4 peak in the roofline, the NVL72 rack keeping a
// 72-GPU group on NVLink, and racks joined into a pod by rail. Expectations are written out by hand.
#include "sim/config/cluster_loader.h"
#include "sim/config/gpu_loader.h"
#include "sim/hw/cost_model.h"
#include "sim/net/topology.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>

TEST_SUITE_BEGIN("unit");

using namespace sim;
using namespace sim::hw;

namespace {

// An nvfp4 GEMM C[m,n] = A[m,k] B[k,n]: operands with their block scales, bf16 output.
KernelDesc nvfp4_gemm(std::int64_t m, std::int64_t n, std::int64_t k) {
    KernelDesc d;
    d.name = "gemm";
    d.kind = KernelKind::gemm;
    d.dtype = DType::nvfp4;
    d.m = m;
    d.n = n;
    d.k = k;
    d.flops = Flops{2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k)};
    d.bytes_read = Bytes::ceil(static_cast<double>(m * k + k * n) * 9.0 / 16.0);
    d.bytes_written = Bytes::ceil(static_cast<double>(m * n) * 2.0);
    return d;
}

}  // namespace

TEST_CASE("block-scaled dtypes pay one scale byte per block in bytes per element") {
    // NVFP4: 4-bit E2M1 + one E4M3 byte per 16 elements = 8 + 1 bytes per 16.
    CHECK(bytes_per_element(DType::nvfp4) == 9.0 / 16.0);
    // MXFP4: 4-bit E2M1 + one E8M0 byte per 32 elements = 16 + 1 bytes per 32.
    CHECK(bytes_per_element(DType::mxfp4) == 17.0 / 32.0);
    // MXFP6: 6-bit values + one E8M0 byte per 32 elements = 24 + 1 bytes per 32.
    CHECK(bytes_per_element(DType::fp6) == 25.0 / 32.0);
    CHECK(scale_block(DType::nvfp4) == 16);
    CHECK(scale_block(DType::mxfp4) == 32);
    CHECK(scale_block(DType::fp8) == 0);
    CHECK(bytes_per_element(DType::fp8) == 1.0);  // unscaled formats unchanged
    for (DType t : {DType::fp6, DType::nvfp4, DType::mxfp4}) {
        CHECK(parse_dtype(to_string(t)) == t);
        CHECK(is_low_precision(t));
    }
    CHECK_FALSE(parse_dtype("fp4").has_value());  // the scale layout must be named
}

TEST_CASE("B200 and GB200 have the block-scaled dtypes; Hopper files, which omit them, do not") {
    config::GpuCatalog catalog;
    const GpuSpec& b200 = catalog.get("b200");
    CHECK(b200.peak_of(DType::nvfp4).per_s == doctest::Approx(9000e12));
    CHECK(b200.peak_of(DType::fp6).per_s == doctest::Approx(4500e12));
    CHECK(catalog.get("gb200").peak_of(DType::mxfp4).per_s == doctest::Approx(10000e12));
    const GpuSpec& h100 = catalog.get("h100-sxm");
    for (DType t : {DType::fp6, DType::nvfp4, DType::mxfp4}) CHECK_FALSE(h100.supports(t));
    CHECK(h100.supported_dtypes() == "fp32, tf32, fp16, bf16, fp8, int8");
}

TEST_CASE("an NVFP4 GEMM on B200 costs what the roofline says by hand") {
    config::GpuCatalog catalog;
    const GpuSpec& g = catalog.get("b200");
    // 4 x 37 = 148 tiles of 128x256: exactly one wave on 148 SMs.
    KernelDesc d = nvfp4_gemm(4 * 128, 37 * 256, 16384);
    const auto model = make_cost_model("roofline-fixed-tile");
    const KernelCost c = model->cost(g, d, {});
    // One tile per SM: 2*128*256*k FLOPs at (9000 TF / 148 SMs) x ceiling 0.61 x k/(k+k0).
    const double k = 16384.0;
    const double tile_s = 2.0 * 128 * 256 * k / (9000e12 / 148 * 0.61 * (k / (k + kGemmK0)));
    CHECK(c.waves == 1);
    CHECK(c.compute_time.seconds() == doctest::Approx(tile_s).epsilon(1e-6));
    // At 9 PF the L2 may bind instead (l2.bandwidth is an assumption); the kernel never beats compute.
    CHECK(c.duration >= c.compute_time);
    // The same GEMM in fp8: half the peak at fp8's own ceiling (MAMF 0.763 against FP4's measured 0.61).
    d.dtype = DType::fp8;
    CHECK(model->cost(g, d, {}).compute_time.seconds() == doctest::Approx(2.0 * tile_s * 0.61 / 0.763).epsilon(1e-6));
}

TEST_CASE("B200's FP4 ceiling and launch overhead give back the kernel times they were fitted on, by hand") {
    config::GpuCatalog catalog;
    const GpuSpec& g = catalog.get("b200");
    const auto model = make_cost_model("roofline");
    // cuBLAS MXFP4 8192^3 on B200, 5239 TF (tests/data/validation/gemm-blackwell.yaml): 2 x 8192^3 / 5239 TF = 209.9 us.
    // 128x256 tiles: 64 x 32 = 2048 tiles in ceil(2048 / 148) = 14 waves, wave_eff 2048 / (14 x 148);
    // k_eff = 8192 / (8192 + 64); efficiency 0.61 x wave_eff x k_eff = 0.5983.
    KernelDesc d = nvfp4_gemm(8192, 8192, 8192);
    d.dtype = DType::mxfp4;
    d.bytes_read = Bytes::ceil(2.0 * 8192.0 * 8192.0 * 17.0 / 32.0);
    const KernelCost c = model->cost(g, d, {});
    const double eff = 0.61 * (2048.0 / (14 * 148)) * (8192.0 / (8192.0 + kGemmK0));
    CHECK(c.waves == 14);
    CHECK(c.compute_efficiency == doctest::Approx(eff).epsilon(1e-9));
    CHECK(c.compute_bound());
    // In microseconds: doctest's Approx adds its epsilon to 1, so seconds would pass within a microsecond.
    const double t_us = 5.4 + 2.0 * 8192.0 * 8192.0 * 8192.0 / (9000e12 * eff) * 1e6;
    CHECK(c.duration.seconds() * 1e6 == doctest::Approx(t_us).epsilon(1e-6));
    CHECK(c.duration.seconds() * 1e6 == doctest::Approx(209.9).epsilon(0.005));  // the measurement, within 0.5%
    // A 256^3 BF16 GEMM is its launch overhead and little else: 5.4 us fitted on XLA's sm_100 kernel
    // times, whose 256^3 BF16 GEMM took 4.96 us (the fit trades the smallest against the mid-size ones).
    KernelDesc tiny = nvfp4_gemm(256, 256, 256);
    tiny.dtype = DType::bf16;
    tiny.bytes_read = Bytes::ceil(2.0 * 256 * 256 * 2.0);
    const KernelCost ct = model->cost(g, tiny, {});
    CHECK(ct.launch_overhead.seconds() * 1e6 == doctest::Approx(5.4));
    const double body_us = std::max({ct.compute_time.seconds(), ct.memory_time.seconds(), ct.l2_time.seconds()}) * 1e6;
    CHECK(ct.duration.seconds() * 1e6 == doctest::Approx(5.4 + body_us).epsilon(1e-6));
    CHECK(body_us < 0.5);
    // GB200 carries both from B200 (the same die; no GB200 kernel time outside Azure's unseen table).
    const GpuSpec& gb = catalog.get("gb200");
    CHECK(gb.efficiency.launch_overhead == g.efficiency.launch_overhead);
    CHECK(gb.gemm_ceiling(DType::nvfp4) == doctest::Approx(0.61));
    CHECK(gb.gemm_ceiling(DType::mxfp4) == doctest::Approx(0.61));
}

TEST_CASE("a large BF16 GEMM on B200 reaches its measured ceiling: the L2 rate is the least that allows it") {
    config::GpuCatalog catalog;
    const GpuSpec& g = catalog.get("b200");
    KernelDesc d = nvfp4_gemm(16384, 16384, 16384);
    d.dtype = DType::bf16;
    const double n = 16384.0;
    d.bytes_read = Bytes::ceil(2.0 * n * n * 2.0);
    const KernelCost c = make_cost_model("roofline")->cost(g, d, {});
    // docs/hardware-model.md §2.4, "Blackwell L2": 1745e12 x 2/256 / 0.8 = 17041 GB/s.
    CHECK(g.l2_bandwidth.bytes_per_s == doctest::Approx(1745e12 * 2.0 / 256.0 / 0.8).epsilon(1e-4));
    CHECK(c.tile_m == 128);
    CHECK(c.tile_n == 256);
    // 128x256 tiles in 2-CTA clusters request 2mnk x 2/256 bytes of L2 (A once per tile column,
    // B once per two tile rows), plus the 2-byte output.
    const double l2_bytes = 2.0 * n * n * n * 2.0 / 256.0 + n * n * 2.0;
    CHECK(c.l2_request_bytes.as_double() == doctest::Approx(l2_bytes).epsilon(1e-6));
    CHECK(c.l2_time.seconds() == doctest::Approx(l2_bytes / (17041e9 * 0.8)).epsilon(1e-3));
    // Compute binds, at no more than the MAMF ceiling: 2n^3 / (2250 TF x 0.776) = 5.04 ms at least.
    CHECK(c.compute_bound());
    CHECK(c.compute_time.seconds() >= 2.0 * n * n * n / (2250e12 * 0.776) * (1.0 - 1e-9));
}

TEST_CASE("an NVFP4 decode GEMV on B200 reads weights and their scales from HBM") {
    config::GpuCatalog catalog;
    const GpuSpec& g = catalog.get("b200");
    const KernelDesc d = nvfp4_gemm(1, 8192, 8192);
    const KernelCost c = make_cost_model("roofline")->cost(g, d, {});
    // 8192^2 x 9/16 B = 37.7 MB at 7700 GB/s x 0.91 = 5.39 us, plus the 5.5 us launch.
    const double expected_us = 5.5 + 8192.0 * 8192.0 * 9.0 / 16.0 / (7700e9 * 0.91) * 1e6;
    CHECK(c.duration.us_f() == doctest::Approx(expected_us).epsilon(0.01));
    CHECK_FALSE(c.compute_bound());
}

TEST_CASE("a 72-GPU group on GB200 NVL72 stays on NVLink: no network link on any route") {
    const net::ClusterSpec spec = config::load_cluster_file(config::cluster_path("gb200-nvl72"));
    CHECK(spec.gpus_per_node == 72);
    const net::Topology t(spec, 72);
    int routes = 0;
    for (int a = 0; a < 72; ++a) {
        for (int b = 0; b < 72; ++b) {
            if (a == b) continue;
            const auto& r = t.route(a, b);
            CHECK(!r.empty());
            for (auto id : r) {
                if (t.link(id).cls != net::LinkClass::nvlink)
                    FAIL_CHECK("route " << a << " -> " << b << " leaves NVLink");
            }
            ++routes;
        }
    }
    CHECK(routes == 72 * 71);
}

TEST_CASE("a two-rack NVL72 pod: NVLink inside a rack, the rail's leaf between racks, PXN across rails") {
    const net::ClusterSpec spec = config::load_cluster_file(config::cluster_path("gb200-nvl72-pod"));
    CHECK(spec.gpus_per_node == 72);
    CHECK(spec.nics_per_node == 72);
    const net::Topology t(spec, 144);
    auto count = [&](int a, int b, net::LinkClass cls) {
        int n = 0;
        for (auto id : t.route(a, b)) n += t.link(id).cls == cls ? 1 : 0;
        return n;
    };
    // Inside either rack: NVLink only.
    for (int a : {0, 72}) {
        for (int b = a + 1; b < a + 72; ++b) {
            CAPTURE(a);
            CAPTURE(b);
            CHECK(count(a, b, net::LinkClass::network) == 0);
        }
    }
    // GPU 5 of rack 0 to GPU 5 of rack 1: the same rail, network only (no NVLink detour).
    CHECK(count(5, 77, net::LinkClass::network) > 0);
    CHECK(count(5, 77, net::LinkClass::nvlink) == 0);
    // GPU 5 to GPU 6 of the other rack: PXN moves it over NVLink to rail 6 first.
    CHECK(count(5, 78, net::LinkClass::network) > 0);
    CHECK(count(5, 78, net::LinkClass::nvlink) > 0);
}

TEST_SUITE_END();
