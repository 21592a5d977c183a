// A measured router load per MoE layer, `routing: histogram(FILE)` with a
// `layer` column (docs/moe.md section 2): each layer's own straggler, the
// pooled shares for a prediction layer without rows, each layer's own
// activation memory (the worst layer's without a layer), each layer's own
// all-to-all bytes in the emitted operators, and the reader's and checker's
// file:line messages.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "sim/config/data_dir.h"
#include "sim/config/expert_histogram.h"
#include "sim/config/model_loader.h"
#include "sim/config/scenario.h"
#include "sim/core/error.h"
#include "sim/hw/cost_model.h"
#include "sim/parallel/strategy.h"
#include "sim/workload/footprint.h"
#include "sim/workload/moe.h"
#include "sim/workload/operators.h"
#include "tests/test_util.h"

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim::workload;

namespace {

std::string csv(const std::string& name, const std::string& text) {
    const auto p = parasim_test::private_temp(name);
    std::ofstream(p) << text;
    return p.string();
}

MoeRouting routing_of(const std::string& path) {
    MoeRouting r;
    r.kind = MoeRouting::Kind::histogram;
    r.histogram = std::make_shared<const ExpertHistogram>(sim::config::read_expert_histogram(path));
    return r;
}

// A model of 4 experts: layer 0 dense, MoE layers 1 to 3, one prediction layer (4).
ModelSpec small_model() {
    ModelSpec m;
    m.name.assign(1, 'm');  // (assigning "m" trips GCC 12's -Wrestrict false positive here)
    m.layers = 4;
    m.first_dense_layers = 1;
    m.mtp_layers = 1;
    m.experts = 4;
    m.top_k = 1;
    return m;
}

// Layer 1: 3,1,1,0; layer 2: 0,1,1,2; layer 3: 1,1,1,1 (rows out of order).
const std::string kThreeLayers =
    "# per layer\nlayer,expert,tokens\n2,0,0\n2,1,1\n2,2,1\n2,3,2\n1,0,3\n1,1,1\n1,2,1\n1,3,0\n"
    "3,3,1\n3,2,1\n3,1,1\n3,0,1\n";

// The message read_expert_histogram, then check_expert_histogram against
// small_model(), raise for `text` ("no error" when none).
std::string error_of(const std::string& text) {
    const std::string path = csv("bad-layer-histogram.csv", text);
    try {
        sim::config::check_expert_histogram(routing_of(path), small_model());
    } catch (const sim::ConfigError& e) {
        std::string what = e.what();
        const auto at = what.find("bad-layer-histogram.csv");
        return at == std::string::npos ? what : what.substr(at);
    }
    return "no error";
}

}  // namespace

TEST_CASE("per-layer histogram: two layers with different hot experts have different stragglers") {
    const MoeRouting r = routing_of(csv("three-layers.csv", kThreeLayers));
    REQUIRE(r.histogram->per_layer);
    CHECK(r.histogram->layers.size() == 3);
    CHECK_NOTHROW(sim::config::check_expert_histogram(r, small_model()));
    // E = 4, k = 1, ep = 2, T = 60 a rank: R = 120 copies, the cap 120 does not bind.
    // Layer 1: shares 3/5, 1/5, 1/5, 0: 72, 24, 24, 0; rank 0 (experts 0, 1) computes 96.
    const ExpertLoad l1 = expert_load(4, 1, 2, 60, r, 1);
    CHECK(l1.per_expert == std::vector<std::int64_t>{72, 24, 24, 0});
    CHECK(l1.hot_rank == 0);
    CHECK(l1.hot_tokens == 96);
    // Layer 2: 0, 1/4, 1/4, 1/2: 0, 30, 30, 60; rank 1 (experts 2, 3) computes 90.
    const ExpertLoad l2 = expert_load(4, 1, 2, 60, r, 2);
    CHECK(l2.per_expert == std::vector<std::int64_t>{0, 30, 30, 60});
    CHECK(l2.hot_rank == 1);
    CHECK(l2.hot_tokens == 90);
    // Layer 3: flat, 30 each: 60, as balanced.
    CHECK(expert_load(4, 1, 2, 60, r, 3).hot_tokens == 60);
    // The prediction layer 4 has no rows: the pooled shares, the mean of the
    // three layers' (0.85, 0.7, 0.7, 0.75) / 3 of 120: 34, 28, 28, 30;
    // rank 0 computes 62, below the per-layer stragglers' mean (96 + 90 + 60) / 3 = 82.
    const ExpertLoad pooled = expert_load(4, 1, 2, 60, r, 4);
    CHECK(pooled.per_expert == std::vector<std::int64_t>{34, 28, 28, 30});
    CHECK(pooled.hot_tokens == 62);
    CHECK(expert_load(4, 1, 2, 60, r).hot_tokens == 62);  // kPooledMoeLayer
    // The worst layer, for activation memory: 96.
    CHECK(loads_differ_by_layer(r));
    CHECK(worst_hot_tokens(4, 1, 2, 60, r, 1, 5) == 96);
    CHECK(worst_hot_tokens(4, 1, 2, 60, r, 2, 4) == 90);
}

