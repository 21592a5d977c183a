// The per-query-head generation attention kernel of a software profile
// (docs/software-profiles.md §3, "Generation attention"): the decode
// attention kernel carries b x heads x context x (dq + dv) x c CUDA-core
// instructions, and the cost model's compute time is at least their issue
// time, sm_count x 128 lanes per clock. Hand-computed expectations.
#include "sim/config/model_loader.h"
#include "sim/hw/cost_model.h"
#include "sim/workload/operators.h"
#include "tests/hw/hw_test_gpus.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;
using namespace sim::workload;

namespace {

const Operator& attention_of(const std::vector<Operator>& ops) {
    auto it = std::find_if(ops.begin(), ops.end(), [](const Operator& o) { return o.kernel.name == "attention"; });
    REQUIRE(it != ops.end());
    return *it;
}

}  // namespace

TEST_CASE("generation attention: a per-query-head kernel issues c x b x heads x context x 2d instructions in decode") {
    // Llama 3 8B: 32 query heads, 8 KV heads, head_dim 128.
    const ModelSpec m = config::load_model_file(config::model_path("llama3-8b"));
    OperatorOptions o;
    o.inference = true;
    o.precision.kv = hw::DType::fp8;
    const std::int64_t b = 4, ctx = 3000;
    SUBCASE("default: a grouped kernel, no instruction floor") {
        CHECK(attention_of(layer_forward(m, 0, 0, PassShape{b, 1, ctx}, o)).kernel.issue_instructions == 0.0);
    }
    SUBCASE("per query head, tp 1 and tp 2") {
        o.decode_attention_issue = 8;
        CHECK(attention_of(layer_forward(m, 0, 0, PassShape{b, 1, ctx}, o)).kernel.issue_instructions ==
              doctest::Approx(8.0 * 4 * 32 * 3000 * 256));
        o.tp = 2;  // 16 query heads per rank
        CHECK(attention_of(layer_forward(m, 0, 0, PassShape{b, 1, ctx}, o)).kernel.issue_instructions ==
              doctest::Approx(8.0 * 4 * 16 * 3000 * 256));
    }
    SUBCASE("the prefill runs the context kernel: no floor") {
        o.decode_attention_issue = 8;
        CHECK(attention_of(layer_forward(m, 0, 0, PassShape{b, 512, 512}, o)).kernel.issue_instructions == 0.0);
    }
}

TEST_CASE("generation attention: compute time is at least the issue time of the kernel's instructions") {
    const hw::GpuSpec g = hw::test::h100();  // 132 SMs at 1.83 GHz: 30.92e12 lane instructions per second
    const auto model = hw::make_cost_model("roofline");
    hw::KernelDesc k;
    k.name = "attention";
    k.kind = hw::KernelKind::attention;
    k.dtype = hw::DType::bf16;
    k.m = 1;
    k.n = 4096;
    k.k = 128;
    k.batch = 64 * 32;
    k.flops = Flops{4.0 * 64 * 32 * 4096 * 128};
    k.bytes_read = Bytes::ceil(2.0 * 64 * 8 * 4096 * 128 * 2);  // the cache of 8 KV heads, FP16
    k.bytes_written = Bytes::ceil(64.0 * 32 * 128 * 2);
    const hw::KernelCost grouped = model->cost(g, k, {});
    CHECK_FALSE(grouped.compute_bound());  // a grouped decode kernel is HBM-bound
    k.issue_instructions = 8.0 * 64 * 32 * 4096 * 256;
    const hw::KernelCost per_head = model->cost(g, k, {});
    // 1.718e10 instructions / (132 x 128 x 1.83e9 per s) = 0.556 ms, above the 0.35 ms of HBM.
    CHECK(per_head.compute_time.seconds() == doctest::Approx(8.0 * 64 * 32 * 4096 * 256 / (132 * 128 * 1.83e9)));
    CHECK(per_head.compute_bound());
    CHECK(per_head.memory_time == grouped.memory_time);
    CHECK(per_head.duration == per_head.launch_overhead + per_head.compute_time);
    // A floor, not a sum: an instruction count below the FLOP time changes nothing.
    k.issue_instructions = 1.0;
    CHECK(model->cost(g, k, {}).duration == grouped.duration);
}
