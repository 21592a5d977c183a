// Megatron-Core's MoE layer as the NeMo 25.04 stack runs it, past the kernels
// of docs/moe.md sections 3f-3g: the unfused router's kernels (the software
// profile's moe_router_kernels and moe_router_bwd_kernels) and the alltoall
// dispatcher's host synchronisation before a dropless exchange (docs/moe.md
// section 3i).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "sim/config/model_loader.h"
#include "sim/workload/footprint.h"
#include "sim/workload/operators.h"

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim::workload;

namespace {

ModelSpec mixtral() { return sim::config::load_model_file(sim::config::model_path("mixtral-8x7b")); }

// Mixtral under ep 4 with grouped expert GEMMs and the alltoall dispatcher's
// metadata, T = 1000 tokens a rank.
OperatorOptions ep4() {
    OperatorOptions o;
    o.ep = 4;
    o.moe.grouped_gemm = true;
    o.moe_alltoall_metadata = true;
    return o;
}

const PassShape kShape{1, 1000, 1000};

std::vector<std::string> names_with(const std::vector<Operator>& ops, const std::string& prefix) {
    std::vector<std::string> r;
    for (const auto& op : ops)
        if (op.kernel.name.rfind(prefix, 0) == 0) r.push_back(op.kernel.name);
    return r;
}

std::size_t at(const std::vector<Operator>& ops, const std::string& name) {
    for (std::size_t i = 0; i < ops.size(); ++i)
        if (ops[i].kernel.name == name) return i;
    return ops.size();
}

}  // namespace