TEST_CASE("per-layer histogram with the same rows in every layer routes as one histogram, flat as balanced") {
    std::string rows = "layer,expert,share\n";
    for (int l = 0; l < 32; ++l)
        for (int e = 0; e < 8; ++e) rows += fmt::format("{},{},{}\n", l, e, 0.125);
    const MoeRouting r = routing_of(csv("flat-layers.csv", rows));
    MoeRouting balanced;
    for (const std::int64_t l : {0, 17, 31}) {
        const ExpertLoad a = expert_load(8, 2, 8, 512, r, l), b = expert_load(8, 2, 8, 512, balanced);
        CHECK(a.per_expert == b.per_expert);
        CHECK(a.hot_tokens == b.hot_tokens);
    }
    MoeRouting z;
    CHECK_FALSE(loads_differ_by_layer(z));
}

TEST_CASE(
    "Mixtral under ep 8 with a per-layer histogram: each layer's exchanges, expert GEMMs and activations carry its "
    "own load") {
    const ModelSpec m = sim::config::load_model_file(sim::config::model_path("mixtral-8x7b"));
    // Layer 0: expert 0 weighs 3, the others 1 (3/10 of 16 000 copies: 4800);
    // layer 1: experts 4 and 5 weigh 2 (3200 each, rank 4 the lowest of the
    // tied); the other 30 layers flat (2000 each).
    std::string rows = "layer,expert,tokens\n";
    for (int l = 0; l < 32; ++l)
        for (int e = 0; e < 8; ++e)
            rows += fmt::format("{},{},{}\n", l, e, l == 0 && e == 0 ? 3 : l == 1 && (e == 4 || e == 5) ? 2 : 1);
    OperatorOptions o;
    o.ep = 8;
    o.moe = routing_of(csv("mixtral-layers.csv", rows));
    sim::config::check_expert_histogram(o.moe, m);
    const PassShape s{1, 1000, 1000};
    const auto a2a = [&](std::int64_t layer) {
        std::vector<std::uint64_t> sizes;
        for (const auto& op : layer_forward(m, layer, 0, s, o))
            if (op.ep_a2a_bytes.value > 0) sizes.push_back(op.ep_a2a_bytes.value);
        return sizes;
    };
    // The hot rank's tokens x 4096 x 2 bytes, dispatch and combine.
    CHECK(a2a(0) == std::vector<std::uint64_t>{39321600u, 39321600u});  // 4800 tokens
    CHECK(a2a(1) == std::vector<std::uint64_t>{26214400u, 26214400u});  // 3200
    CHECK(a2a(2) == std::vector<std::uint64_t>{16384000u, 16384000u});  // 2000
    CHECK(a2a(31) == a2a(2));
    // The expert GEMMs' m: one local expert a rank, its tokens.
    const auto up_m = [&](std::int64_t layer) {
        for (const auto& op : layer_forward(m, layer, 0, s, o))
            if (op.kernel.name.rfind("expert", 0) == 0 && op.kernel.kind == sim::hw::KernelKind::gemm)
                return op.kernel.m;
        return std::int64_t{0};
    };
    CHECK(up_m(0) == 4800);
    CHECK(up_m(1) == 3200);
    CHECK(up_m(2) == 2000);
    // Activation memory: each layer keeps its hot rank's copies, each its
    // input (4096) and its gate, up and down inputs (3 x 14336), 2 bytes each
    // (docs/moe.md section 5); Approx: each footprint is rounded up to a
    // whole byte once.
    const auto act = [&](const OperatorOptions& p, std::int64_t layer) {
        return static_cast<double>(layer_activation_bytes(m, s, p, Recompute::none, layer).value);
    };
    const double per_token = (4096 + 3 * 14336) * 2.0;
    CHECK(act(o, 0) - act(o, 2) == doctest::Approx(2800 * per_token).epsilon(1e-8));
    CHECK(act(o, 1) - act(o, 2) == doctest::Approx(1200 * per_token).epsilon(1e-8));
    CHECK(act(o, 31) == act(o, 2));
    // Without a layer, the worst layer's (layer 0's 4800), as the one
    // histogram of layer 0's rows gives every layer.
    std::string worst = "expert,tokens\n";
    for (int e = 0; e < 8; ++e) worst += fmt::format("{},{}\n", e, e == 0 ? 3 : 1);
    OperatorOptions w = o;
    w.moe = routing_of(csv("mixtral-worst.csv", worst));
    CHECK(act(o, kAnyMoeLayer) == act(o, 0));
    CHECK(act(w, 2) == act(o, 0));
    CHECK(act(w, kAnyMoeLayer) == act(o, 0));
}

