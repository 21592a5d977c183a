// Data parallelism's passes and ordering: ZeRO-3 (PyTorch FSDP's reduce every
// micro-batch, its gather order and FP32 reduce, no post-step gather, the
// stack's passes over the unsharded gradient), Megatron's passes over each
// gradient bucket and its delayed reduce on later pipeline ranks, and a
// profile's optimizer bytes per parameter. Expectations are written out by hand.
#include "sim/config/scenario.h"
#include "sim/hw/cost_model.h"
#include "sim/parallel/builder.h"
#include "sim/report/runner.h"

#include "tests/parallel/scenario_support.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim;
using parasim_test::kData;
using parasim_test::scenario;
using parasim_test::strategy;

TEST_CASE("ZeRO-3: FSDP reduces every micro-batch, gathers the next layer before this one's reduce, FP32 reduce") {
    const auto cm = hw::make_cost_model("roofline");
    // 2 GPUs, dp 2, ZeRO-3: 2 micro-batches per rank (global 4 over dp 2, micro 1), 2 layers.
    auto sc = scenario(kData + "cp-training.yaml", {"strategies[1].zero=3"});
    // overlap.grad_reduce (set below): buckets during the backward, so the issue order shows.
    // Per layer: QKV 4096 x (4096 + 2 x 8 x 128), output 4096^2, SwiGLU 3 x 4096 x 14336, two RMSNorm weights.
    const double layer = 4096.0 * 6144 + 4096.0 * 4096 + 3.0 * 4096 * 14336 + 2 * 4096;
    struct Counts {
        int layer_reduces = 0, other_reduces = 0;
        double layer_bytes = 0;
        bool gather_ahead =
            true;  // each backward all-gather of layer 0 comes before that micro-batch's reduce of layer 1
    };
    const auto count = [&](const config::ScenarioSpec& s) {
        auto spec = strategy(s, "dp2");
        spec.overlap.grad_reduce = true;
        const auto b = parallel::build_plan(s, spec, *cm, {});
        Counts c;
        std::map<int, std::size_t> gather0, reduce1;  // micro-batch -> task index
        for (std::size_t i = 0; i < b.plan.tasks.size(); ++i) {
            const auto& t = b.plan.tasks[i];
            if (t.kind != parallel::TaskKind::collective || t.phase != parallel::Phase::backward) continue;
            if (t.op == net::CollectiveOp::reduce_scatter) {
                (t.layer >= 0 ? c.layer_reduces : c.other_reduces)++;
                if (t.layer >= 0) c.layer_bytes = t.bytes.as_double();
                if (t.layer == 1) reduce1[t.microbatch] = i;
            }
            if (t.op == net::CollectiveOp::all_gather && t.layer == 0) {
                gather0[t.microbatch] = i;
                CHECK(t.dep_count == 0);  // a prefetch: it waits for nothing but the stream
            }
        }
        for (const auto& e : reduce1)
            c.gather_ahead = c.gather_ahead && gather0.count(e.first) && gather0[e.first] < e.second;
        return c;
    };
    // The default profile: only the last micro-batch reduces, 2 bytes a BF16 gradient.
    const Counts last = count(sc);
    CHECK(last.layer_reduces == 2);  // 2 layers x 1 micro-batch
    CHECK(last.other_reduces == 2);  // the embedding's bucket and the (untied) LM head's
    CHECK(last.layer_bytes == doctest::Approx(2 * layer));
    CHECK(last.gather_ahead);
    // Composer's FSDP: every micro-batch reduce-scatters its gradients.
    sc.profile.grad_sync_every_microbatch = true;
    const Counts every = count(sc);
    CHECK(every.layer_reduces == 2 * 2);
    CHECK(every.other_reduces == 2 * last.other_reduces);
    CHECK(every.gather_ahead);
    // Megatron's BF16 rule: gradients reduced in FP32, twice the bytes.
    sc.profile.grad_reduce_dtype = "fp32_if_bf16";
    CHECK(count(sc).layer_bytes == doctest::Approx(4 * layer));
    // ZeRO-1 keeps one reduce per bucket per iteration whatever the profile says (gradients unsharded).
    auto z1 = scenario(kData + "cp-training.yaml", {"strategies[1].zero=1"});
    z1.profile.grad_sync_every_microbatch = true;
    CHECK(count(z1).layer_reduces == 2);
}

