// Megatron-Core's MoE layer as the NeMo 25.04 stack runs it, past the kernels
// of docs/moe.md sections 3f-3g: the unfused router's kernels (the software
// profile's moe_router_kernels and moe_router_bwd_kernels) and the alltoall
// dispatcher's host synchronisation before a dropless exchange (docs/moe.md
// section 3i).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "sim/config/model_loader.h"
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

TEST_SUITE_END();