TEST_CASE("a stage's activation memory under a per-layer histogram: the mean of its layers' own, times its layers") {
    // Mixtral, pp 2 (16 layers a stage), dp 8, ep 8 (the scenario's second
    // strategy), without its full recompute (which keeps the layer input only).
    // Layer 0 hot (expert 0 weighs 3), the other 31 flat.
    auto sc =
        sim::config::load_scenario(std::string(sim::config::data_dir()) + "/scenarios/moe-mixtral-8x7b-ep.yaml", {});
    sc.workload.recompute = Recompute::selective;
    const auto& spec = sc.strategies[1];
    auto rs = sim::parallel::resolve_degrees(sc, spec);
    const auto cm = sim::hw::make_cost_model("roofline");
    const auto vs = sim::parallel::split_layers(sc, spec, rs, *cm);
    std::string rows = "layer,expert,tokens\n", flat = "expert,tokens\n", hot = flat;
    for (int l = 0; l < 32; ++l)
        for (int e = 0; e < 8; ++e) rows += fmt::format("{},{},{}\n", l, e, l == 0 && e == 0 ? 3 : 1);
    for (int e = 0; e < 8; ++e) {
        flat += fmt::format("{},1\n", e);
        hot += fmt::format("{},{}\n", e, e == 0 ? 3 : 1);
    }
    const auto activations = [&](const std::string& name, const std::string& text, int stage) {
        sc.workload.moe = routing_of(csv(name, text));
        return sim::parallel::stage_memory(sc, rs, stage, vs).activations;
    };
    // Stage 0 holds the hot layer among its 16: one layer's excess over the
    // flat load, where the worst layer's for every layer gives 16 of them.
    const double excess = activations("stage-layers.csv", rows, 0) - activations("stage-flat.csv", flat, 0);
    CHECK(excess > 0);
    CHECK(16 * excess ==
          doctest::Approx(activations("stage-hot.csv", hot, 0) - activations("stage-flat.csv", flat, 0)));
    // Stage 1's layers are all flat.
    CHECK(activations("stage-layers.csv", rows, 1) == doctest::Approx(activations("stage-flat.csv", flat, 1)));
}

