// Mixture of experts under expert parallelism: hand-computed expert loads
// (balanced, random, Zipf, capacity dropping, the one-copy-per-token cap), the
// all-to-all volume the operators ask for, the grouped GEMM's FLOPs on the
// straggler rank, the expert memory sharding and the allgather dispatcher's
// buffers (docs/moe.md).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim/config/model_loader.h"
#include "sim/core/error.h"
#include "sim/workload/footprint.h"
#include "sim/workload/moe.h"
#include "sim/workload/operators.h"

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim::workload;

namespace {

MoeRouting zipf(double s, double cf = 0) {
    MoeRouting r;
    r.kind = MoeRouting::Kind::zipf;
    r.zipf_s = s;
    r.capacity_factor = cf;
    return r;
}

ModelSpec mixtral() { return sim::config::load_model_file(sim::config::model_path("mixtral-8x7b")); }

// docs/moe.md section 3l's Mixtral layout: tp 2 with SP, etp 2, ep 2.
OperatorOptions tp2_sp_etp2_ep2() {
    OperatorOptions o;
    o.tp = 2;
    o.sequence_parallel = true;
    o.etp = 2;
    o.ep = 2;
    return o;
}

}  // namespace

TEST_CASE("balanced routing: 8 experts top-2 over ep 4, 100 tokens a rank: every expert 100, a rank 200") {
    // routed = ep x T x k = 4 x 100 x 2 = 800 copies over 8 experts = 100
    // each; a rank holds 8 / 4 = 2 experts, so 200 tokens.
    const ExpertLoad l = expert_load(8, 2, 4, 100, MoeRouting{});
    CHECK(l.routed == 800);
    CHECK(l.per_expert == std::vector<std::int64_t>(8, 100));
    CHECK(l.hot_rank == 0);
    CHECK(l.hot_tokens == 200);
    CHECK(l.hot_local == std::vector<std::int64_t>{100, 100});
    CHECK(l.dropped == 0);
    // The dispatch all-to-all: 200 tokens x 4096 x 2 bytes = 1 638 400 bytes a rank.
    CHECK(all_to_all_bytes(l, 4, 4096, 2.0) == doctest::Approx(1638400.0));
    CHECK(all_to_all_bytes(l, 1, 4096, 2.0) == 0.0);  // no EP, no exchange
}

TEST_CASE("zipf(1) over 4 experts, top-1, ep 2: shares 12/25, 6/25, 4/25, 3/25, rank 0 the straggler") {
    // Weights 1, 1/2, 1/3, 1/4 sum to 25/12: of 2 x 50 = 100 copies the
    // experts get 48, 24, 16, 12; rank 0 (experts 0, 1) 72, rank 1 28.
    const ExpertLoad l = expert_load(4, 1, 2, 50, zipf(1.0));
    CHECK(l.per_expert == std::vector<std::int64_t>{48, 24, 16, 12});
    CHECK(l.hot_rank == 0);
    CHECK(l.hot_tokens == 72);
    CHECK(l.hot_local == std::vector<std::int64_t>{48, 24});
}

TEST_CASE("capacity factor 1.0 drops the hot expert's overflow") {
    // Capacity = ceil(1.0 x 100 / 4) = 25: expert 0 keeps 25 of 48 (23
    // dropped); rank 0 then computes 25 + 24 = 49.
    const ExpertLoad l = expert_load(4, 1, 2, 50, zipf(1.0, 1.0));
    CHECK(l.per_expert == std::vector<std::int64_t>{25, 24, 16, 12});
    CHECK(l.dropped == 23);
    CHECK(l.hot_tokens == 49);
}

TEST_CASE("a token picks an expert once: a share past the token count is spread over the others") {
    // zipf(2), 4 experts, top-2, 10 tokens, no EP: weights 1, 1/4, 1/9,
    // 1/16 (sum 1.4236) give expert 0 14.05 of 20 copies, over the 10
    // tokens: it takes 10, the other 10 go 0.25 : 0.111 : 0.0625, i.e.
    // 5.90, 2.62, 1.48, rounded by largest remainder to 6, 3, 1.
    const ExpertLoad l = expert_load(4, 2, 1, 10, zipf(2.0));
    CHECK(l.per_expert == std::vector<std::int64_t>{10, 6, 3, 1});
    CHECK(l.hot_tokens == 20);
}

