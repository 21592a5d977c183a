// Shape tests of the roofline cost model (docs/hardware-model.md): each case
// states the closed-form expectation next to the model's answer.
#include "sim/core/error.h"
#include "sim/hw/cost_model.h"
#include "tests/hw/hw_test_gpus.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim;
using namespace sim::hw;

namespace {

KernelDesc gemm(std::int64_t m, std::int64_t n, std::int64_t k, DType t = DType::bf16) {
    return test::dense_gemm(m, n, k, t);
}

// FlashAttention benchmark convention: 4*b*s^2*h*d FLOPs, halved if causal.
KernelDesc attention(std::int64_t b, std::int64_t h, std::int64_t d, std::int64_t s, bool causal) {
    KernelDesc k;
    k.name = "attention";
    k.kind = KernelKind::attention;
    k.dtype = DType::fp16;
    k.m = s;
    k.n = s;
    k.k = d;
    k.batch = b * h;
    k.causal = causal;
    const double bsd = static_cast<double>(b * s * h * d);
    k.flops = Flops{4.0 * bsd * static_cast<double>(s) / (causal ? 2.0 : 1.0)};
    k.bytes_read = Bytes::ceil(3.0 * bsd * 2.0);
    k.bytes_written = Bytes::ceil(bsd * 2.0);
    return k;
}

double achieved_share(const GpuSpec& g, const KernelDesc& k, const KernelCost& c) {
    return k.flops.value / c.duration.seconds() / g.peak_of(k.dtype).per_s;
}

double body_us(const KernelCost& c) { return (c.duration - c.launch_overhead).us_f(); }

}  // namespace

TEST_CASE("a large square BF16 GEMM on H100 lands between 60% and 85% of dense peak") {
    const GpuSpec g = test::h100();
    const auto model = make_cost_model("roofline");
    const KernelDesc k = gemm(8192, 8192, 8192);
    const KernelCost c = model->cost(g, k, {});
    // Expectation: ceiling 0.803 x waves 2048/(16*132) = 0.970 x k 8192/8256 = 0.992 -> 77.3%.
    const double share = achieved_share(g, k, c);
    MESSAGE("H100 8192^3 bf16: " << share * 100 << "% of peak, tile " << c.tile_m << "x" << c.tile_n);
    CHECK(share > 0.60);
    CHECK(share < 0.85);
    CHECK(c.compute_bound());
    CHECK(c.compute_efficiency == doctest::Approx(0.803 * 2048.0 / (16 * 132) * 8192.0 / (8192.0 + kGemmK0)));
}

TEST_CASE("a GEMM whose kernel has its own ceiling runs at that share of peak instead of the GPU's") {
    const GpuSpec g = test::h100();
    const auto model = make_cost_model("roofline");
    KernelDesc k = gemm(8192, 8192, 8192);
    const KernelCost best = model->cost(g, k, {});
    // A stack's kernel reaching 0.18 of peak at best (vLLM 0.7's block-scaled
    // FP8 Triton GEMMs, docs/moe.md section 7b): 0.18 in place of the library
    // ceiling 0.803, times the tiling's wave, fill and k shares (0.962 with
    // the default tile, up to 1 with the best one the search finds), so the
    // GEMM takes about 0.803 / 0.18 = 4.46 x as long (within the tilings' 3%).
    k.ceiling = 0.18;
    const KernelCost own = model->cost(g, k, {});
    CHECK(own.compute_efficiency <= 0.18);
    CHECK(own.compute_efficiency >= 0.18 * 2048.0 / (16 * 132) * 8192.0 / (8192.0 + kGemmK0));
    CHECK(body_us(own) == doctest::Approx(body_us(best) * 0.803 / 0.18).epsilon(0.03));
}

TEST_CASE("small GEMMs run far below the ceiling") {
    const GpuSpec g = test::h100();
    const auto model = make_cost_model("roofline");
    const KernelDesc k = gemm(1024, 1024, 1024);
    CHECK(achieved_share(g, k, model->cost(g, k, {})) < 0.4);
}

