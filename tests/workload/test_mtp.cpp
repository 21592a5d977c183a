// Multi-token prediction (model `mtp_layers`) and selective recompute of
// MLA's up projections (workload `recompute_modules: [mla_up_proj]`):
// parameter counts, the MTP module's operators and where the plan puts
// them, the extra GEMMs and the memory saved by mla_up_proj, and the
// refusals. Hand-computed on DeepSeek-V3 (docs/workload-model.md,
// "Multi-token prediction" and "Selective recompute").
#include "sim/config/data_dir.h"
#include "sim/config/model_loader.h"
#include "sim/config/scenario.h"
#include "sim/core/error.h"
#include "sim/hw/cost_model.h"
#include "sim/parallel/builder.h"
#include "sim/parallel/strategy.h"
#include "sim/workload/footprint.h"
#include "sim/workload/model.h"
#include "sim/workload/operators.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim;
using namespace sim::workload;

namespace {
ModelSpec deepseek(std::int64_t mtp) {
    ModelSpec m = config::load_model_file(config::model_path("deepseek-v3"));
    m.mtp_layers = mtp;
    return m;
}

const Operator* find(const std::vector<Operator>& ops, const std::string& name) {
    for (const auto& op : ops)
        if (op.kernel.name == name) return &op;
    return nullptr;
}

OperatorOptions grouped(int tp) {
    OperatorOptions o;
    o.tp = tp;
    o.sequence_parallel = tp > 1;
    o.moe.grouped_gemm = true;
    return o;
}

// DeepSeek-V3 with one MTP module, 64 tokens through module 0 under tp.
struct MtpPass {
    ModelSpec m = deepseek(1);
    OperatorOptions o;
    PassShape s{1, 64, 64};
    std::vector<Operator> fwd;
    explicit MtpPass(int tp) : o(grouped(tp)), fwd(mtp_forward(m, 0, 0, s, o)) {}
};

const std::string kMixtral = std::string(sim::config::data_dir()) + "/scenarios/moe-mixtral-8x7b-ep.yaml";
}  // namespace