TEST_CASE("routing refuses ep not dividing the experts and top_k over the experts") {
    CHECK_THROWS_AS(expert_load(8, 2, 3, 10, MoeRouting{}), sim::ModelError);
    CHECK_THROWS_AS(expert_load(4, 6, 1, 10, MoeRouting{}), sim::ModelError);
}

TEST_CASE("random routing: the largest of ep normal rank loads, 54 of 100 copies over 4 experts top-1, ep 2") {
    // E[max of n standard normals]: 0, 1/sqrt(pi), 3/(2 sqrt(pi)); 2.0697 for 32.
    CHECK(expected_max_normal(1) == 0.0);
    CHECK(expected_max_normal(2) == doctest::Approx(0.5641896).epsilon(1e-6));
    CHECK(expected_max_normal(3) == doctest::Approx(0.8462844).epsilon(1e-6));
    CHECK(expected_max_normal(32) == doctest::Approx(2.0697).epsilon(1e-4));
    // E = 4, k = 1, ep = 2, 50 tokens a rank: N = 100 tokens, each sends its
    // copy to a rank with probability 1/2: mean 50, variance 100 x 1/4 = 25;
    // the two loads sum to 100, so the larger is 50 + 5 x sqrt(2) / sqrt(pi)
    // = 53.99, 54 tokens, 27 on each of rank 0's experts, 23 on rank 1's.
    CHECK(random_routing_hot_tokens(4, 1, 2, 50) == doctest::Approx(50 + 5 * std::sqrt(2.0 / 3.14159265358979)));
    MoeRouting r;
    r.kind = MoeRouting::Kind::random;
    const ExpertLoad l = expert_load(4, 1, 2, 50, r);
    CHECK(l.per_expert == std::vector<std::int64_t>{27, 27, 23, 23});
    CHECK(l.hot_rank == 0);
    CHECK(l.hot_tokens == 54);
    // Qwen3-235B-A22B's run (128 experts, top 8, ep 32, 2048 tokens a rank):
    // mean 65 536 x 8 / 32 = 16 384; variance 65 536 x 8 x (1/32)(31/32)(120/127)
    // = 14 997.2; 16 384 + 122.46 x sqrt(32/31) x 2.0697 = 16 641.5, 1.6% over balanced.
    CHECK(random_routing_hot_tokens(128, 8, 32, 2048) == doctest::Approx(16641.5).epsilon(1e-4));
    CHECK(expert_load(128, 8, 32, 2048, r).hot_tokens == 16642);
    CHECK(to_string(r) == "random");
}

TEST_CASE("routing names parse: balanced, random, zipf(S); anything else is an error") {
    double s = 0;
    std::string err;
    CHECK(parse_routing("balanced", s, err) == MoeRouting::Kind::balanced);
    CHECK(err.empty());
    CHECK(parse_routing("random", s, err) == MoeRouting::Kind::random);
    CHECK(err.empty());
    CHECK(parse_routing("zipf(1.5)", s, err) == MoeRouting::Kind::zipf);
    CHECK(s == 1.5);
    parse_routing("zipf(x)", s, err);
    CHECK_FALSE(err.empty());
    parse_routing("zipf(0)", s, err);
    CHECK_FALSE(err.empty());
    parse_routing("uniform", s, err);
    CHECK_FALSE(err.empty());
}