TEST_CASE("a GEMM one tile too large for a whole wave loses what wave quantization says") {
    const GpuSpec g = test::h100();
    const std::int64_t k = 8192;
    // 12 x 11 = 132 tiles of 128x256 (one full wave) and 7 x 19 = 133 tiles (two waves).
    const KernelDesc one_wave = gemm(12 * 128, 11 * 256, k);
    const KernelDesc two_waves = gemm(7 * 128, 19 * 256, k);
    // Closed form: time = waves * tile FLOPs / (peak per SM * ceiling * k/(k+k0)).
    const double tile_s = 2.0 * 128 * 256 * k / (989.4e12 / 132 * 0.803 * (k / (k + kGemmK0)));

    SUBCASE("with the GPU's tile: exactly twice the time") {
        const auto model = make_cost_model("roofline-fixed-tile");
        const KernelCost a = model->cost(g, one_wave, {});
        const KernelCost b = model->cost(g, two_waves, {});
        CHECK(a.waves == 1);
        CHECK(b.waves == 2);
        CHECK(a.compute_time.seconds() == doctest::Approx(1 * tile_s).epsilon(1e-6));
        CHECK(b.compute_time.seconds() == doctest::Approx(2 * tile_s).epsilon(1e-6));
        CHECK(a.compute_bound());
        CHECK(b.compute_bound());
        CHECK(body_us(b) / body_us(a) == doctest::Approx(2.0).epsilon(1e-6));
    }
    SUBCASE("with tile selection: smaller tiles recover part of the loss, as the chosen plan's waves say") {
        const auto model = make_cost_model("roofline");
        const KernelCost a = model->cost(g, one_wave, {});
        const KernelCost b = model->cost(g, two_waves, {});
        CHECK(a.tile_m * a.tile_n == 128 * 256);
        CHECK(b.tile_m * b.tile_n < 128 * 256);
        const double ratio = body_us(b) / body_us(a);
        CHECK(ratio > 1.0);
        CHECK(ratio < 2.0);
        // The chosen plan's compute time is its own waves x its own tile time.
        const double k_split = std::ceil(static_cast<double>(k) / b.split_k);
        const double b_tile_s =
            2.0 * b.tile_m * b.tile_n * k_split / (989.4e12 / 132 * 0.803 * (k_split / (k_split + kGemmK0)));
        CHECK(b.compute_time.seconds() == doctest::Approx(static_cast<double>(b.waves) * b_tile_s).epsilon(1e-6));
    }
}

TEST_CASE("tile selection is never slower than the GPU's fixed tile") {
    const GpuSpec g = test::h100();
    const auto search = make_cost_model("roofline");
    const auto fixed = make_cost_model("roofline-fixed-tile");
    for (const auto& k : {gemm(8192, 8192, 8192), gemm(896, 4864, 8192), gemm(1024, 1024, 16384), gemm(4096, 128, 4096),
                          gemm(1, 4096, 4096), gemm(16, 14336, 4096), gemm(3000, 5000, 700)}) {
        CAPTURE(k.m);
        CAPTURE(k.n);
        CHECK(search->cost(g, k, {}).duration <= fixed->cost(g, k, {}).duration);
    }
}

TEST_CASE("split-K fills the SMs when a GEMM has few output tiles and a deep k") {
    const GpuSpec g = test::h100();
    const GemmPlan p = choose_gemm_plan(g, gemm(1024, 1024, 32768));
    CHECK(p.split_k > 1);
    CHECK(p.wave_eff > 0.5);
}

TEST_CASE("a decode GEMV (m = 1) is bound by HBM: time = launch + weight bytes / (bw * eff)") {
    const GpuSpec g = test::h100();
    const auto model = make_cost_model("roofline");
    const KernelDesc k = gemm(1, 8192, 8192);
    const KernelCost c = model->cost(g, k, {});
    const double weight_bytes = 8192.0 * 8192.0 * 2.0;
    const double expected_us = 4.0 + weight_bytes / (3350e9 * 0.91) * 1e6;  // 44.03 us + launch
    MESSAGE("decode GEMV 1x8192x8192 bf16 on H100: " << c.duration.us_f() << " us (expected ~" << expected_us << ")");
    CHECK(c.duration.us_f() == doctest::Approx(expected_us).epsilon(0.01));
    CHECK(c.memory_time > c.compute_time);
    CHECK(c.memory_time > c.l2_time);
    CHECK_FALSE(c.compute_bound());
}