TEST_CASE("ZeRO-3: no parameter all-gather after the optimizer; the stack's passes over the unsharded gradient") {
    const auto cm = hw::make_cost_model("roofline");
    const double layer = 4096.0 * 6144 + 4096.0 * 4096 + 3.0 * 4096 * 14336 + 2 * 4096;  // as above
    struct Seen {
        int optimizer_gathers = 0, passes = 0;
        double pass_read = 0, pass_written = 0, reduce_bytes = 0;
        bool reduce_waits_for_pass = true;
    };
    const auto look = [&](const config::ScenarioSpec& s) {
        const auto b = parallel::build_plan(s, strategy(s, "dp2"), *cm, {});
        Seen seen;
        for (std::size_t i = 0; i < b.plan.tasks.size(); ++i) {
            const auto& t = b.plan.tasks[i];
            if (t.kind == parallel::TaskKind::collective && t.phase == parallel::Phase::optimizer &&
                t.op == net::CollectiveOp::all_gather)
                ++seen.optimizer_gathers;
            if (t.kind == parallel::TaskKind::kernel && b.plan.kernels[t.kernel].name == "grad_shard_passes") {
                ++seen.passes;
                seen.pass_read = b.plan.kernels[t.kernel].bytes_read.as_double();
                seen.pass_written = b.plan.kernels[t.kernel].bytes_written.as_double();
            }
            if (t.kind == parallel::TaskKind::collective && t.op == net::CollectiveOp::reduce_scatter)
                seen.reduce_bytes = std::max(seen.reduce_bytes, t.bytes.as_double());
        }
        return seen;
    };
    // ZeRO-1 (the distributed optimizer) gathers the updated parameters after the step; ZeRO-3 does not.
    CHECK(look(scenario(kData + "cp-training.yaml", {"strategies[1].zero=1"})).optimizer_gathers == 1);
    auto z3 = scenario(kData + "cp-training.yaml", {"strategies[1].zero=3"});
    CHECK(look(z3).optimizer_gathers == 0);
    CHECK(look(z3).passes == 0);  // the default profile makes none
    // Two passes, the last micro-batch only (2 layers): 2 x 2 bytes a BF16 gradient read per layer.
    z3.profile.grad_shard_passes = 2;
    Seen two = look(z3);
    CHECK(two.passes == 2);
    CHECK(two.pass_read == doctest::Approx(2 * 2 * layer));
    CHECK(two.pass_written == doctest::Approx(2 * 2 * layer));
    // Reduced in FP32 (Composer's DEFAULT FSDP mixed precision): the first pass
    // stays BF16 (r 2, w 2), the cast reads 2 and writes 4, the second pass is
    // FP32 (r 4, w 4): 8 bytes read and 10 written a parameter; the
    // reduce-scatter carries 4 bytes a parameter where it carried 2.
    auto wide = z3;
    wide.profile.grad_reduce_dtype = "fp32";
    const Seen fp32 = look(wide);
    CHECK(fp32.passes == 2);
    CHECK(fp32.pass_read == doctest::Approx(8 * layer));
    CHECK(fp32.pass_written == doctest::Approx(10 * layer));
    CHECK(fp32.reduce_bytes == doctest::Approx(2 * two.reduce_bytes));
    // Every micro-batch's reduce-scatter gets its passes (2 micro-batches x 2 layers).
    z3.profile.grad_sync_every_microbatch = true;
    CHECK(look(z3).passes == 4);
    // Unsharded gradients (ZeRO-1): no reduce-scatter of a whole layer's gradient per micro-batch, no passes.
    auto z1 = scenario(kData + "cp-training.yaml", {"strategies[1].zero=1"});
    z1.profile.grad_shard_passes = 2;
    CHECK(look(z1).passes == 0);
}