TEST_CASE("Mixtral layer under ep 8: four all-to-alls of the straggler's tokens, grouped GEMM FLOPs of its load") {
    const ModelSpec m = mixtral();
    OperatorOptions o;
    o.ep = 8;
    o.moe = zipf(1.0);
    o.moe.grouped_gemm = true;
    const PassShape s{1, 1000, 1000};
    // zipf(1) over 8 experts, 8 x 1000 x 2 = 16000 copies: expert 0 takes
    // 16000 / H(8) = 16000 / 2.717857 = 5887.0 (under the 8000-token cap),
    // so rank 0 (expert 0 alone) computes 5887 tokens against 2000 balanced.
    const ExpertLoad l = expert_load(8, 2, 8, 1000, o.moe);
    CHECK(l.hot_tokens == 5887);
    const auto fwd = layer_forward(m, 0, 0, s, o);
    const auto bwd = layer_backward(m, 0, 0, s, o, Recompute::none);
    int a2a = 0;
    double expert_flops = 0;
    for (const auto* ops : {&fwd, &bwd})
        for (const auto& op : *ops) {
            if (op.ep_a2a_bytes.value > 0) {
                ++a2a;
                // 5887 tokens x 4096 x 2 bytes (bf16) = 48 226 304 bytes a rank.
                CHECK(op.ep_a2a_bytes.value == 48226304u);
            }
            if (op.kernel.name.rfind("grouped_expert", 0) == 0 && ops == &fwd &&
                op.kernel.kind == sim::hw::KernelKind::gemm)
                expert_flops += op.kernel.flops.value;
        }
    CHECK(a2a == 4);  // dispatch and combine, forward and backward
    // SwiGLU expert: up 2 x T x h x 2f, down 2 x T x f x h: 6 x 5887 x 4096 x 14336.
    CHECK(expert_flops == doctest::Approx(6.0 * 5887 * 4096 * 14336));
}

TEST_CASE("FP8 dispatch: the exchanges into the experts carry 1 + 4/128 bytes an element, the combines 2") {
    const ModelSpec m = mixtral();
    OperatorOptions o;
    o.ep = 8;
    o.moe = zipf(1.0);
    o.fp8_dispatch = true;
    const PassShape s{1, 1000, 1000};
    std::vector<std::uint64_t> sizes;  // in issue order: dispatch, combine; combine backward, dispatch backward
    for (const auto& ops : {layer_forward(m, 0, 0, s, o), layer_backward(m, 0, 0, s, o, Recompute::none)})
        for (const auto& op : ops)
            if (op.ep_a2a_bytes.value > 0) sizes.push_back(op.ep_a2a_bytes.value);
    // The straggler's 5887 tokens x 4096: x 1.03125 = 24 866 688 (FP8 + scales), x 2 = 48 226 304 (BF16).
    CHECK(sizes == std::vector<std::uint64_t>{24866688u, 48226304u, 24866688u, 48226304u});
}

TEST_CASE("full recompute repeats the exchange unless the layer keeps it, which costs its tokens in memory") {
    const ModelSpec m = mixtral();
    OperatorOptions o;
    o.ep = 8;
    o.moe = zipf(1.0);
    const PassShape s{1, 1000, 1000};
    const auto exchanges = [&] {
        int n = 0;
        for (const auto& op : layer_backward(m, 0, 0, s, o, Recompute::full))
            if (op.ep_a2a_bytes.value > 0) ++n;
        return n;
    };
    CHECK(exchanges() == 4);  // recomputed dispatch and combine, then the backward's two
    const double plain = layer_activation_bytes(m, s, o, Recompute::full).as_double();
    CHECK(plain == doctest::Approx(1000.0 * 4096 * 2));  // the layer input only
    o.moe.recompute_exchange = false;
    CHECK(exchanges() == 2);
    // + the straggler's 5887 received tokens and the 1000 combined outputs, x 4096 x 2 bytes.
    CHECK(layer_activation_bytes(m, s, o, Recompute::full).as_double() ==
          doctest::Approx((1000.0 + 5887 + 1000) * 4096 * 2));
}

TEST_CASE("expert weights shard over ep: a Mixtral layer keeps 8 / ep experts per GPU") {
    const ModelSpec m = mixtral();
    OperatorOptions o;
    const double one = layer_expert_params_per_shard(m, o);
    CHECK(one == doctest::Approx(8.0 * 3 * 4096 * 14336));  // 8 experts of 3 h f
    o.ep = 4;
    CHECK(layer_expert_params_per_shard(m, o) == doctest::Approx(one / 4));
    o.tp = 2;
    CHECK(layer_expert_params_per_shard(m, o) == doctest::Approx(one / 8));
    // The dense part (attention, norms, router) does not change with ep.
    OperatorOptions d;
    d.tp = 2;
    CHECK(layer_params_per_shard(m, o) - layer_expert_params_per_shard(m, o) ==
          doctest::Approx(layer_params_per_shard(m, d) - layer_expert_params_per_shard(m, d)));
}