TEST_CASE("a per-layer histogram file: layers by model index, the pooled shares beside them") {
    const ExpertHistogram h = sim::config::read_expert_histogram(csv("read-layers.csv", kThreeLayers));
    CHECK(h.per_layer);
    CHECK(h.weights(1) == std::vector<double>{3, 1, 1, 0});
    CHECK(h.weights(2) == std::vector<double>{0, 1, 1, 2});
    CHECK(h.layers.at(2).line == std::vector<int>{3, 4, 5, 6});
    CHECK(h.layers.at(2).last_line == 6);
    CHECK(h.last_line == 14);
    // Layer 4 has no rows: the pooled shares 0.6 + 0 + 0.25, ...
    CHECK(h.weights(4) == h.weight);
    REQUIRE(h.weight.size() == 4);
    CHECK(h.weight[0] == doctest::Approx(0.85));
    CHECK(h.weight[3] == doctest::Approx(0.75));
    CHECK(error_of(kThreeLayers) == "no error");
    // The prediction layer may have its own rows.
    CHECK(error_of(kThreeLayers + "4,0,1\n4,1,1\n4,2,1\n4,3,1\n") == "no error");
}

TEST_CASE("a bad per-layer histogram stops at its file:line with the row") {
    const std::string head = "layer,expert,tokens\n";
    // Reading:
    CHECK(error_of(head + "x,0,1\n") ==
          "bad-layer-histogram.csv:2:1: row 'x,0,1': layer 'x' is not a whole number "
          "from 0 to 1048572 (the model's layer index, from 0)");
    CHECK(error_of(head + "-1,0,1\n").find("bad-layer-histogram.csv:2:1: row '-1,0,1': layer '-1' is not") == 0);
    CHECK(error_of(head + "1,y,1\n") ==
          "bad-layer-histogram.csv:2:1: row '1,y,1': expert 'y' is not a whole number from 0 to 999");
    CHECK(error_of(head + "1,0,-2\n") ==
          "bad-layer-histogram.csv:2:1: row '1,0,-2': '-2' is not a finite number "
          ">= 0 (the tokens or share of expert 0)");
    CHECK(error_of(head + "1,0,1\n2,0,1\n1,0,2\n") ==
          "bad-layer-histogram.csv:4:1: row '1,0,2': expert 0 in layer 1 has a row already, at line 2");
    CHECK(error_of(head + "1,0\n") == "bad-layer-histogram.csv:2:1: row '1,0': expected 3 fields, got 2");
    // Expert ids that skip: 66 layers whose tables would reach expert 999.
    std::string sparse = head;
    for (int l = 0; l < 66; ++l) sparse += fmt::format("{},999,1\n", l);
    CHECK(error_of(sparse) ==
          "bad-layer-histogram.csv:67:1: row '65,999,1': the layers' expert ids would span more "
          "than 65536 experts in all: each layer needs one row for each of its experts 0 to E - 1");
    // Against the model (dense layer 0, MoE layers 1 to 3, prediction layer 4):
    CHECK(error_of(kThreeLayers + "5,0,1\n") ==
          "bad-layer-histogram.csv:15:1: row '5,0,1': layer 5 is past the 5 "
          "layers of model 'm' (its MoE layers are 1 to 3, its prediction "
          "layers 4 to 4)");
    CHECK(error_of(kThreeLayers + "0,0,1\n") ==
          "bad-layer-histogram.csv:15:1: row '0,0,1': layer 0 is one of the 1 "
          "dense layers of model 'm' (no experts; its MoE layers are 1 to 3, "
          "its prediction layers 4 to 4)");
    CHECK(error_of(kThreeLayers + "3,4,1\n") ==
          "bad-layer-histogram.csv:15:1: row '3,4,1': expert 4 is past the 4 experts of model 'm' (ids 0 to 3)");
    CHECK(error_of(head + "1,0,1\n1,2,1\n2,0,1\n2,1,1\n2,2,1\n2,3,1\n") ==
          "bad-layer-histogram.csv:3:1: no row for experts 1, 3 in layer 1: model 'm' has 4 experts, each needs one "
          "row in each MoE layer");
    CHECK(error_of(head + "1,0,0\n1,1,0\n1,2,0\n1,3,0\n") ==
          "bad-layer-histogram.csv:5:1: the experts' loads in layer 1 sum to 0: the histogram routes no token");
    // Some MoE layers but not all: refused at the file's last line.
    CHECK(error_of(head + "2,0,1\n2,1,1\n2,2,1\n2,3,1\n# end\n") ==
          "bad-layer-histogram.csv:6:1: no rows for layers 1, 3: with a layer column each MoE layer of model 'm' "
          "needs its rows (its MoE layers are 1 to 3, its prediction layers 4 to 4; the prediction layers may be "
          "left out)");
    // The header names both forms.
    CHECK(error_of("layer,expert,count\n1,0,1\n") ==
          "bad-layer-histogram.csv:1:1: expected the header 'expert,tokens', 'expert,share', 'layer,expert,tokens' "
          "or 'layer,expert,share', got 'layer,expert,count'");
}