TEST_CASE("unfused router: kernels - 1 passes over the FP32 scores after the routing kernel, each way") {
    // Mixtral (8 experts), T = 1000: each added pass reads and writes
    // 1000 x 8 x 4 = 32 000 bytes and does 8000 FLOPs. 5 forward kernels add
    // 4 after router_topk; 3 backward kernels add 2 after router_topk_bwd,
    // before the router GEMM's dgrad.
    const ModelSpec m = mixtral();
    OperatorOptions o = ep4();
    CHECK(names_with(layer_forward(m, 0, 0, kShape, o), "moe_router_step_").empty());
    CHECK(names_with(layer_backward(m, 0, 0, kShape, o, Recompute::none), "moe_router_bwd_step_").empty());
    o.moe_router_kernels = 5;
    o.moe_router_bwd_kernels = 3;
    const auto fwd = layer_forward(m, 0, 0, kShape, o);
    const auto bwd = layer_backward(m, 0, 0, kShape, o, Recompute::none);
    CHECK(names_with(fwd, "moe_router_step_") ==
          std::vector<std::string>{"moe_router_step_1", "moe_router_step_2", "moe_router_step_3", "moe_router_step_4"});
    CHECK(names_with(bwd, "moe_router_bwd_step_") ==
          std::vector<std::string>{"moe_router_bwd_step_1", "moe_router_bwd_step_2"});
    for (const auto* ops : {&fwd, &bwd})
        for (const auto& op : *ops)
            if (op.kernel.name.rfind("moe_router_", 0) == 0) {
                CAPTURE(op.kernel.name);
                CHECK(op.kernel.bytes_read.value == 32'000u);
                CHECK(op.kernel.bytes_written.value == 32'000u);
                CHECK(op.kernel.flops.value == 8000.0);
            }
    CHECK(at(fwd, "moe_router_step_1") == at(fwd, "router_topk") + 1);
    CHECK(at(fwd, "moe_dispatch") == at(fwd, "moe_router_step_4") + 1);
    CHECK(at(bwd, "moe_router_bwd_step_1") == at(bwd, "router_topk_bwd") + 1);
    CHECK(at(bwd, "moe_router_bwd_step_2") + 1 < bwd.size());
    CHECK(bwd[at(bwd, "moe_router_bwd_step_2") + 1].kernel.name.find("router") != std::string::npos);
}

TEST_CASE("alltoall dispatcher, dropless: the host synchronises before the permutation, and only there") {
    // Megatron-Core's MoEAlltoAllTokenDispatcher copies the token counts to
    // the host and waits for them before its exchange when the splits are not
    // known (no capacity factor): the permutation (moe_dispatch, after the
    // counts' all-gather) is the one synced kernel of the layer's passes.
    const ModelSpec m = mixtral();
    OperatorOptions o = ep4();
    const auto synced = [&](const OperatorOptions& opt) {
        std::vector<std::string> r;
        for (const auto& ops :
             {layer_forward(m, 0, 0, kShape, opt), layer_backward(m, 0, 0, kShape, opt, Recompute::none)})
            for (const auto& op : ops)
                if (op.kernel.host_sync) r.push_back(op.kernel.name);
        return r;
    };
    CHECK(synced(o) == std::vector<std::string>{"moe_dispatch"});
    // Padded to a capacity (the splits are known on the host): none.
    o.moe.capacity_factor = 1.0;
    CHECK(synced(o).empty());
    // Another dispatcher, or no expert parallelism: none.
    o.moe.capacity_factor = 0;
    o.moe_alltoall_metadata = false;
    CHECK(synced(o).empty());
    o.moe_alltoall_metadata = true;
    o.ep = 1;
    CHECK(synced(o).empty());
}

TEST_CASE("router in FP32: two casts, a TF32 GEMM on the copies, FP32 logits, the casts back; the copies kept") {
    // Megatron-Core's Router.gating under --moe-router-dtype fp32 (docs/moe.md
    // section 3i): Mixtral (h 4096, 8 experts), T = 1000 tokens a rank.
    const ModelSpec m = mixtral();
    OperatorOptions o = ep4();
    const auto fwd16 = layer_forward(m, 0, 0, kShape, o);
    o.moe.router_fp32 = true;
    const auto fwd = layer_forward(m, 0, 0, kShape, o);
    const auto bwd = layer_backward(m, 0, 0, kShape, o, Recompute::none);
    const auto op = [](const std::vector<Operator>& ops, const std::string& name) -> const Operator& {
        const std::size_t i = at(ops, name);
        REQUIRE(i < ops.size());
        return ops[i];
    };
    // Forward: the tokens 1000 x 4096 from BF16 (8 192 000 bytes) to FP32 (16 384
    // 000), the weight 8 x 4096 (65 536 to 131 072), then the GEMM on both
    // copies in TF32: 2 x 1000 x 8 x 4096 FLOPs, FP32 logits of 1000 x 8 x 4.
    CHECK(at(fwd, "router_input_cast") + 1 == at(fwd, "router_weight_cast"));
    CHECK(at(fwd, "router_weight_cast") + 1 == at(fwd, "router"));
    CHECK(op(fwd, "router_input_cast").kernel.bytes_read.value == 8'192'000u);
    CHECK(op(fwd, "router_input_cast").kernel.bytes_written.value == 16'384'000u);
    CHECK(op(fwd, "router_weight_cast").kernel.bytes_read.value == 65'536u);
    CHECK(op(fwd, "router_weight_cast").kernel.bytes_written.value == 131'072u);
    const auto& gemm = op(fwd, "router").kernel;
    CHECK(gemm.dtype == sim::hw::DType::tf32);
    CHECK(gemm.flops.value == 65'536'000.0);
    CHECK(gemm.bytes_read.value == 16'515'072u);  // 16 384 000 + 131 072 (BF16: 8 192 000 + 65 536)
    CHECK(gemm.bytes_written.value == 32'000u);
    CHECK(op(fwd16, "router").kernel.bytes_read.value == 8'257'536u);
    CHECK(op(fwd, "router_topk").kernel.bytes_read.value == 32'000u);  // reads the FP32 logits (BF16: 16 000)
    CHECK(op(fwd16, "router_topk").kernel.bytes_read.value == 16'000u);
    // Backward: the input gradient in TF32 from the saved weight copy (16 384
    // 000 bytes written), cast to BF16 and added to the dispatch's; the
    // weight copy's gradient from the saved input copy (131 072 bytes), cast
    // to the BF16 weight gradient and accumulated into it.
    const auto& dgrad = op(bwd, "router_dgrad").kernel;
    CHECK(dgrad.dtype == sim::hw::DType::tf32);
    CHECK(dgrad.flops.value == 65'536'000.0);
    CHECK(dgrad.bytes_read.value == 163'072u);  // 32 000 + 131 072
    CHECK(dgrad.bytes_written.value == 16'384'000u);
    CHECK(op(bwd, "router_input_grad_cast").kernel.bytes_read.value == 16'384'000u);
    CHECK(op(bwd, "router_input_grad_cast").kernel.bytes_written.value == 8'192'000u);
    CHECK(op(bwd, "router_input_grad_add").kernel.bytes_read.value == 16'384'000u);
    CHECK(op(bwd, "router_input_grad_add").kernel.bytes_written.value == 8'192'000u);
    const auto& wgrad = op(bwd, "router_wgrad");
    CHECK(wgrad.is_weight_grad);
    CHECK(wgrad.kernel.dtype == sim::hw::DType::tf32);
    CHECK(wgrad.kernel.flops.value == 65'536'000.0);
    CHECK(wgrad.kernel.bytes_read.value == 16'416'000u);  // 16 384 000 + 32 000
    CHECK(wgrad.kernel.bytes_written.value == 131'072u);
    CHECK(op(bwd, "router_weight_grad_cast").kernel.bytes_read.value == 196'608u);  // 131 072 + 65 536
    CHECK(op(bwd, "router_weight_grad_cast").kernel.bytes_written.value == 65'536u);
    // Memory a layer and micro-batch: the FP32 logits (1000 x 8 x 2 bytes
    // more) and the two copies the GEMM saves, (1000 + 8) x 4096 x 4.
    OperatorOptions bf16 = o;
    bf16.moe.router_fp32 = false;
    CHECK(layer_activation_bytes(m, kShape, o, Recompute::none).as_double() -
              layer_activation_bytes(m, kShape, bf16, Recompute::none).as_double() ==
          16'000.0 + 16'515'072.0);
}

TEST_SUITE_END();