TEST_CASE("MoE activation memory counts the experts' size, not the dense ffn (Qwen3-30B-A3B, no recompute)") {
    // Each of the k = 8 copies keeps its expert's up (gate and up, 2 f_e)
    // and down (f_e) inputs: 3 f_e elements; the model's dense `ffn` is
    // unused by an all-MoE model, so changing it changes nothing, and
    // 128 more per expert add 1000 tokens x 8 x 2 bytes x 3 x 128.
    ModelSpec m = sim::config::load_model_file(sim::config::model_path("qwen3-30b-a3b"));
    const OperatorOptions o;
    const PassShape s{1, 1000, 1000};
    const double a = layer_activation_bytes(m, s, o, Recompute::none).as_double();
    ModelSpec wider_dense = m;
    wider_dense.ffn *= 2;
    CHECK(layer_activation_bytes(wider_dense, s, o, Recompute::none).as_double() == a);
    ModelSpec wider_experts = m;
    wider_experts.moe_ffn += 128;
    CHECK(layer_activation_bytes(wider_experts, s, o, Recompute::none).as_double() - a ==
          doctest::Approx(1000.0 * 8 * 2 * 3 * 128));
}

TEST_CASE("MoE inference workspace counts the experts' inputs, not the dense ffn (Qwen3-30B-A3B, a prompt)") {
    // One layer's live intermediates of a 1000-token prompt: the MLP part is
    // k = 8 copies of the expert's gate, up and down inputs (3 f_e elements,
    // 2 bytes each). The dense `ffn` is unused by an all-MoE model, and 128
    // more per expert add 1000 x 2 x 8 x 3 x 128 bytes.
    ModelSpec m = sim::config::load_model_file(sim::config::model_path("qwen3-30b-a3b"));
    OperatorOptions o;
    o.flash_attention = true;
    const PassShape s{1, 1000, 1000};
    const double w = workspace_bytes(m, s, o, false).as_double();
    ModelSpec wider_dense = m;
    wider_dense.ffn *= 2;
    CHECK(workspace_bytes(wider_dense, s, o, false).as_double() == w);
    ModelSpec wider_experts = m;
    wider_experts.moe_ffn += 128;
    CHECK(workspace_bytes(wider_experts, s, o, false).as_double() - w == doctest::Approx(1000.0 * 2 * 8 * 3 * 128));
    // With dense first layers the wider of the two MLPs sets it: a dense ffn
    // of 8 moe_ffn + 64 is 64 wider than the 8 expert copies: 1000 x 2 x 3 x 64 more.
    ModelSpec mixed = m;
    mixed.first_dense_layers = 1;
    mixed.ffn = 8 * m.moe_ffn + 64;
    CHECK(workspace_bytes(mixed, s, o, false).as_double() - w == doctest::Approx(1000.0 * 2 * 3 * 64));
}