TEST_CASE(
    "Megatron's passes over each gradient bucket (grad_prereduce) and delay_grad_reduce on later pipeline ranks") {
    const auto cm = hw::make_cost_model("roofline");
    const double layer = 4096.0 * 6144 + 4096.0 * 4096 + 3.0 * 4096 * 14336 + 2 * 4096;  // as above
    // ZeRO-1 (the distributed optimizer), dp 2, gradients reduced in FP32 as Megatron does for BF16.
    auto sc = scenario(kData + "cp-training.yaml", {"strategies[1].zero=1"});
    sc.profile.grad_reduce_dtype = "fp32_if_bf16";
    const auto build = [&](const config::ScenarioSpec& s) {
        auto spec = strategy(s, "dp2");
        spec.overlap.grad_reduce = true;
        return parallel::build_plan(s, spec, *cm, {});
    };
    const auto named = [](const parallel::PlanBuild& b, const parallel::Task& t, const char* name) {
        return t.kind == parallel::TaskKind::kernel && b.plan.kernels[t.kernel].name == name;
    };
    const auto count = [&](const parallel::PlanBuild& b, const char* name) {
        int n = 0;
        for (const auto& t : b.plan.tasks) n += named(b, t, name);
        return n;
    };
    CHECK(count(build(sc), "grad_nan_check") == 0);  // the default profile makes none
    sc.profile.grad_prereduce_nan_check = sc.profile.grad_prereduce_scale = true;
    const auto b = build(sc);
    // One of each per bucket of the last micro-batch: 2 layers, the embedding and the (untied) head.
    CHECK(count(b, "grad_nan_check") == 4);
    CHECK(count(b, "grad_scale") == 4);
    for (std::size_t i = 0; i < b.plan.tasks.size(); ++i) {
        const auto& t = b.plan.tasks[i];
        if (t.layer != 1) continue;
        if (t.kind == parallel::TaskKind::collective && t.op == net::CollectiveOp::reduce_scatter) {
            // 4 bytes a parameter (FP32), after the scale of its own bucket.
            CHECK(t.bytes.as_double() == doctest::Approx(4 * layer));
            REQUIRE(t.dep_count == 1);
            CHECK(named(b, b.plan.tasks[b.plan.deps[t.dep_begin]], "grad_scale"));
        }
    }
    for (const auto& t : b.plan.tasks) {
        if (!named(b, t, "grad_nan_check") && !named(b, t, "grad_scale")) continue;
        const auto& k = b.plan.kernels[t.kernel];
        if (k.bytes_read.as_double() < layer) continue;  // the embedding's and head's small buckets
        // The norm reads the FP32 bucket once; the scale reads and writes it, after the host read the norm.
        const bool scale = named(b, t, "grad_scale");
        CHECK(k.bytes_read.as_double() == doctest::Approx(4 * layer));
        CHECK(k.bytes_written.as_double() == doctest::Approx(scale ? 4 * layer : 0.0));
        CHECK(k.host_sync == scale);
    }
    // The norm alone: the host waits before it.
    sc.profile.grad_prereduce_scale = false;
    const auto nan_only = build(sc);
    for (const auto& t : nan_only.plan.tasks)
        if (named(nan_only, t, "grad_nan_check")) CHECK(nan_only.plan.kernels[t.kernel].host_sync);
    CHECK(count(nan_only, "grad_scale") == 0);
    // dp 1: no gradient collective, no passes.
    CHECK(count(build(scenario(kData + "cp-training.yaml", {"strategies[1].dp=1", "gpus=1"})), "grad_scale") == 0);

    // pp 2 x dp 2, one layer a stage: the last stage's passes come before its
    // last backward send, unless delay_grad_reduce moves its buckets after its schedule.
    auto pp = scenario(kData + "cp-training.yaml", {"strategies[1].zero=1", "strategies[1].pp=2", "gpus=4"});
    pp.profile.grad_reduce_dtype = "fp32_if_bf16";
    pp.profile.grad_prereduce_nan_check = pp.profile.grad_prereduce_scale = true;
    // Task indices on the last stage's GPU: its last backward send, its first pass.
    const auto order = [&](const config::ScenarioSpec& s) {
        const auto pb = build(s);
        std::uint32_t last_gpu = 0;
        for (const auto& t : pb.plan.tasks)
            if (named(pb, t, "lm_head")) last_gpu = t.gpu;
        std::size_t send = 0, pass = SIZE_MAX;
        for (std::size_t i = 0; i < pb.plan.tasks.size(); ++i) {
            const auto& t = pb.plan.tasks[i];
            if (t.gpu != last_gpu) continue;
            if (t.kind == parallel::TaskKind::transfer && t.phase == parallel::Phase::backward) send = i;
            if (named(pb, t, "grad_nan_check")) pass = std::min(pass, i);
        }
        return std::pair{send, pass};
    };
    const auto inline_order = order(pp);
    CHECK(inline_order.second < inline_order.first);
    pp.profile.delay_grad_reduce = true;
    const auto delayed = order(pp);
    CHECK(delayed.second > delayed.first);
}

TEST_CASE("training: a profile's optimizer bytes per parameter set the optimizer step's traffic") {
    auto cm = hw::make_roofline_cost_model();
    const auto step_bytes = [&](const config::ScenarioSpec& s) {
        const auto b = parallel::build_plan(s, strategy(s, "dp2"), *cm, {});
        double read = -1, written = -1, params = -1;
        for (const auto& t : b.plan.tasks)
            if (t.kind == parallel::TaskKind::kernel && t.phase == parallel::Phase::optimizer) {
                const auto& k = b.plan.kernels[t.kernel];
                read = k.bytes_read.as_double();
                written = k.bytes_written.as_double();
                params = k.flops.value / 12.0;  // Adam: 12 FLOPs a parameter (docs/workload-model.md §6)
            }
        return std::array<double, 3>{read, written, params};
    };
    auto s = scenario(kData + "cp-training.yaml", {"strategies[1].zero=1"});
    const auto fused = step_bytes(s);
    REQUIRE(fused[2] > 0);
    // The fused kernel with BF16 weights: 14 bytes read and 14 written a parameter.
    CHECK(fused[0] + fused[1] == doctest::Approx(28 * fused[2]));
    s.profile.optimizer_bytes_per_param = 100;
    const auto unfused = step_bytes(s);
    CHECK(unfused[2] == doctest::Approx(fused[2]));  // same parameters, same FLOPs
    CHECK(unfused[0] == doctest::Approx(50 * fused[2]));
    CHECK(unfused[1] == doctest::Approx(50 * fused[2]));
}

TEST_SUITE_END();