TEST_CASE("a per-layer histogram has at most 65 536 rows, one without the layer column 1000") {
    std::string rows = "layer,expert,tokens\n";
    rows.reserve(1200000);
    for (int l = 0; l < 257; ++l)
        for (int e = 0; e < 256 && rows.size() < 2000000; ++e) rows += fmt::format("{},{},1\n", l, e);
    CHECK(error_of(rows).find("bad-layer-histogram.csv:65538:1: more than 65536 rows (layer, expert)") == 0);
    std::string flat = "expert,tokens\n";
    for (int e = 0; e < 1001; ++e) flat += fmt::format("{},1\n", e);
    CHECK(error_of(flat).find("bad-layer-histogram.csv:1002:1: more than 1000 experts") == 0);
}

TEST_CASE(
    "LMSYS's DeepSeek-V3 prefill statistics per layer: the straggler of 32 GPUs is 3.04x the mean, pooled 2.49x") {
    // tests/data/expert-load (docs/moe.md section 2): the per-layer counts of
    // prefill_in4096.json and their sum over the layers. EP 32 (8 experts a
    // GPU, contiguous), 16 384 tokens a GPU, top 8: the mean GPU computes
    // 131 072 copies. tools/sglang-expert-csv.py STATS x 32 gives the busiest
    // over the mean GPU by layer: mean 3.0419, max 6.9091 (layer 53), and
    // 2.4924 for the pooled counts; expert_load must agree to its rounding.
    const std::string dir = std::string(sim::config::data_dir()) + "/tests/data/expert-load/";
    const ModelSpec m = sim::config::load_model_file(sim::config::model_path("deepseek-v3"));
    const MoeRouting layers = routing_of(dir + "deepseek-v3-prefill-in4096-layers.csv");
    const MoeRouting pooled = routing_of(dir + "deepseek-v3-prefill-in4096-pooled.csv");
    sim::config::check_expert_histogram(layers, m);
    sim::config::check_expert_histogram(pooled, m);
    CHECK(layers.histogram->layers.size() == 58);
    const double mean_gpu = 16384.0 * 8;
    double sum = 0, worst = 0;
    std::int64_t worst_layer = -1;
    for (std::int64_t l = m.first_dense_layers; l < m.layers; ++l) {
        const double r = static_cast<double>(expert_load(256, 8, 32, 16384, layers, l).hot_tokens) / mean_gpu;
        sum += r;
        if (r > worst) {
            worst = r;
            worst_layer = l;
        }
    }
    CHECK(sum / 58 == doctest::Approx(3.0419).epsilon(2e-4));
    CHECK(worst == doctest::Approx(6.9091).epsilon(2e-4));
    CHECK(worst_layer == 53);
    CHECK(static_cast<double>(expert_load(256, 8, 32, 16384, pooled).hot_tokens) / mean_gpu ==
          doctest::Approx(2.4924).epsilon(2e-4));
}