TEST_CASE(
    "allgather dispatcher memory: the selected rows whole on every GPU, the local map and gate weights kept, "
    "the gathered tokens' buffer in the workspace") {
    // Mixtral (E 8, top 2, h 4096, f_e 14336, vocabulary 32000), tp 2 with
    // SP, etp 2, ep 2, T = 4096, balanced (docs/moe.md section 5): a rank
    // routes T_r = 2048, the tp_ep group of 4 gathers N = 8192 rows; the EP
    // group routes 4096 tokens a rank, 2 x 4096 x 2 / 8 = 2048 an expert, L =
    // 4 x 2048 = 8192 rows on each GPU of the hot rank, E_l = 4.
    const ModelSpec m = mixtral();
    OperatorOptions o = tp2_sp_etp2_ep2();
    const PassShape s{1, 4096, 4096};
    const double base = layer_activation_bytes(m, s, o, Recompute::none).as_double();
    const double base_ws = workspace_bytes(m, s, o, true).as_double();
    o.moe_allgather = true;
    // The other dispatchers count k = 8192 / 4096 = 2 copies a token: the
    // input 2 x 2 x 4096 / 2 (SP) and 2 x 2 x (2 x 7168 + 7168) a token. The
    // allgather one keeps L x (4096 + 3 x 7168) x 2 and the local map and
    // gate weights, N x E_l x (1 + 2).
    const double routed_before = 4096.0 * (2 * 2 * 4096 / 2 + 2 * 2 * 3 * 7168);
    const double routed_after = 8192.0 * (4096 + 3 * 7168) * 2 + 8192.0 * 4 * 3;
    CHECK(layer_activation_bytes(m, s, o, Recompute::none).as_double() - base == routed_after - routed_before);
    CHECK(routed_after - routed_before == 33652736.0);  // 32 MiB of rows (whole, not halved) and 96 KiB
    // The gathered tokens' global buffer, N x h x 2 = 64 MiB, beside the
    // logits (4096 x 16000 x (2 + 4) bytes, larger than the gradient of the
    // gathered rows, 8192 x (4096 + 8) x 2).
    CHECK(workspace_bytes(m, s, o, true).as_double() - base_ws == 8192.0 * 4096 * 2);
    // With a 1000-token vocabulary the gradient of the gathered rows is the
    // largest transient: the logits' 4096 x 500 x 6 bytes give way to 8192 x 4104 x 2.
    ModelSpec small = m;
    small.vocab = 1000;
    o.moe_allgather = false;
    const double small_ws = workspace_bytes(small, s, o, true).as_double();
    o.moe_allgather = true;
    CHECK(workspace_bytes(small, s, o, true).as_double() - small_ws ==
          8192.0 * 4096 * 2 + 8192.0 * 4104 * 2 - 4096.0 * 500 * 6);
    // Without SP (a 4096-token prompt): T_r = 4096, N = 16384 rows, each
    // token twice (c = etp = 2); the buffer is 128 MiB, the output before
    // the reduce-scatter (128 MiB) below one layer's live intermediates.
    OperatorOptions p = o;
    p.sequence_parallel = false;
    p.inference = true;
    p.moe_allgather = false;
    const double prompt_ws = workspace_bytes(m, s, p, false).as_double();
    p.moe_allgather = true;
    CHECK(workspace_bytes(m, s, p, false).as_double() - prompt_ws == 16384.0 * 4096 * 2);
}

TEST_CASE(
    "alltoall dispatcher memory: the rows each GPU holds after the expert-TP all-gather, whole, not 1 / tp of the "
    "k copies") {
    // The allgather dispatcher's layout above under Megatron-Core's alltoall
    // dispatcher (docs/moe.md section 5): tp 2 with SP, etp 2, ep 2, T = 4096,
    // balanced. A rank routes T_r = 2048 and sends its 4096 copies; the
    // gather over the expert-TP pair hands each GPU the hot EP rank's G = 2 x
    // 2048 x 2 x 4 / 8 x 2 = 8192 rows, which the first expert GEMM keeps
    // (8192 x 4096 x 2 bytes) with their 3 x 7168 intermediates. The k-copies
    // form counted 4096 x 2 x 4096 / 2 (SP) of rows: 32 MiB where 64 are held.
    const ModelSpec m = mixtral();
    OperatorOptions o = tp2_sp_etp2_ep2();
    const PassShape s{1, 4096, 4096};
    const double base = layer_activation_bytes(m, s, o, Recompute::none).as_double();
    o.moe_alltoall_metadata = true;  // the alltoall dispatcher: each rank routes its own shard
    const double routed_before = 4096.0 * (2 * 2 * 4096 / 2 + 2 * 2 * 3 * 7168);
    const double routed_after = 8192.0 * (4096 + 3 * 7168) * 2;
    CHECK(routed_before == 385875968.0);
    CHECK(routed_after == 419430400.0);
    CHECK(layer_activation_bytes(m, s, o, Recompute::none).as_double() - base == routed_after - routed_before);
    // etp 1 (no gather): G = 2 x 2048 x 2 x 4 / 8 = 4096 rows of 4096 + 3 x
    // 14336 elements, 4096 x 94 208 bytes: the k-copies form's 4096 x (2 x 2 x
    // 4096 / 2 + 2 x 2 x 3 x 14336 / 2) exactly, so nothing moves there.
    OperatorOptions e1 = o;
    e1.etp = 1;
    CHECK(layer_activation_bytes(m, s, e1, Recompute::none).as_double() - base == 0.0);
}

