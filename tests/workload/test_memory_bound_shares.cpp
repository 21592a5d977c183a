// Memory-bound kernels at their implementation's share of the streaming rate
// (docs/hardware-model.md §4; docs/software-profiles.md §2e): which kernels a
// stack's `memory_bound` shares reach, and what the cost model does with them,
// by hand.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "sim/hw/cost_model.h"
#include "sim/serve/memo_cost_model.h"
#include "sim/workload/operators.h"
#include "tests/hw/hw_test_gpus.h"

TEST_SUITE_BEGIN("unit");

using namespace sim;
using namespace sim::workload;

namespace {

// A GPT-style layer (LayerNorm, GeLU, biases) and a Llama-style one (RMSNorm, SwiGLU).
ModelSpec model(bool swiglu) {
    ModelSpec m;
    m.name = swiglu ? "llama-like" : "gpt-like";
    m.layers = 2;
    m.hidden = 1024;
    m.heads = 8;
    m.kv_heads = 8;
    m.head_dim = 128;
    m.ffn = 4096;
    m.ffn_kind = swiglu ? FfnKind::swiglu : FfnKind::gelu;
    m.vocab = 32000;
    m.max_seq = 1024;
    m.norm = swiglu ? NormKind::rmsnorm : NormKind::layernorm;
    m.bias = swiglu ? Biases{false, false, false} : Biases{true, true, true};
    return m;
}

double share_of(const std::vector<Operator>& ops, const std::string& name) {
    for (const auto& o : ops)
        if (o.kernel.name == name) return o.kernel.hbm_share;
    FAIL("no operator named ", name);
    return 0.0;
}

}  // namespace

TEST_CASE("memory-bound kernels: a share of the streaming rate divides the rate, by hand") {
    const hw::GpuSpec g = hw::test::h100();  // 3350 GB/s, efficiency.hbm 0.91, launch 4 us
    hw::KernelDesc k;
    k.kind = hw::KernelKind::elementwise;
    k.dtype = hw::DType::bf16;
    k.bytes_read = Bytes{1'000'000'000};
    k.bytes_written = Bytes{1'000'000'000};
    k.hbm_share = 0.5;
    const auto model = hw::make_cost_model("roofline");
    // 2 GB at 0.5 x 0.91 x 3350 GB/s = 1524.25 GB/s: 1312.1 us, plus the launch.
    const hw::KernelCost c = model->cost(g, k, {});
    CHECK(c.memory_time.us_f() == doctest::Approx(2e9 / (3350e9 * 0.91 * 0.5) * 1e6).epsilon(1e-6));
    CHECK(c.memory_time.us_f() == doctest::Approx(1312.1).epsilon(1e-4));
    CHECK(c.duration == Time::us(4) + c.memory_time);
    // The share is the kernel's implementation: a GEMM's HBM rate ignores it.
    hw::KernelDesc gemm = hw::test::dense_gemm(4096, 4096, 4096, hw::DType::bf16);
    const hw::KernelCost at_one = model->cost(g, gemm, {});
    gemm.hbm_share = 0.5;
    CHECK(model->cost(g, gemm, {}).duration == at_one.duration);
    k.hbm_share = 0.0;
    CHECK_THROWS(model->cost(g, k, {}));
}

TEST_CASE("memory-bound kernels: serving's memoized costs keep kernels apart by their share") {
    // Serving caches kernel costs under a key of every input the cost model reads
    // (sim/serve/memo_cost_model.h); two kernels that differ only in their share
    // must not share an answer.
    const hw::GpuSpec g = hw::test::h100();
    const auto model = hw::make_cost_model("roofline");
    const serve::MemoCostModel memo(*model, g);
    hw::KernelDesc k;
    k.kind = hw::KernelKind::elementwise;
    k.dtype = hw::DType::bf16;
    k.bytes_read = Bytes{1'000'000'000};
    k.bytes_written = Bytes{1'000'000'000};
    const hw::KernelCost full = memo.cost(g, k, {});
    k.hbm_share = 0.5;
    const hw::KernelCost half = memo.cost(g, k, {});
    CHECK(memo.misses() == 2);
    CHECK(half.memory_time.us_f() == doctest::Approx(2 * full.memory_time.us_f()).epsilon(1e-9));
    CHECK(memo.cost(g, k, {}).duration == half.duration);
    CHECK(memo.hits() == 1);
}

TEST_CASE("memory-bound kernels: the stack's shares reach its norms and activations, and nothing else") {
    OperatorOptions eager;
    eager.memory_bound = MemoryBoundShares{0.5, 0.25, 0.75, 0.6};
    const PassShape s{2, 256, 256};
    for (bool fuse : {true, false}) {
        CAPTURE(fuse);
        eager.fuse_elementwise = fuse;
        const ModelSpec gpt = model(false);
        const auto f = layer_forward(gpt, 0, 0, s, eager);
        const auto b = layer_backward(gpt, 0, 0, s, eager, Recompute::none);
        CHECK(share_of(f, "norm1") == 0.5);
        CHECK(share_of(f, fuse ? "bias_residual_add_norm2" : "norm2") == 0.5);
        CHECK(share_of(f, fuse ? "mlp_bias_gelu" : "mlp_gelu") == 0.75);
        CHECK(share_of(b, "mlp_gelu_bwd") == 0.6);
        CHECK(share_of(b, fuse ? "norm1_bwd_residual_add" : "norm1_bwd") == 0.25);
        CHECK(share_of(f, "mlp_up") == 1.0);  // a GEMM
        if (!fuse) {
            CHECK(share_of(f, "residual_add1") == 1.0);  // an add streams at the rate
            CHECK(share_of(b, "norm1_residual_grad_add") == 1.0);
        }
        const ModelSpec llama = model(true);
        const auto lf = layer_forward(llama, 0, 0, s, eager);
        const auto lb = layer_backward(llama, 0, 0, s, eager, Recompute::none);
        CHECK(share_of(lf, fuse ? "mlp_swiglu" : "mlp_silu") == 0.75);
        CHECK(share_of(lb, fuse ? "mlp_swiglu_bwd" : "mlp_silu_bwd") == 0.6);
    }
    // The head's final norm, forward and backward.
    const ModelSpec gpt = model(false);
    CHECK(share_of(head_forward(gpt, 0, s, eager, true), "final_norm") == 0.5);
    CHECK(share_of(head_backward(gpt, 0, s, eager), "final_norm_bwd") == 0.25);
    // Without a profile's shares every kernel streams at the rate.
    for (const auto& o : layer_backward(gpt, 0, 0, s, OperatorOptions{}, Recompute::none))
        CHECK(o.kernel.hbm_share == 1.0);
}

TEST_SUITE_END();
