// Megatron-Core 0.9's PyTorch permutation (OperatorOptions::moe_permute_unfused;
// docs/moe.md section 7, "What Megatron-Core 0.9 ran for Mixtral"): the
// combine and the backward passes as the kernels of moe_utils.py's permute
// and unpermute, and no all-to-all for the gate weights, which stay at the
// source rank.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "sim/config/model_loader.h"
#include "sim/workload/operators.h"

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim::workload;

namespace {

// Mixtral (h 4096, top 2), one expert a rank (ep 8), the alltoall
// dispatcher's metadata, dropless; T = 1000 tokens a rank.
OperatorOptions ep8(bool unfused) {
    OperatorOptions o;
    o.ep = 8;
    o.moe_alltoall_metadata = true;
    o.moe_permute_unfused = unfused;
    return o;
}

const PassShape kShape{1, 1000, 1000};

const Operator& named(const std::vector<Operator>& ops, const std::string& name) {
    for (const auto& op : ops)
        if (op.kernel.name == name) return op;
    FAIL("no kernel ", name);
    return ops.front();
}

std::size_t at(const std::vector<Operator>& ops, const std::string& name) {
    for (std::size_t i = 0; i < ops.size(); ++i)
        if (ops[i].kernel.name == name) return i;
    return ops.size();
}

std::uint64_t probs_exchanged(const std::vector<Operator>& ops) {
    std::uint64_t b = 0;
    for (const auto& op : ops) b += op.ep_probs_a2a_bytes.value;
    return b;
}

}  // namespace

TEST_CASE("unfused permutation: the combine's four kernels and the backward's six, by hand") {
    // T k h ab = 1000 x 2 x 4096 x 2 = 16 384 000 bytes of routed copies (R);
    // a token's hidden state T h ab = 8 192 000 (A); the sorted indices T k 8 =
    // 16 000; the BF16 gate weights T k 2 = 4000.
    const ModelSpec m = sim::config::load_model_file(sim::config::model_path("mixtral-8x7b"));
    const auto fwd = layer_forward(m, 0, 0, kShape, ep8(true));
    const auto bwd = layer_backward(m, 0, 0, kShape, ep8(true), Recompute::none);
    struct Want {
        const char* name;
        std::uint64_t read, written;
    };
    const std::vector<Want> forward{{"moe_unpermute_zero", 0, 16'384'000},
                                    {"moe_unpermute_scatter", 2 * 16'384'000 + 16'000, 16'384'000},
                                    {"moe_unpermute_weight", 16'384'000 + 4000, 16'384'000},
                                    {"moe_combine", 16'384'000, 8'192'000}};
    const std::vector<Want> backward{{"moe_unpermute_bwd_tokens", 8'192'000 + 4000, 16'384'000},
                                     {"moe_unpermute_bwd_probs", 8'192'000 + 16'384'000, 16'384'000},
                                     {"moe_unpermute_bwd_probs_sum", 16'384'000, 4000},
                                     {"moe_combine_bwd", 16'384'000 + 16'000, 16'384'000},
                                     {"moe_dispatch_bwd_zero", 0, 8'192'000},
                                     {"moe_dispatch_bwd", 16'384'000 + 16'000 + 8'192'000, 8'192'000}};
    for (const auto& [ops, want] : {std::make_pair(&fwd, &forward), std::make_pair(&bwd, &backward)}) {
        const std::size_t first = at(*ops, want->front().name);
        for (std::size_t i = 0; i < want->size(); ++i) {
            const Want w = (*want)[i];
            CAPTURE(w.name);
            const Operator& op = named(*ops, w.name);
            CHECK(op.kernel.bytes_read.value == w.read);
            CHECK(op.kernel.bytes_written.value == w.written);
            if (i < 4) CHECK(at(*ops, w.name) == first + i);  // the combine's (or its backward's) kernels in a row
        }
    }
    CHECK(named(fwd, "moe_combine").kernel.flops.value == 8'192'000.0);  // the sum over k: T k h additions
    // The exchange back comes before the zero-fill; the one before the
    // dispatch's backward before its zero-fill.
    const std::uint64_t a2a = named(fwd, "moe_unpermute_zero").ep_a2a_bytes.value;
    CHECK(a2a > 0);
    CHECK(named(fwd, "moe_combine").ep_a2a_bytes.value == 0);
    CHECK(named(bwd, "moe_dispatch_bwd_zero").ep_a2a_bytes.value == a2a);
    CHECK(named(bwd, "moe_dispatch_bwd").ep_a2a_bytes.value == 0);
    CHECK(named(bwd, "moe_dispatch_bwd_zero").kernel.name == bwd[at(bwd, "moe_dispatch_bwd") - 1].kernel.name);
}

TEST_CASE("unfused permutation: the fused path is one kernel each way, and only it exchanges the gate weights") {
    const ModelSpec m = sim::config::load_model_file(sim::config::model_path("mixtral-8x7b"));
    const auto fused = layer_forward(m, 0, 0, kShape, ep8(false));
    const auto fused_bwd = layer_backward(m, 0, 0, kShape, ep8(false), Recompute::none);
    CHECK(at(fused, "moe_unpermute_zero") == fused.size());
    CHECK(at(fused_bwd, "moe_dispatch_bwd_zero") == fused_bwd.size());
    CHECK(named(fused, "moe_combine").kernel.bytes_read.value == 16'384'000u + 16'000u);
    // Fused: the gate weights' all-to-all each way, T k 4 = 8000 bytes.
    CHECK(probs_exchanged(fused) == 8000u);
    CHECK(probs_exchanged(fused_bwd) == 8000u);
    // Unfused (Megatron-Core 0.9): none, while the dropless count all-gather
    // and the host sync before the exchange stay.
    const auto unfused = layer_forward(m, 0, 0, kShape, ep8(true));
    CHECK(probs_exchanged(unfused) == 0u);
    CHECK(probs_exchanged(layer_backward(m, 0, 0, kShape, ep8(true), Recompute::none)) == 0u);
    CHECK(named(unfused, "moe_dispatch").ep_count_gather_bytes.value == 8u * 8u * 8u);
    CHECK(named(unfused, "moe_dispatch").kernel.host_sync);
}

TEST_SUITE_END();