TEST_CASE("MTP parameters: one MoE layer, the 2h x h projection and three norms a module; the total excludes them") {
    // DeepSeek-V3 (h = 7168): eh_proj 2 x 7168 x 7168 = 102 760 448, norms
    // 3 x 7168 = 21 504, so 102 781 952 besides the layer's 11 507 286 016
    // (test_moe_models.cpp): 11 610 067 968 for depth 1, twice for depth 2.
    const auto c0 = count_parameters(deepseek(0));
    const auto c1 = count_parameters(deepseek(1));
    const auto c2 = count_parameters(deepseek(2));
    CHECK(c0.mtp == 0);
    CHECK(c1.mtp_module == doctest::Approx(102'781'952.0));
    CHECK(c1.mtp == doctest::Approx(11'610'067'968.0));
    CHECK(c2.mtp == doctest::Approx(2 * 11'610'067'968.0));
    // The published 671B is the main model's (the report counts MTP apart).
    CHECK(c1.total == c0.total);
}

TEST_CASE("MTP module forward: embedding, enorm, hnorm, eh_proj [T, 2h] x [2h, h], layer 61, the shared head") {
    const MtpPass p(1);
    const ModelSpec& m = p.m;
    const OperatorOptions& o = p.o;
    const PassShape& s = p.s;
    const auto& ops = p.fwd;
    const Operator* eh = find(ops, "mtp_eh_proj");
    REQUIRE(eh != nullptr);
    // m = 64 tokens, n = 7168, k = 2 x 7168: 2 x 64 x 7168 x 14336 = 13 153 337 344 FLOPs.
    CHECK(eh->kernel.m == 64);
    CHECK(eh->kernel.n == 7168);
    CHECK(eh->kernel.k == 14336);
    CHECK(eh->kernel.flops.value == doctest::Approx(13'153'337'344.0));
    // RMSNorm, 4 FLOPs an element: 4 x 64 x 7168 = 1 835 008 each.
    REQUIRE(find(ops, "mtp_enorm") != nullptr);
    CHECK(find(ops, "mtp_hnorm")->kernel.flops.value == doctest::Approx(1'835'008.0));
    // The rest is the model's own: an embedding gather, one more MoE layer
    // (index 61, as the last MoE layer 60) and the head with its loss.
    const double parts = total_flops(embedding_forward(m, 0, s, o)) + 2 * 1'835'008.0 + 13'153'337'344.0 +
                         total_flops(layer_forward(m, 61, 0, s, o)) + total_flops(head_forward(m, 0, s, o, true));
    CHECK(total_flops(ops) == doctest::Approx(parts));
    CHECK(total_flops(layer_forward(m, 61, 0, s, o)) == doctest::Approx(total_flops(layer_forward(m, 60, 0, s, o))));
    // Backward: the head's, layer 61's, eh_proj's two GEMMs (2 x 13 153 337 344), the norms', the embedding's.
    const auto bwd = mtp_backward(m, 0, 0, s, o, Recompute::none);
    const double bwd_parts = total_flops(head_backward(m, 0, s, o)) +
                             total_flops(layer_backward(m, 61, 0, s, o, Recompute::none)) + 2 * 13'153'337'344.0 +
                             2 * 2 * 1'835'008.0 + total_flops(embedding_backward(m, 0, s, o));
    CHECK(total_flops(bwd) == doctest::Approx(bwd_parts));
    // Only mtp_layers modules exist.
    CHECK_THROWS_AS(mtp_forward(m, 1, 0, s, o), InternalError);
    CHECK_THROWS_AS(mtp_forward(deepseek(0), 0, 0, s, o), InternalError);
}

TEST_CASE("MTP under tp 2 with sp: eh_proj gathers [T, 2h], its h / 2 columns are all-gathered back") {
    const MtpPass p(2);
    const Operator* eh = find(p.fwd, "mtp_eh_proj");
    REQUIRE(eh != nullptr);
    CHECK(eh->kernel.n == 3584);
    // T x 2h x 2 bytes = 64 x 14336 x 2 = 1 835 008 gathered before it; T x h x 2 = 917 504 after.
    CHECK(eh->tp_sync == TpSync::before_column_parallel);
    CHECK(eh->tp_sync_bytes.value == 1'835'008u);
    const Operator* split = find(p.fwd, "mtp_eh_split");
    REQUIRE(split != nullptr);
    CHECK(split->tp_sync == TpSync::before_column_parallel);
    CHECK(split->tp_sync_bytes.value == 917'504u);
    // Backward: the split's gather and the column gather's reduce-scatter, T x h each.
    const auto bwd = mtp_backward(p.m, 0, 0, p.s, p.o, Recompute::none);
    CHECK(find(bwd, "mtp_eh_split_bwd")->tp_sync_bytes.value == 917'504u);
    CHECK(find(bwd, "mtp_eh_gather_bwd")->tp_sync == TpSync::after_row_parallel);
    // tp 1: no split at all.
    CHECK(find(MtpPass(1).fwd, "mtp_eh_split") == nullptr);
}

TEST_CASE("MTP in a training plan: one module a micro-batch on the last stage only, its weights there") {
    // Mixtral 8x7B, tp 2 x pp 4 x dp 2, 128 micro-batches (global batch 256 over dp 2).
    const auto cm = hw::make_cost_model("roofline");
    const auto plan_of = [&](const std::string& mtp) {
        auto sc = config::load_scenario(kMixtral, {config::parse_override("model.mtp_layers=" + mtp)});
        return parallel::build_plan(sc, sc.strategies.front(), *cm, {});
    };
    const auto count = [](const parallel::PlanBuild& b, const std::string& name) {
        int n = 0;
        for (const auto& t : b.plan.tasks)
            n += t.kind == parallel::TaskKind::kernel && b.plan.kernels[t.kernel].name == name;
        return n;
    };
    const auto with = plan_of("1");
    // One forward and one backward per micro-batch on each simulated GPU of
    // the last stage; the stage's layers are the same as without MTP.
    const int eh = count(with, "mtp_eh_proj");
    CHECK(eh > 0);
    CHECK(eh % 128 == 0);
    CHECK(eh == count(with, "mtp_eh_proj_dgrad"));
    CHECK(count(with, "mtp_lm_head") == eh);
    CHECK(count(with, "lm_head") == eh);
    CHECK(count(plan_of("0"), "mtp_eh_proj") == 0);
    // Memory of the last stage: one more layer (8 experts of 3 x 4096 x 14336,
    // attention 4096 x 6144 + 4096 x 4096, router 4096 x 8, 2 norms) over
    // tp 2, eh_proj 2 x 4096 x 2048 and 3 norms, the embedding's 16000 x 4096
    // table half: in bf16, ZeRO-1 (weights unsharded).
    const auto sc = config::load_scenario(kMixtral, {config::parse_override("model.mtp_layers=1")});
    auto rs = parallel::resolve_degrees(sc, sc.strategies.front());
    const auto vs = parallel::split_layers(sc, sc.strategies.front(), rs, *cm);
    const auto sc0 = config::load_scenario(kMixtral, {config::parse_override("model.mtp_layers=0")});
    const auto b1 = parallel::stage_memory(sc, rs, 3, vs);
    const auto b0 = parallel::stage_memory(sc0, rs, 3, vs);
    const double layer = (8.0 * 3 * 4096 * 14336 + 4096.0 * 6144 + 4096.0 * 4096) / 2 + 4096.0 * 8 + 2 * 4096;
    const double module = 2.0 * 4096 * 2048 + 3 * 4096 + 16000.0 * 4096;
    CHECK(b1.weights - b0.weights == doctest::Approx(2 * (layer + module)));
    // The first stage is unchanged.
    CHECK(parallel::stage_memory(sc, rs, 0, vs).weights == parallel::stage_memory(sc0, rs, 0, vs).weights);
}

TEST_CASE("mla_up_proj recompute: q_up and kv_up run again in the backward; Q, K, V are not kept") {
    const ModelSpec m = deepseek(0);
    OperatorOptions o = grouped(2);
    const PassShape s{1, 64, 64};
    const auto plain = layer_backward(m, 0, 0, s, o, Recompute::selective);
    o.recompute_modules.mla_up_proj = true;
    const auto up = layer_backward(m, 0, 0, s, o, Recompute::selective);
    // Per shard, 64 heads: q_up 2 x 64 x 1536 x (64 x 192) = 2 415 919 104;
    // kv_up 2 x 64 x 512 x (64 x 256) = 1 073 741 824.
    REQUIRE(find(up, "recompute_q_up") != nullptr);
    REQUIRE(find(up, "recompute_kv_up") != nullptr);
    CHECK(find(plain, "recompute_q_up") == nullptr);
    CHECK(total_flops(up) - total_flops(plain) == doctest::Approx(2'415'919'104.0 + 1'073'741'824.0));
    // Memory: per token and shard Q and K (64 x 192) and V (64 x 128) in
    // bf16 go: 2 x 64 x (2 x 192 + 128) = 65 536 bytes, x 64 tokens = 4 194 304.
    o.recompute_modules.mla_up_proj = false;
    const double kept = static_cast<double>(layer_activation_bytes(m, s, o, Recompute::selective).value);
    o.recompute_modules.mla_up_proj = true;
    const double less = static_cast<double>(layer_activation_bytes(m, s, o, Recompute::selective).value);
    CHECK(kept - less == doctest::Approx(4'194'304.0));
    // Without core_attn in the list the attention core is not recomputed;
    // with it (the default) it is, as plain `selective`.
    o.recompute_modules.core_attn = false;
    const auto up_only = layer_backward(m, 0, 0, s, o, Recompute::selective);
    CHECK(total_flops(up_only) < total_flops(up));
    // Under recompute: none the list does nothing.
    CHECK(total_flops(layer_backward(m, 0, 0, s, o, Recompute::none)) ==
          doctest::Approx(total_flops(layer_backward(m, 0, 0, s, grouped(2), Recompute::none))));
}

TEST_CASE("refusals: recompute_modules without selective, mla_up_proj without MLA, mtp_layers out of range") {
    const auto refused = [](const std::vector<std::string>& sets, const std::string& what,
                            const std::string& file = "--set ") {
        std::vector<config::Override> ov;
        for (const auto& s : sets) ov.push_back(config::parse_override(s));
        try {
            config::load_scenario(kMixtral, ov);
            FAIL("accepted " << sets.front());
        } catch (const ConfigError& e) {
            CHECK(std::string(e.what()).find(what) != std::string::npos);
            CHECK(std::string(e.what()).find(file) != std::string::npos);
        }
    };
    refused({"workload.recompute_modules=[core_attn]"}, "recompute_modules needs recompute: selective");
    refused({"workload.recompute=selective", "workload.recompute_modules=[mla_up_proj]"},
            "mla_up_proj needs multi-head latent attention");
    refused({"workload.recompute=selective", "workload.recompute_modules=[attn]"}, "core_attn");
    refused({"model.mtp_layers=17"}, "mtp_layers");
    // Accepted: core_attn alone under selective.
    const auto sc = config::load_scenario(kMixtral, {config::parse_override("workload.recompute=selective"),
                                                     config::parse_override("workload.recompute_modules=[core_attn]")});
    CHECK(sc.workload.recompute_modules.core_attn);
    CHECK_FALSE(sc.workload.recompute_modules.mla_up_proj);
}

TEST_SUITE_END();