TEST_CASE("FP8 dispatch in FP8 training: each token quantized once before the exchange, not each routed copy") {
    // Mixtral, ep 8, balanced, 1000 tokens: 8 x 1000 x 2 / 8 = 2000 copies
    // reach the straggler's one expert, whose grouped up GEMM reads 2000 x
    // 4096 = 8 192 000 elements.
    const ModelSpec m = mixtral();
    OperatorOptions o;
    o.ep = 8;
    o.moe.grouped_gemm = true;
    o.precision.compute = sim::hw::DType::fp8;
    const PassShape s{1, 1000, 1000};
    const auto named = [](const std::vector<Operator>& ops, const std::string& name) -> const Operator* {
        for (const auto& op : ops)
            if (op.kernel.name == name) return &op;
        return nullptr;
    };
    // Without FP8 dispatch: a cast-transpose of every routed copy (2 bytes
    // read, two 1-byte copies written a copy), no quantization before the exchange.
    const auto plain = layer_forward(m, 0, 0, s, o);
    const Operator* cast = named(plain, "grouped_expert_up_cast_transpose");
    REQUIRE(cast != nullptr);
    CHECK(cast->kernel.bytes_read.value == 16'384'000u);
    CHECK(cast->kernel.bytes_written.value == 16'384'000u);
    CHECK(named(plain, "moe_dispatch_quant") == nullptr);
    // With it: the rank's 1000 tokens quantized once (8 192 000 bytes read,
    // 1000 x 4096 x 1.03125 = 4 224 000 written), and at the expert only the
    // transposed copy of the FP8 rows (1 byte read and written a copy).
    o.fp8_dispatch = true;
    const auto fwd = layer_forward(m, 0, 0, s, o);
    CHECK(named(fwd, "grouped_expert_up_cast_transpose") == nullptr);
    const Operator* quant = named(fwd, "moe_dispatch_quant");
    REQUIRE(quant != nullptr);
    CHECK(quant->kernel.bytes_read.value == 8'192'000u);
    CHECK(quant->kernel.bytes_written.value == 4'224'000u);
    const Operator* tr = named(fwd, "grouped_expert_up_transpose");
    REQUIRE(tr != nullptr);
    CHECK(tr->kernel.bytes_read.value == 8'192'000u);
    CHECK(tr->kernel.bytes_written.value == 8'192'000u);
    // The other GEMMs' casts are unchanged (the shared-less Mixtral: attention, router, expert down).
    CHECK(named(fwd, "grouped_expert_down_cast_transpose") != nullptr);
}

// Mixtral under ep 4 with grouped expert GEMMs, the alltoall dispatcher's
// tests' setting (2 local experts; T = 1000 gives each 1000 tokens).
static OperatorOptions ep4_grouped() {
    OperatorOptions o;
    o.ep = 4;
    o.moe.grouped_gemm = true;
    return o;
}

TEST_CASE("alltoall dispatcher: the received tokens sorted by local expert and back, one pass each way and pass") {
    // Megatron-Core's MoEAlltoAllTokenDispatcher (docs/moe.md section 3f).
    // Mixtral, ep 4 (2 local experts), balanced, T = 1000: each expert gets
    // 4 x 1000 x 2 / 8 = 1000 tokens, the rank 2000, so a pass moves
    // 2000 x 4096 x 2 = 16 384 000 bytes each way, the forward sort and its
    // backward also a 4-byte gate weight a token (16 392 000).
    const ModelSpec m = mixtral();
    OperatorOptions o = ep4_grouped();
    o.moe_sort_chunks = true;
    const PassShape s{1, 1000, 1000};
    const auto fwd = layer_forward(m, 0, 0, s, o);
    const auto bwd = layer_backward(m, 0, 0, s, o, Recompute::none);
    const auto at = [](const std::vector<Operator>& ops, const std::string& name) {
        for (std::size_t i = 0; i < ops.size(); ++i)
            if (ops[i].kernel.name == name) return i;
        return ops.size();
    };
    struct Pass {
        const std::vector<Operator>* ops;
        std::string name, next;  // the kernel that follows it
        std::uint64_t bytes;
        bool after_exchange;  // the all-to-all precedes the pass (into the experts)
    };
    const std::vector<Pass> passes{{&fwd, "moe_sort_chunks", "grouped_expert_up", 16'392'000u, true},
                                   {&fwd, "moe_unsort_chunks", "moe_combine", 16'384'000u, false},
                                   {&bwd, "moe_unsort_chunks_bwd", "", 16'384'000u, true},
                                   {&bwd, "moe_sort_chunks_bwd", "moe_dispatch_bwd", 16'392'000u, false}};
    for (const auto& p : passes) {
        CAPTURE(p.name);
        const std::size_t i = at(*p.ops, p.name);
        REQUIRE(i + 1 < p.ops->size());
        const Operator& op = (*p.ops)[i];
        CHECK(op.kernel.bytes_read.value == p.bytes);
        CHECK(op.kernel.bytes_written.value == p.bytes);
        CHECK(op.kernel.flops.value == 0.0);
        // The exchange into the experts now precedes the sort (2000 x 8192 bytes a rank).
        CHECK(op.ep_a2a_bytes.value == (p.after_exchange ? 16'384'000u : 0u));
        if (!p.next.empty()) CHECK((*p.ops)[i + 1].kernel.name == p.next);
    }
    int a2a = 0;
    for (const auto* ops : {&fwd, &bwd})
        for (const auto& op : *ops) a2a += op.ep_a2a_bytes.value > 0 ? 1 : 0;
    CHECK(a2a == 4);
    // Not under another dispatcher, nor with one local expert (ep 8).
    o.moe_sort_chunks = false;
    CHECK(at(layer_forward(m, 0, 0, s, o), "moe_sort_chunks") == layer_forward(m, 0, 0, s, o).size());
    o.moe_sort_chunks = true;
    o.ep = 8;
    const auto one = layer_forward(m, 0, 0, s, o);
    CHECK(at(one, "moe_sort_chunks") == one.size());
    CHECK(at(one, "moe_unsort_chunks") == one.size());
}

