// Context parallelism's operators: 1/cp of the tokens a rank, attention as a
// ring of cp equal steps, and Transformer Engine's merge passes around them,
// each checked by hand (docs/parallelism.md, context parallelism).
#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

#include "sim/hw/dtype.h"
#include "sim/workload/footprint.h"
#include "sim/workload/op_builders.h"
#include "tests/workload/operator_helpers.h"

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim::workload;
using namespace parasim_workload_tests;
using sim::hw::DType;

TEST_CASE("context parallelism: 1/cp of the tokens, attention as a ring of cp equal steps") {
    const ModelSpec m = shipped("llama3-8b");  // 32 heads, 8 KV heads of 128, hidden 4096
    const PassShape shape{2, 4096, 4096};
    OperatorOptions o;
    const auto whole = layer_forward(m, 0, 0, shape, o);
    const auto whole_bwd = layer_backward(m, 0, 0, shape, o, Recompute::none);
    const double attention = flops(find(whole, "attention"));
    const double attention_bwd = flops(find(whole_bwd, "attention_bwd"));
    for (const int cp : {2, 4}) {
        CAPTURE(cp);
        o.cp = cp;
        const auto ops = layer_forward(m, 0, 0, shape, o);
        // Token-linear kernels: 1/cp of the tokens.
        CHECK(flops(find(ops, "qkv")) == doctest::Approx(flops(find(whole, "qkv")) / cp));
        CHECK(find(ops, "qkv").kernel.m == 2 * 4096 / cp);
        CHECK(rd(find(ops, "norm1")) < rd(find(whole, "norm1")));
        // Attention: cp steps, each 1/cp of this rank's work, together 1/cp of the whole causal attention.
        std::vector<const Operator*> steps;
        for (const auto& op : ops)
            if (op.kernel.name == "attention") steps.push_back(&op);
        REQUIRE(steps.size() == static_cast<std::size_t>(cp));
        double sum = 0;
        for (int k = 0; k < cp; ++k) {
            CHECK(steps[static_cast<std::size_t>(k)]->cp_step == k);
            CHECK(flops(*steps[static_cast<std::size_t>(k)]) == doctest::Approx(attention / cp / cp));
            sum += flops(*steps[static_cast<std::size_t>(k)]);
        }
        CHECK(sum == doctest::Approx(attention / cp));
        // Ring: steps 1..cp-1 each receive one K,V chunk, 2 x (b x s/cp) x kv_heads x head_dim x 2 bytes.
        const double chunk = 2.0 * 2 * (4096.0 / cp) * 8 * 128 * 2;
        CHECK(steps[0]->cp_ring_bytes.value == 0u);
        double ring = 0;
        for (const auto* s : steps) ring += s->cp_ring_bytes.as_double();
        CHECK(ring == doctest::Approx((cp - 1) * chunk));
        // Backward: the same steps, the chunk plus its dK,dV partial per step (twice the forward volume).
        const auto bwd = layer_backward(m, 0, 0, shape, o, Recompute::none);
        double bwd_flops = 0, bwd_ring = 0;
        int bwd_steps = 0;
        for (const auto& op : bwd)
            if (op.kernel.name == "attention_bwd") {
                ++bwd_steps;
                bwd_flops += flops(op);
                bwd_ring += op.cp_ring_bytes.as_double();
            }
        CHECK(bwd_steps == cp);
        CHECK(bwd_flops == doctest::Approx(attention_bwd / cp));
        CHECK(bwd_ring == doctest::Approx(2 * (cp - 1) * chunk));
        // Activations stored per GPU: 1/cp.
        o.cp = 1;
        const double act1 = layer_activation_bytes(m, shape, o, Recompute::selective).as_double();
        o.cp = cp;
        CHECK(layer_activation_bytes(m, shape, o, Recompute::selective).as_double() == doctest::Approx(act1 / cp));
    }
    // The split needs 2 x cp equal chunks, and training passes.
    o.cp = 3;
    CHECK_THROWS_AS(layer_forward(m, 0, 0, PassShape{1, 1000, 1000}, o), sim::ModelError);
    o.cp = 2;
    CHECK_THROWS_AS(layer_forward(m, 0, 0, PassShape{1, 1, 1000}, o), sim::ModelError);
}

TEST_CASE("context parallelism: Transformer Engine's merge passes around the ring steps, by hand") {
    const ModelSpec m = shipped("llama3-8b");  // 32 heads, 8 KV heads of 128
    const PassShape shape{2, 4096, 4096};
    OperatorOptions o;
    o.cp = 2;
    // Per rank: 2 x 4096 / 2 = 4096 tokens. Q and O: 4096 x 32 x 128 x 2 B; K+V: 4096 x 8 x 2 x 128 x 2 B.
    const double q = 4096.0 * 32 * 128 * 2, kv = 4096.0 * 8 * 2 * 128 * 2;
    const auto fwd = layer_forward(m, 0, 0, shape, o);
    const Operator& merge = find(fwd, "attention_cp_merge");
    // cat(K, V) r/w KV; zeroed output w O; one half copy (of K/V or of Q) r/w (KV + Q)/4 on average;
    // output corrections: 1.5 full steps (r 2O, w O) and 0.5 half steps (r O, w O/2) on average.
    CHECK(rd(merge) == doctest::Approx(kv + (kv + q) / 4 + 3.5 * q));
    CHECK(wr(merge) == doctest::Approx(kv + (kv + q) / 4 + 2.75 * q));
    // The steps read Q and their K/V chunk only: the merge rescales their outputs.
    for (const auto& op : fwd)
        if (op.kernel.name == "attention") CHECK(rd(op) == doctest::Approx(q + kv));
    const auto bwd = layer_backward(m, 0, 0, shape, o, Recompute::none);
    const Operator& merge_bwd = find(bwd, "attention_cp_merge_bwd");
    // Copy of K/V into the send buffer, the diagonal step (cat dK,dV; dQ add; dK/dV add) and, on average,
    // half an off-diagonal step of each kind (A: half K/V copy, cat, dQ add, half dK/dV add;
    // B: half Q, O, dO copies, cat, half dQ add, dK/dV add).
    CHECK(rd(merge_bwd) == doctest::Approx(4 * kv + 2 * q + 0.5 * (5 * kv + 4.5 * q)));
    CHECK(wr(merge_bwd) == doctest::Approx(3 * kv + q + 0.5 * (3.5 * kv + 3 * q)));
    // Without context parallelism there is no merge.
    o.cp = 1;
    for (const auto& op : layer_forward(m, 0, 0, shape, o)) CHECK(op.kernel.name != "attention_cp_merge");
    // cp = 4: 1.5 steps of each half kind per rank, 2.5 full output corrections.
    const ops::CpMergeBytes b4 = ops::cp_merge_forward_bytes(q, q, kv, 4);
    CHECK(b4.read == doctest::Approx(kv + 0.75 * (kv + q) + 6.5 * q));
    CHECK(b4.written == doctest::Approx(kv + 0.75 * (kv + q) + 4.25 * q));
}

TEST_SUITE_END();