TEST_CASE("memory-bound kernels stream at the achievable fraction of HBM bandwidth") {
    const GpuSpec g = test::h100();
    KernelDesc k;
    k.kind = KernelKind::elementwise;
    k.dtype = DType::bf16;
    k.flops = Flops{5e8};
    k.bytes_read = Bytes{1'000'000'000};
    k.bytes_written = Bytes{1'000'000'000};
    const KernelCost c = make_cost_model("roofline")->cost(g, k, {});
    CHECK(c.memory_time == transfer_time(Bytes{2'000'000'000}, Bandwidth{3350e9 * 0.91}));
    CHECK(c.duration == Time::us(4) + c.memory_time);
    CHECK(c.hbm_bytes.value == 2'000'000'000);
    CHECK(c.l2_request_bytes.value == 2'000'000'000);
}

TEST_CASE("bytes already resident in L2 are not read from HBM") {
    const GpuSpec g = test::h100();
    const auto model = make_cost_model("roofline");
    // A (512x4096) + B (4096x4096) bf16 = 36 MiB: fits the 50 MiB L2, so HBM sees compulsory traffic only.
    const KernelDesc k = gemm(512, 4096, 4096);
    const KernelCost cold = model->cost(g, k, {});
    CHECK(cold.hbm_bytes.value == k.bytes_read.value + k.bytes_written.value);
    const Bytes weights{4096ULL * 4096 * 2};
    const KernelCost warm = model->cost(g, k, L2Residency{weights});
    CHECK(warm.hbm_bytes.value == cold.hbm_bytes.value - weights.value);
    CHECK(warm.l2_request_bytes == cold.l2_request_bytes);
}

TEST_CASE("a GEMM whose operands overflow L2 re-reads panels from HBM") {
    const GpuSpec g = test::h100();
    const KernelDesc k = gemm(16384, 16384, 16384);
    const GemmPlan p = choose_gemm_plan(g, k);
    CHECK(p.hbm_read_bytes > k.bytes_read.as_double());
    CHECK(p.hbm_read_bytes <= p.l2_request_bytes);
}

TEST_CASE("asking for a dtype the GPU does not support is a ModelError naming GPU and dtype") {
    const GpuSpec g = test::t4();
    const auto model = make_cost_model("roofline");
    for (KernelKind kind : {KernelKind::gemm, KernelKind::attention, KernelKind::elementwise}) {
        KernelDesc k = gemm(1024, 1024, 1024, DType::bf16);
        k.kind = kind;
        try {
            model->cost(g, k, {});
            FAIL("no error for bf16 on a T4");
        } catch (const ModelError& e) {
            const std::string what = e.what();
            CHECK(what.find("t4-test") != std::string::npos);
            CHECK(what.find("bf16") != std::string::npos);
            CHECK(what.find("fp16") != std::string::npos);  // the supported list
        }
    }
    CHECK_NOTHROW(model->cost(g, gemm(1024, 1024, 1024, DType::fp16), {}));
    CHECK_THROWS_AS(g.peak_of(DType::fp8), ModelError);
}

TEST_CASE("cost models are found by name; an unknown name lists the registered ones") {
    CHECK(make_cost_model("roofline")->name() == "roofline");
    CHECK(make_cost_model("roofline-fixed-tile")->name() == "roofline-fixed-tile");
    CHECK(list_cost_models().size() == 2);
    CHECK_THROWS_WITH_AS(make_cost_model("rooflin"),
                         "unknown cost model 'rooflin' (registered: roofline, roofline-fixed-tile)", ModelError);
}

TEST_CASE("flash attention on H100 follows the FlashAttention-3 forward measurements" * doctest::test_suite("fit")) {
    GpuSpec g = test::h100();
    g.efficiency.attention = 0.66;
    const auto model = make_cost_model("roofline");
    // Dao-AILab/flash-attention FA3 H100 fp16 forward (validation/published.yaml, kind: attention).
    struct Point {
        std::int64_t b, h, d, s;
        bool causal;
        double us;
    };
    for (const Point& p : {Point{1, 16, 128, 16384, false, 3393.6}, Point{4, 32, 64, 4096, false, 1154.9},
                           Point{8, 16, 128, 2048, true, 263.8}, Point{32, 16, 128, 512, false, 147.2}}) {
        CAPTURE(p.d);
        CAPTURE(p.s);
        const KernelCost c = model->cost(g, attention(p.b, p.h, p.d, p.s, p.causal), {});
        CHECK(c.duration.us_f() / p.us == doctest::Approx(1.0).epsilon(0.15));
        CHECK(c.compute_bound());
    }
}

TEST_CASE("attention efficiency falls for short sequences, small heads and backward kernels") {
    const GpuSpec g = test::h100();  // no efficiency.attention: default 0.8 x GEMM ceiling
    const auto model = make_cost_model("roofline");
    const double long_eff = model->cost(g, attention(1, 16, 128, 16384, false), {}).compute_efficiency;
    // share x kv 16384/(16384+128) x waves 2048 CTAs / (16 x 132).
    CHECK(long_eff == doctest::Approx(0.8 * 0.803 * 16384.0 / (16384 + 128) * 2048 / (16 * 132)));
    CHECK(model->cost(g, attention(32, 16, 128, 512, false), {}).compute_efficiency < long_eff);
    CHECK(model->cost(g, attention(2, 32, 64, 8192, false), {}).compute_efficiency < long_eff);
    KernelDesc bwd = attention(1, 16, 128, 16384, false);
    bwd.backward = true;
    // FlashAttention-2 (Dao, arXiv 2307.08691) reaches 50-73% of A100 peak over
    // its forward and backward kernels, the backward being the slower: so a
    // backward kernel runs below the forward's rate, and above 50/73 of it.
    const double bwd_eff = model->cost(g, bwd, {}).compute_efficiency;
    CHECK(bwd_eff < long_eff);
    CHECK(bwd_eff > 50.0 / 73.0 * long_eff);
}

TEST_CASE("the Triton attention kernel runs FlashAttention-2's rate divided by its forward and backward slowdowns") {
    GpuSpec g = test::h100();
    g.efficiency.attention = 0.66;
    g.efficiency.attention_flash2 = 0.41;
    g.attention_fit.triton_forward = 1.4;
    g.attention_fit.triton_backward = 2.0;
    const auto model = make_cost_model("roofline");
    KernelDesc fwd = attention(1, 16, 128, 16384, false);
    fwd.attention_kernel = AttentionKernel::flash2;
    const double fa2 = model->cost(g, fwd, {}).compute_efficiency;
    // FA2's share 0.41 x kv 16384/(16384+128) x waves 2048 CTAs / (16 x 132).
    CHECK(fa2 == doctest::Approx(0.41 * 16384.0 / (16384 + 128) * 2048 / (16 * 132)));
    fwd.attention_kernel = AttentionKernel::triton;
    CHECK(model->cost(g, fwd, {}).compute_efficiency == doctest::Approx(fa2 / 1.4));
    KernelDesc bwd = fwd;
    bwd.backward = true;
    CHECK(model->cost(g, bwd, {}).compute_efficiency == doctest::Approx(fa2 / 2.0 * 0.85));
}

TEST_CASE("FlashAttention-2 has its own head_dim loss; the best kernel before Hopper is FlashAttention-2") {
    GpuSpec g = test::h100();
    g.efficiency.attention = 0.66;
    g.efficiency.attention_flash2 = 0.41;
    g.attention_fit.head_dim0_flash2 = 24;
    const auto model = make_cost_model("roofline");
    // Same CTAs (16 x 128) and keys: the efficiencies differ by the head_dim factor alone,
    // (d / (d + d0)) / (128 / (128 + d0)).
    const auto ratio = [&](AttentionKernel kernel) {
        KernelDesc d64 = attention(1, 16, 64, 16384, false), d128 = attention(1, 16, 128, 16384, false);
        d64.attention_kernel = d128.attention_kernel = kernel;
        return model->cost(g, d64, {}).compute_efficiency / model->cost(g, d128, {}).compute_efficiency;
    };
    CHECK(ratio(AttentionKernel::flash2) == doctest::Approx((64.0 / 88) / (128.0 / 152)));  // 0.864
    CHECK(ratio(AttentionKernel::triton) == doctest::Approx((64.0 / 88) / (128.0 / 152)));
    CHECK(ratio(AttentionKernel::best) == doctest::Approx((64.0 / 128) / (128.0 / 192)));  // FA3: 0.75
    CHECK(ratio(AttentionKernel::cudnn) == doctest::Approx((64.0 / 128) / (128.0 / 192)));
    g.architecture = "ampere";  // no FA3: the best kernel is FlashAttention-2
    CHECK(ratio(AttentionKernel::best) == doctest::Approx((64.0 / 88) / (128.0 / 152)));
}

TEST_CASE("the causal diagonal costs FA3's own tiles; the backward kernel has its own prologue") {
    GpuSpec g = test::h100();
    g.efficiency.attention = 0.66;
    g.attention_fit.flash3_tiles = {{64, 192, 128}, {128, 128, 128}, {256, 128, 80}};
    g.attention_fit.seq0_backward = 224;
    const auto model = make_cost_model("roofline");
    const auto eff = [&](KernelDesc k, AttentionKernel kernel) {
        k.attention_kernel = kernel;
        return model->cost(g, k, {}).compute_efficiency;
    };
    // head_dim 256, seq 2048, 4 x 8 heads: FA3's 128 x 80 tile computes 64 + (80 - gcd(128, 80)) / 2 = 96
    // keys a row past the diagonal, 2 x 96 = 192 against the row's mean 1024 useful keys: 2048 / 2240.
    // Causal and not share the CTAs (32 x 16 = 512); the prologue sees 1024 keys causal, 2048 not.
    const KernelDesc causal = attention(4, 8, 256, 2048, true), full = attention(4, 8, 256, 2048, false);
    const double kv_ratio = (1024.0 / 1152) / (2048.0 / 2176);
    CHECK(eff(causal, AttentionKernel::best) / eff(full, AttentionKernel::best) ==
          doctest::Approx(2048.0 / 2240 * kv_ratio));
    // cuDNN is timed as FA3 but not with FA3's table: 128 x 128 blocks, 64 keys a row past the diagonal.
    CHECK(eff(causal, AttentionKernel::cudnn) / eff(full, AttentionKernel::cudnn) ==
          doctest::Approx(2048.0 / 2176 * kv_ratio));
    // head_dim 64: FA3's 192-row tile gives ceil(2048 / 192) = 11 query blocks, 8 x 16 x 11 = 1408 CTAs
    // in 11 waves of 132, full waves: 1408 / 1452 against 128-row blocks' 2048 / 2112 (both 0.97).
    const double fa3 = eff(attention(8, 16, 64, 2048, false), AttentionKernel::best);
    const double cudnn = eff(attention(8, 16, 64, 2048, false), AttentionKernel::cudnn);
    CHECK(fa3 / cudnn == doctest::Approx((1408.0 / 1452) / (2048.0 / 2112)));
    // The backward kernel: prologue 224 keys, not 128, then the backward share 0.85.
    KernelDesc bwd = full;
    bwd.backward = true;
    CHECK(eff(bwd, AttentionKernel::best) / eff(full, AttentionKernel::best) ==
          doctest::Approx(0.85 * (2048.0 / 2272) / (2048.0 / 2176)));
}

TEST_CASE("decode attention is bound by reading the KV cache") {
    const GpuSpec g = test::h100();
    KernelDesc k;
    k.kind = KernelKind::attention;
    k.dtype = DType::bf16;
    k.m = 1;
    k.n = 8192;
    k.k = 128;
    k.batch = 64 * 32;  // 64 sequences x 32 query heads over 8 KV heads
    k.flops = Flops{4.0 * 64 * 32 * 8192 * 128};
    k.bytes_read = Bytes::ceil(2.0 * 64 * 8 * 8192 * 128 * 2);
    k.bytes_written = Bytes::ceil(64.0 * 32 * 128 * 2);
    const KernelCost c = make_cost_model("roofline")->cost(g, k, {});
    CHECK(c.memory_time > c.compute_time);
    CHECK(c.memory_time == transfer_time(Bytes{k.bytes_read.value + k.bytes_written.value}, Bandwidth{3350e9 * 0.91}));
}

TEST_CASE("a GEMM too large to count its tiles in 64 bits is a ModelError, not a wrapped tile count") {
    const GpuSpec g = test::h100();
    const std::int64_t two40 = std::int64_t{1} << 40;
    KernelDesc k = gemm(1, 1, 1);
    k.m = k.n = k.k = two40;  // the shape only: bytes and FLOPs would not fit the helper's types
    CHECK_THROWS_AS(evaluate_gemm_plan(g, k, g.gemm_tile_m, g.gemm_tile_n, 1), ModelError);
    CHECK_THROWS_WITH_AS(choose_gemm_plan(g, k), doctest::Contains("too large to schedule"), ModelError);
    // The largest GEMM a dataset may hold (2^48-element matrices) is counted exactly.
    k.m = k.n = k.k = std::int64_t{1} << 24;
    const GemmPlan p = choose_gemm_plan(g, k);
    CHECK(p.tiles >= (std::int64_t{1} << 48) / (std::int64_t{p.tile_m} * p.tile_n));
}

TEST_SUITE_END();