TEST_CASE("alltoall dispatcher: the gate weights' all-to-all and, dropless, the all-gather of counts") {
    // Megatron-Core's MoEAlltoAllTokenDispatcher (docs/moe.md section 3g).
    // Mixtral (8 experts), ep 4, balanced, T = 1000: the rank receives
    // 2000 token copies, so the gate weights' all-to-all carries
    // 2000 x 4 = 8000 bytes a rank, after the exchange into the experts and
    // with the dispatch backward; dropless, the counts' all-gather returns
    // 4 ranks x 8 experts x 8 bytes = 256 bytes, before the permutation.
    const ModelSpec m = mixtral();
    OperatorOptions o = ep4_grouped();
    o.moe_alltoall_metadata = true;
    const PassShape s{1, 1000, 1000};
    struct Seen {
        int probs = 0, gathers = 0;
        std::vector<std::string> probs_at, gather_at;
    };
    const auto seen = [&](const OperatorOptions& opt) {
        Seen r;
        for (const auto& ops : {layer_forward(m, 0, 0, s, opt), layer_backward(m, 0, 0, s, opt, Recompute::none)})
            for (const auto& op : ops) {
                if (op.ep_probs_a2a_bytes.value > 0) {
                    ++r.probs;
                    r.probs_at.push_back(op.kernel.name);
                    CHECK(op.ep_probs_a2a_bytes.value == 8000u);
                    CHECK(op.ep_a2a_bytes.value > 0);  // right after the tokens' exchange
                }
                if (op.ep_count_gather_bytes.value > 0) {
                    ++r.gathers;
                    r.gather_at.push_back(op.kernel.name);
                    CHECK(op.ep_count_gather_bytes.value == 256u);
                }
            }
        return r;
    };
    const Seen dropless = seen(o);
    CHECK(dropless.probs == 2);
    CHECK(dropless.gathers == 1);
    CHECK(dropless.probs_at == std::vector<std::string>{"grouped_expert_up", "moe_dispatch_bwd"});
    CHECK(dropless.gather_at == std::vector<std::string>{"moe_dispatch"});
    // A capacity factor (Megatron's drop-and-pad: the splits are known): no all-gather.
    o.moe.capacity_factor = 1.0;
    const Seen padded = seen(o);
    CHECK(padded.probs == 2);
    CHECK(padded.gathers == 0);
    // Neither under another dispatcher, nor without expert parallelism.
    o.moe.capacity_factor = 0;
    o.moe_alltoall_metadata = false;
    CHECK(seen(o).probs + seen(o).gathers == 0);
    o.moe_alltoall_metadata = true;
    o.ep = 1;
    CHECK(seen(o).probs + seen(o).gathers == 0);
}

TEST_SUITE_END();
