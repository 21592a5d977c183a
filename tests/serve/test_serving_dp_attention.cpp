// Data-parallel attention (strategy `attention_dp`, docs/serving.md "Data-parallel
// attention", docs/moe.md section 8) with answers known in advance: each rank's KV
// pool holds MLA's whole latent for its own requests only, so the engine holds dp
// pools; the ranks step in lockstep, so a rank with a short request waits for the
// rank with a long one; and the layouts SGLang does not run are refused.
#include "serve_fixture.h"
#include "sim/config/scenario.h"
#include "sim/core/error.h"
#include "sim/hw/cost_model.h"
#include "sim/parallel/builder.h"
#include "sim/parallel/strategy.h"
#include "sim/serve/serve_report.h"
#include "sim/serve/simulator.h"
#include "sim/workload/operators.h"
#include "tests/test_util.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

TEST_SUITE_BEGIN("e2e");

using namespace sim;

namespace {

// A small MLA MoE model (DeepSeek-V3's blocks, scaled down): 2 layers, the
// first dense, MLA with a 128-wide latent and a 32-wide rope key, 8 experts top 2.
const std::string kModel =
    "{name: mini-mla-moe, layers: 2, hidden: 1024, heads: 8, ffn: 2048, ffn_kind: swiglu, vocab: 4096, "
    "max_seq: 8192, norm: rmsnorm, tied_embeddings: false, position: rope, bias: false, "
    "attention: {kind: mla, kv_lora_rank: 128, qk_nope_head_dim: 64, qk_rope_head_dim: 32, v_head_dim: 64}, "
    "moe: {experts: 8, top_k: 2, ffn: 512, first_dense_layers: 1}}";

// A serving scenario of `gpus` H200s running `strategy` (YAML lines of the
// strategy map, indented by 4) with the serving block's `arrivals` line
// under the software profile `software`; host times off so the answers stay
// the GPUs' own.
config::ScenarioSpec scenario(int gpus, const std::string& strategy, const std::string& arrivals,
                              const std::string& mode = "serving", const std::string& model = kModel,
                              const std::string& software = "vllm") {
    static int counter = 0;
    const auto path = std::filesystem::temp_directory_path() /
                      ("parasim-dp-attn-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".yaml");
    {
        std::ofstream f(path);
        f << "name: dpa\nsoftware: {name: " << software << "}\ncluster: h200-hgx\ngpus: " << gpus
          << "\nmodel: " << model << "\nworkload:\n  mode: " << mode << "\n  dtype: bf16\n";
        if (mode == "serving") f << "  serving:\n" << arrivals << "    max_tokens_per_iteration: 4096\n";
        else if (mode == "training") f << "  seq_len: 128\n  global_batch: 8\n";
        else f << "  batch: 9\n  prompt_tokens: 128\n  output_tokens: 8\n";
        f << "strategies:\n  - name: s\n" << strategy;
    }
    auto sc = config::load_scenario(path.string(), {});
    std::filesystem::remove(path);
    serve_test::no_host_times(sc);
    return sc;
}

const std::string kFewRequests =
    "    arrivals: {process: fixed, rate: 100}\n    prompt_tokens: {distribution: fixed, value: 64}\n"
    "    output_tokens: {distribution: fixed, value: 4}\n    requests: 4\n";
const std::string kDp2 = "    tp: 1\n    dp: 2\n    ep: 2\n    attention_dp: true\n";

// The memory a rank's KV pool had: 0.9 of HBM less weights and workspace.
double left_for_kv(const config::ScenarioSpec& sc, const serve::ServeResult& r) {
    return 0.9 * sc.gpu.memory_capacity.as_double() - r.pool.memory.weights - r.pool.memory.workspace -
           r.pool.non_torch_bytes;
}

}  // namespace

TEST_CASE("attention_dp: each rank's pool holds the whole MLA latent of its own requests; the engine holds dp pools") {
    const auto sc = scenario(2, kDp2, kFewRequests);
    const auto r = serve::simulate_serving(sc, sc.strategies.front(), {});
    CHECK(r.attention_dp == 2);
    CHECK(r.replicas == 2);  // one rank a GPU, each with its own scheduler and pool
    // 2 layers x (kv_lora_rank 128 + rope 32) x 2 bytes (BF16) = 640 bytes a token,
    // as under TP (MLA's one latent is never split over ranks).
    CHECK(r.pool.bytes_per_token == doctest::Approx(2.0 * (128 + 32) * 2));
    CHECK(r.pool.blocks == static_cast<std::int64_t>(std::floor(left_for_kv(sc, r) / (16 * 640.0))));
    // TP 2 on the same GPUs: one replica whose pool (the same blocks on both
    // GPUs) is the engine's whole capacity.
    const auto tp = scenario(2, "    tp: 2\n", kFewRequests);
    const auto t = serve::simulate_serving(tp, tp.strategies.front(), {});
    CHECK(t.replicas == 1);
    CHECK(t.pool.bytes_per_token == doctest::Approx(2.0 * (128 + 32) * 2));
    CHECK(t.pool.blocks == static_cast<std::int64_t>(std::floor(left_for_kv(tp, t) / (16 * 640.0))));
    // Tokens the engine can cache: dp x a rank's blocks against one TP pool.
    // The small model's weights are a sliver of HBM, so the ratio is dp = 2 to
    // within the weights' share (each attention rank holds all the attention
    // weights, TP ranks half).
    const double dp_tokens = 2.0 * static_cast<double>(r.pool.blocks) * 16;
    const double tp_tokens = static_cast<double>(t.pool.blocks) * 16;
    CHECK(dp_tokens / tp_tokens == doctest::Approx(2.0).epsilon(0.01));
}

TEST_CASE("attention_dp: the ranks step in lockstep, a short request waits for the long one on the other rank") {
    // Two requests at t = 0 on an engine of two ranks: round robin sends the
    // 2,000-token prompt to rank 0 and the 16-token one to rank 1. Each wants
    // one token, so each ends with its prefill step; in lockstep the step ends
    // when the slower rank's batch does: t(2000-token prefill) for both.
    const auto dir = std::filesystem::temp_directory_path();
    const auto trace = dir / ("parasim-dp-attn-" + std::to_string(::getpid()) + ".csv");
    const auto alone = dir / ("parasim-dp-attn-alone-" + std::to_string(::getpid()) + ".csv");
    {
        std::ofstream f(trace);
        f << "arrival_s,prompt_tokens,output_tokens\n0,2000,1\n0,16,1\n";
        std::ofstream g(alone);
        g << "arrival_s,prompt_tokens,output_tokens\n0,2000,1\n";
    }
    const auto both = scenario(2, kDp2, "    arrivals: {process: trace, file: " + trace.string() + "}\n");
    const auto one = scenario(2, kDp2, "    arrivals: {process: trace, file: " + alone.string() + "}\n");
    const auto rb = serve::simulate_serving(both, both.strategies.front(), {});
    const auto ro = serve::simulate_serving(one, one.strategies.front(), {});
    std::filesystem::remove(trace);
    std::filesystem::remove(alone);
    REQUIRE(rb.records.size() == 2);
    CHECK(rb.records[0].replica == 0);
    CHECK(rb.records[1].replica == 1);
    CHECK(rb.records[1].finish_s == doctest::Approx(rb.records[0].finish_s));
    // The long rank's step is the same whether the other rank is idle or not
    // (the symmetric plan times each rank's batch on every rank).
    CHECK(rb.records[0].finish_s == doctest::Approx(ro.records[0].finish_s));
    CHECK(rb.iterations == 1);
}

TEST_CASE("attention_dp in a static batch: a rank caches its own sequences, the step runs the largest rank's batch") {
    // batch 9 over dp 2: the ranks hold 5 and 4 sequences; every rank is
    // simulated with the largest, 5, since the MoE layers' all-to-alls make
    // the others wait for it. Its KV cache: 2 layers x 5 sequences x
    // (128 + 8) tokens x (128 + 32) x 2 bytes = 435 200 bytes. Under TP 2 each
    // GPU caches the whole latent of all 9: 2 x 9 x 136 x 320 = 783 360.
    const auto cm = hw::make_cost_model("roofline");
    const auto dp = scenario(2, kDp2, "", "inference");
    const auto b = parallel::build_plan(dp, dp.strategies.front(), *cm, parallel::BuildOptions{});
    CHECK(b.strategy.microbatch_sizes == std::vector<std::int64_t>{5});
    CHECK(b.memory.breakdown.kv_cache == doctest::Approx(435200.0));
    const auto tp = scenario(2, "    tp: 2\n", "", "inference");
    const auto t = parallel::build_plan(tp, tp.strategies.front(), *cm, parallel::BuildOptions{});
    CHECK(t.memory.breakdown.kv_cache == doctest::Approx(783360.0));
}

TEST_CASE("attention_dp: the layouts SGLang does not run are refused at the strategy") {
    const auto refused = [](int gpus, const std::string& strategy, const std::string& mode, const std::string& why) {
        CAPTURE(strategy);
        try {
            const auto sc = scenario(gpus, strategy, kFewRequests, mode);
            if (mode == "serving") serve::simulate_serving(sc, sc.strategies.front(), {});
            else (void)parallel::resolve_degrees(sc, sc.strategies.front());
            FAIL("not refused");
        } catch (const ConfigError& e) {
            CHECK(std::string(e.what()).find(why) != std::string::npos);
        }
    };
    refused(4, "    tp: 2\n    dp: 2\n    ep: 2\n    attention_dp: true\n", "serving", "ep = tp x dp");
    refused(2, "    tp: 1\n    dp: 2\n    ep: 1\n    attention_dp: true\n", "serving", "ep = tp x dp");
    refused(4, "    tp: 2\n    dp: 2\n    ep: 4\n    attention_dp: true\n", "training", "not training");
    // SGLang's --moe-dense-tp-size takes 1 or nothing (server_args asserts it).
    refused(2, kDp2 + "    moe_dense_tp_size: 2\n", "serving", "is not one of 1");
    refused(2, "    tp: 2\n    moe_dense_tp_size: 1\n", "serving", "need attention_dp: true");
    refused(2, "    tp: 2\n    enable_dp_lm_head: true\n", "serving", "need attention_dp: true");
    // With attention TP, SGLang runs each dense MLP whole on 1/tp of a rank's tokens: not modelled.
    refused(4, "    tp: 2\n    dp: 2\n    ep: 4\n    attention_dp: true\n    moe_dense_tp_size: 1\n", "serving",
            "not modelled");
    refused(2, "    tp: 1\n    dp: 2\n    ep: 2\n    attention_dp: true\n", "training", "not training");
    refused(4, "    tp: 1\n    pp: 2\n    dp: 2\n    ep: 2\n    attention_dp: true\n", "inference", "pp=2");
}

namespace {

// Disaggregated over 4 H200s of one board: a prefill engine of dp 2 (GPUs 0
// and 1) and a decode engine of decode_dp 2 (GPUs 2 and 3), a trace of
// `rows` (arrival_s,prompt_tokens,output_tokens lines).
serve::ServeResult disaggregated(const std::string& rows, const std::string& decode = "decode_dp: 2",
                                 const std::string& strategy = kDp2) {
    static int counter = 0;
    const auto trace = std::filesystem::temp_directory_path() /
                       ("parasim-dp-disagg-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".csv");
    {
        std::ofstream f(trace);
        f << "arrival_s,prompt_tokens,output_tokens\n" << rows;
    }
    const auto sc = scenario(4, strategy,
                             "    arrivals: {process: trace, file: " + trace.string() +
                                 "}\n    disaggregation: {prefill_replicas: 1, " + decode + "}\n");
    auto r = serve::simulate_serving(sc, sc.strategies.front(), {});
    std::filesystem::remove(trace);
    return r;
}

}  // namespace

TEST_CASE("attention_dp disaggregated: a request's MLA latent moves from its prefill rank to its decode rank") {
    // Round robin in each pool: request 0 prefills on rank 0 (GPU 0) and
    // decodes on decode rank 0 (GPU 2), request 1 on GPU 1 then GPU 3. Each
    // cache is one flow, rank to rank, of prompt x 640 bytes (2 layers x
    // (128 + 32) x 2 bytes: the latent is never split): 1,024 x 640 =
    // 655,360 B over two NVLink hops of 450 GB/s and 0.6 us, on links no
    // other flow uses (GPU 0 -> switch -> GPU 2, GPU 1 -> switch -> GPU 3).
    const auto r = disaggregated("0,1024,4\n0,1024,4\n");
    CHECK(r.attention_dp == 2);
    CHECK(r.decode_dp == 2);
    CHECK(r.replicas == 4);  // ranks: 2 prefill + 2 decode
    CHECK(r.prefill_replicas == 2);
    CHECK(r.decode_pool.bytes_per_token == doctest::Approx(640.0));
    REQUIRE(r.records.size() == 2);
    const double bytes = 1024 * 640.0;
    CHECK(r.kv_bytes_moved == doctest::Approx(2 * bytes));
    for (int i = 0; i < 2; ++i) {
        const auto& rec = r.records[static_cast<std::size_t>(i)];
        CHECK(rec.replica == i);
        CHECK(rec.decode_replica == 2 + i);
        CHECK(rec.kv_wait_s == 0);
        CHECK(rec.kv_transfer_s == doctest::Approx(bytes / 450e9 + 2 * 0.6e-6).epsilon(1e-6));
        CHECK(rec.first_token_s - rec.prefill_done_s == doctest::Approx(rec.kv_transfer_s).epsilon(1e-9));
    }
    // Lockstep in both pools: the two prefills end together, the two caches
    // arrive together, the decode engine's steps end together.
    CHECK(r.records[1].prefill_done_s == doctest::Approx(r.records[0].prefill_done_s));
    CHECK(r.records[1].finish_s == doctest::Approx(r.records[0].finish_s));
    // The decode engine times each rank's batch on its symmetric plan, so the
    // pair takes as long as one request alone (the other rank idle).
    const auto one = disaggregated("0,1024,4\n");
    CHECK(one.records[0].finish_s == doctest::Approx(r.records[0].finish_s));
    CHECK(one.kv_bytes_moved == doctest::Approx(bytes));
}

TEST_CASE("attention_dp disaggregated: a decode rank's step waits for the slowest rank of its engine") {
    // Request 0 (a 4,000-token prompt) decodes on GPU 2, request 1 (16
    // tokens) on GPU 3. The short one's cache arrives first and it decodes
    // alone until the long one joins; from then each step is the long
    // context's, so its last tokens come at the long request's pace: both
    // end within one step of each other (the same outputs, joined one step
    // apart at most), and the short request's TPOT exceeds its TPOT alone.
    const auto both = disaggregated("0,4000,24\n0,16,24\n");
    const auto alone = disaggregated("0,16,24\n");
    const auto& longer = both.records[0];
    const auto& shorter = both.records[1];
    const double tpot_long = (longer.finish_s - longer.first_token_s) / 23;
    const double tpot_short = (shorter.finish_s - shorter.first_token_s) / 23;
    const double tpot_alone = (alone.records[0].finish_s - alone.records[0].first_token_s) / 23;
    CHECK(tpot_short > tpot_alone);
    CHECK(std::abs(longer.finish_s - shorter.finish_s) <= tpot_long * 1.0001);
}

TEST_CASE("attention_dp disaggregated into tensor-parallel decode replicas: each TP rank receives the whole latent") {
    // decode_tp 2 on GPUs 2 and 3: MLA's latent cannot be split over heads,
    // so each decode GPU caches all of it and the prefill rank sends each
    // the whole 1,024 x 640 bytes. Both flows leave GPU 0 on one NVLink and
    // share it: the transfer takes twice one flow's bytes over 450 GB/s.
    const auto r = disaggregated("0,1024,4\n", "decode_tp: 2");
    CHECK(r.decode_dp == 0);
    CHECK(r.decode_tp == 2);
    CHECK(r.replicas == 3);  // 2 prefill ranks + 1 decode replica
    const double bytes = 1024 * 640.0;
    CHECK(r.kv_bytes_moved == doctest::Approx(2 * bytes));
    CHECK(r.records[0].decode_replica == 2);
    CHECK(r.records[0].kv_transfer_s == doctest::Approx(2 * bytes / 450e9 + 2 * 0.6e-6).epsilon(1e-6));
}

TEST_CASE("attention_dp disaggregated: what cannot be formed is refused at its line") {
    const auto refused = [](const std::string& decode, const std::string& strategy, const std::string& why) {
        CAPTURE(decode);
        try {
            (void)disaggregated("0,64,4\n", decode, strategy);
            FAIL("not refused");
        } catch (const ConfigError& e) {
            CHECK(std::string(e.what()).find(why) != std::string::npos);
        }
    };
    refused("decode_dp: 2, decode_tp: 2", kDp2, "needs decode_tp 1");
    refused("decode_dp: 3", kDp2, "decode replicas need 3");
    refused("decode_dp: 2", "    tp: 1\n    dp: auto\n    ep: 2\n    attention_dp: true\n", "dp must be given");
    refused("decode_dp: 2, decode_pd: 1", kDp2, "decode_pd");
}

TEST_CASE("a decode pool that cannot be formed is refused at the disaggregation, not at the strategy") {
    // 5 GPUs: the prefill engine takes 2, decode_dp 3 takes the other 3, and
    // its ep = 3 does not divide the 8 experts. The strategy as written (ep 2)
    // is fine; the message says which pool and points at decode_dp's map.
    const auto sc = scenario(5, kDp2, kFewRequests + "    disaggregation: {prefill_replicas: 1, decode_dp: 3}\n");
    try {
        (void)serve::simulate_serving(sc, sc.strategies.front(), {});
        FAIL("not refused");
    } catch (const ConfigError& e) {
        const std::string what = e.what();
        CHECK(what.find("the decode pool (engines of decode_dp 3: tp 1, dp = ep = 3) cannot be formed") !=
              std::string::npos);
        CHECK(what.find("ep=3 does not divide the model's 8 experts") != std::string::npos);
        CHECK(e.where().line == sc.workload.serving->disaggregation_where.line);
        CHECK(e.where().line != sc.strategies.front().where.line);
    }
}

TEST_CASE(
    "prefilled: a decode engine measured alone decodes as the disaggregated decode engine does, from its first "
    "token") {
    // The request of the first disaggregated case, alone, arriving with its
    // 1,024-token cache in place on an engine of dp 2 (the decode engine's
    // layout): no transfer, TTFT 0 (its first token came with the cache),
    // and its three decode steps take what they took after the transfer.
    const auto dir = std::filesystem::temp_directory_path();
    const auto trace = dir / ("parasim-dp-prefilled-" + std::to_string(::getpid()) + ".csv");
    {
        std::ofstream f(trace);
        f << "arrival_s,prompt_tokens,output_tokens\n0,1024,4\n";
    }
    const auto sc =
        scenario(2, kDp2, "    arrivals: {process: trace, file: " + trace.string() + "}\n    prefilled: true\n");
    const auto p = serve::simulate_serving(sc, sc.strategies.front(), {});
    std::filesystem::remove(trace);
    const auto d = disaggregated("0,1024,4\n");
    REQUIRE(p.records.size() == 1);
    const auto& rec = p.records[0];
    CHECK(rec.first_token_s == 0);
    CHECK(rec.kv_transfer_s == 0);
    CHECK(p.kv_bytes_moved == 0);
    CHECK(p.iterations == 3);  // tokens 2, 3 and 4
    CHECK(rec.finish_s == doctest::Approx(d.records[0].finish_s - d.records[0].first_token_s).epsilon(1e-9));
    CHECK(p.replica_stats[0].role == std::string("decode"));
    // Two such requests on one rank with max_batch 1: the second's cache
    // waits for the first to finish, then takes the same three steps.
    const auto two = dir / ("parasim-dp-prefilled-2-" + std::to_string(::getpid()) + ".csv");
    {
        std::ofstream f(two);
        f << "arrival_s,prompt_tokens,output_tokens\n0,1024,4\n0,1024,4\n";
    }
    const auto one_rank =
        scenario(1, "    tp: 1\n    dp: 1\n    ep: 1\n    attention_dp: true\n",
                 "    arrivals: {process: trace, file: " + two.string() + "}\n    prefilled: true\n    max_batch: 1\n");
    const auto q = serve::simulate_serving(one_rank, one_rank.strategies.front(), {});
    std::filesystem::remove(two);
    REQUIRE(q.records.size() == 2);
    CHECK(q.records[0].replica == q.records[1].replica);
    CHECK(q.iterations == 6);
    CHECK(q.records[1].finish_s == doctest::Approx(2 * q.records[0].finish_s).epsilon(1e-9));
}

TEST_CASE("prefilled: refused with disaggregation and with a scheduler that is not iteration-level") {
    const auto refused = [](const std::string& block, const std::string& why) {
        CAPTURE(block);
        try {
            const auto sc = scenario(2, kDp2, kFewRequests + block);
            (void)serve::simulate_serving(sc, sc.strategies.front(), {});
            FAIL("not refused");
        } catch (const ConfigError& e) {
            CHECK(std::string(e.what()).find(why) != std::string::npos);
        }
    };
    refused("    disaggregation: {prefill_replicas: 1, decode_dp: 1}\n    prefilled: true\n", "give one or the other");
    refused("    prefilled: true\n    scheduler: static\n", "iteration-level scheduler");
}

namespace {

// The collectives of a plan that are not all-to-alls, as (phase, op, bytes,
// GPUs of the group).
struct Collective {
    parallel::Phase phase;
    net::CollectiveOp op;
    double bytes;
    std::size_t gpus;
    bool operator==(const Collective& o) const {
        return phase == o.phase && op == o.op && bytes == o.bytes && gpus == o.gpus;
    }
};
std::vector<Collective> collectives(const parallel::Plan& p) {
    std::vector<Collective> out;
    for (const auto& t : p.tasks)
        if (t.kind == parallel::TaskKind::collective && t.op != net::CollectiveOp::all_to_all) {
            const Collective c{t.phase, t.op, t.bytes.as_double(), p.groups[t.group].gpus.size()};
            if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
        }
    return out;
}
bool has(const std::vector<Collective>& cs, const Collective& c) {
    return std::find(cs.begin(), cs.end(), c) != cs.end();
}

const std::string kDp2Flags = kDp2 + "    moe_dense_tp_size: 1\n    enable_dp_lm_head: true\n";
const std::string kTp2Dp2 = "    tp: 2\n    dp: 2\n    ep: 4\n    attention_dp: true\n";

}  // namespace

TEST_CASE(
    "attention_dp, SGLang's default layout: the dense MLP and the LM head gather every rank's tokens and run "
    "over the engine") {
    // The static batch of 9 over dp 2 (5 sequences a rank, the plan's
    // padding), 128-token prompts, hidden 1,024, vocab 4,096, BF16.
    using net::CollectiveOp;
    using parallel::Phase;
    const auto cm = hw::make_cost_model("roofline");
    const auto def = scenario(2, kDp2, "", "inference");
    const auto lmsys = scenario(2, kDp2Flags, "", "inference");
    const auto d = parallel::build_plan(def, def.strategies.front(), *cm, parallel::BuildOptions{});
    const auto f = parallel::build_plan(lmsys, lmsys.strategies.front(), *cm, parallel::BuildOptions{});
    // Weights a GPU: the dense MLP (SwiGLU, 1,024 x 2,048: 3 x 1,024 x 2,048
    // parameters) and the head (4,096 x 1,024) split over the engine's 2 GPUs
    // by default, whole under --moe-dense-tp-size 1 --enable-dp-lm-head:
    // (3 x 1,024 x 2,048 + 4,096 x 1,024) / 2 x 2 bytes = 10,485,760 more.
    CHECK(f.memory.breakdown.weights - d.memory.breakdown.weights == doctest::Approx(10485760.0));
    CHECK(f.memory.breakdown.kv_cache == d.memory.breakdown.kv_cache);
    const auto dc = collectives(d.plan), fc = collectives(f.plan);
    // The LMSYS layout has none (tp 1: no TP collective, only the all-to-alls).
    CHECK(fc.empty());
    // Prefill (SGLang pads to the sum and all-reduces): 2 ranks x 5 x 128
    // tokens x 1,024 x 2 bytes = 2,621,440 before and after the MLP; the
    // head's last tokens, 10 x 1,024 x 2 = 20,480, then the logits
    // all-gathered, 10 x 4,096 x 2 = 81,920.
    CHECK(has(dc, {Phase::prefill, CollectiveOp::all_reduce, 2621440.0, 2}));
    CHECK(has(dc, {Phase::prefill, CollectiveOp::all_reduce, 20480.0, 2}));
    CHECK(has(dc, {Phase::prefill, CollectiveOp::all_gather, 81920.0, 2}));
    // Decode (padded to the longest rank, MAX_LEN): 10 tokens gathered, 20,480
    // bytes, scattered back after the MLP; the head the same and the logits.
    CHECK(has(dc, {Phase::decode, CollectiveOp::all_gather, 20480.0, 2}));
    CHECK(has(dc, {Phase::decode, CollectiveOp::reduce_scatter, 20480.0, 2}));
    CHECK(has(dc, {Phase::decode, CollectiveOp::all_gather, 81920.0, 2}));
    CHECK(dc.size() == 6);
}

TEST_CASE("attention_dp with tp 2: attention tensor-parallel inside each rank, the experts over all 4 GPUs") {
    using net::CollectiveOp;
    using parallel::Phase;
    const auto cm = hw::make_cost_model("roofline");
    const auto sc = scenario(4, kTp2Dp2, "", "inference");
    const auto b = parallel::build_plan(sc, sc.strategies.front(), *cm, parallel::BuildOptions{});
    // SGLang's SCATTERED MoE input: each attention-TP rank routes its share
    // of its rank's tokens (sequence parallelism), each expert whole.
    CHECK(b.strategy.sp);
    CHECK(b.strategy.expert_tp() == 1);
    CHECK(b.strategy.ep == 4);
    CHECK(b.strategy.microbatch_sizes == std::vector<std::int64_t>{5});
    // MLA's latent is not split over heads: each GPU of a rank caches all of
    // it for the rank's 5 sequences, 2 x 5 x 136 x 320 = 435,200 bytes, as
    // with tp 1.
    CHECK(b.memory.breakdown.kv_cache == doctest::Approx(435200.0));
    const auto c = collectives(b.plan);
    // Inside the attention-TP group (2 GPUs), a decode step's 5 tokens:
    // the output projection's reduce-scatter and the all-gather before the
    // next layer's projections, 5 x 1,024 x 2 = 10,240 bytes.
    CHECK(has(c, {Phase::decode, CollectiveOp::reduce_scatter, 10240.0, 2}));
    CHECK(has(c, {Phase::decode, CollectiveOp::all_gather, 10240.0, 2}));
    // Over the engine (4 GPUs): both ranks' 10 tokens, 20,480 bytes, and the
    // logits 10 x 4,096 x 2 = 81,920.
    CHECK(has(c, {Phase::decode, CollectiveOp::all_gather, 20480.0, 4}));
    CHECK(has(c, {Phase::decode, CollectiveOp::reduce_scatter, 20480.0, 4}));
    CHECK(has(c, {Phase::decode, CollectiveOp::all_gather, 81920.0, 4}));
    // Serving: an engine of 2 ranks of 2 GPUs each; a rank's pool holds the
    // whole latent, 640 bytes a token.
    const auto sv = scenario(4, kTp2Dp2, kFewRequests);
    const auto r = serve::simulate_serving(sv, sv.strategies.front(), {});
    CHECK(r.attention_dp == 2);
    CHECK(r.replicas == 2);
    CHECK(r.pool.bytes_per_token == doctest::Approx(640.0));
    CHECK(r.records.size() == 4);
}

TEST_CASE(
    "attention_dp with tp 2: the shared experts whole on every GPU, on its half of the rank's tokens, with no "
    "collective") {
    // SGLang under DeepEP builds them with tp_size 1 (DeepseekV2MoE;
    // docs/moe.md section 8b). The file's model with one shared expert of
    // 512 (SwiGLU), in its one MoE layer; 5 prompts of 128 tokens a rank.
    std::string shared = kModel;
    const std::string moe = "first_dense_layers: 1}";
    shared.replace(shared.find(moe), moe.size(), "first_dense_layers: 1, shared_experts: 1}");
    const auto cm = hw::make_cost_model("roofline");
    const auto none = scenario(4, kTp2Dp2, "", "inference");
    const auto one = scenario(4, kTp2Dp2, "", "inference", shared);
    const auto a = parallel::build_plan(none, none.strategies.front(), *cm, parallel::BuildOptions{});
    const auto b = parallel::build_plan(one, one.strategies.front(), *cm, parallel::BuildOptions{});
    // Weights a GPU: 3 x 1,024 x 512 x 2 bytes = 3,145,728 (split over the
    // attention-TP pair it would be half).
    CHECK(b.memory.breakdown.weights - a.memory.breakdown.weights == doctest::Approx(3145728.0));
    // No collective of their own: as many TP collectives as without them.
    const auto tp_collectives = [](const parallel::Plan& p) {
        std::size_t n = 0;
        for (const auto& t : p.tasks)
            n += t.kind == parallel::TaskKind::collective && t.op != net::CollectiveOp::all_to_all;
        return n;
    };
    CHECK(tp_collectives(b.plan) == tp_collectives(a.plan));
    // The up projection on the GPU's 5 x 128 / 2 = 320 tokens with both
    // halves of the 512 columns (gate and up, n = 1,024), k = 1,024.
    const auto o = parallel::operator_options(one, b.strategy);
    const auto ops = workload::layer_forward(one.model, 1, 0, workload::PassShape{5, 128, 128}, o);
    const auto up =
        std::find_if(ops.begin(), ops.end(), [](const auto& op) { return op.kernel.name == "shared_expert_up"; });
    REQUIRE(up != ops.end());
    CHECK(up->kernel.m == 320);
    CHECK(up->kernel.n == 1024);
    CHECK(up->kernel.k == 1024);
    CHECK(up->tp_sync == workload::TpSync::none);
}

TEST_CASE(
    "sglang under DeepEP with plain TP 2 (no attention_dp): the shared expert whole on each GPU's half of the tokens, "
    "no collective") {
    // SGLang builds them with tp_size 1 under DeepEP whatever the attention
    // layout, and an all-to-all backend scatters the MoE layer's input over
    // the TP group (the sglang profile's moe_shared_experts: whole;
    // docs/moe.md section 8b), written tp 2, sp, etp 1, ep 2. The file's
    // model with one shared expert of 512 (SwiGLU); 9 prompts of 128 tokens.
    const auto model =
        parasim_test::replace_once(kModel, "first_dense_layers: 1}", "first_dense_layers: 1, shared_experts: 1}");
    const std::string tp2 = "    tp: 2\n    sp: true\n    etp: 1\n    ep: 2\n";
    const auto cm = hw::make_cost_model("roofline");
    const auto sg = scenario(2, tp2, "", "inference", model, "sglang");
    const auto tp = scenario(2, tp2, "", "inference", model);
    const auto a = parallel::build_plan(sg, sg.strategies.front(), *cm, parallel::BuildOptions{});
    const auto b = parallel::build_plan(tp, tp.strategies.front(), *cm, parallel::BuildOptions{});
    // Weights a GPU: the shared expert's 3 x 1,024 x 512 BF16 parameters whole
    // (3,145,728 bytes) where vLLM's TP 2 holds half: 1,572,864 bytes more.
    CHECK(a.memory.breakdown.weights - b.memory.breakdown.weights == doctest::Approx(1572864.0));
    // The prompt pass: the up projection on the GPU's 9 x 128 / 2 = 576 tokens
    // with gate and up whole (n = 1,024), k = 1,024, no TP sync; split over TP
    // it runs the 1,152 gathered tokens on n = 512 after an all-gather, and its
    // down projection reduce-scatters. The same FLOPs a GPU: 2 x 576 x 1,024 x
    // 1,024 = 1,207,959,552.
    const workload::PassShape prompt{9, 128, 128};
    const auto ops_sg = workload::layer_forward(sg.model, 1, 0, prompt, parallel::operator_options(sg, a.strategy));
    const auto ops_tp = workload::layer_forward(tp.model, 1, 0, prompt, parallel::operator_options(tp, b.strategy));
    const auto named = [](const std::vector<workload::Operator>& ops, const std::string& name) {
        const auto it = std::find_if(ops.begin(), ops.end(), [&](const auto& op) { return op.kernel.name == name; });
        REQUIRE(it != ops.end());
        return *it;
    };
    const auto up = named(ops_sg, "shared_expert_up");
    CHECK(up.kernel.m == 576);
    CHECK(up.kernel.n == 1024);
    CHECK(up.kernel.k == 1024);
    CHECK(up.kernel.flops.value == 1207959552.0);
    CHECK(up.tp_sync == workload::TpSync::none);
    CHECK(named(ops_sg, "shared_expert_down").tp_sync == workload::TpSync::none);
    const auto up_tp = named(ops_tp, "shared_expert_up");
    CHECK(up_tp.kernel.m == 1152);
    CHECK(up_tp.kernel.n == 512);
    CHECK(up_tp.kernel.flops.value == 1207959552.0);
    CHECK(up_tp.tp_sync == workload::TpSync::before_column_parallel);
    CHECK(named(ops_tp, "shared_expert_down").tp_sync == workload::TpSync::after_row_parallel);
    // Without EP SGLang runs no DeepEP: the shared expert stays tensor-parallel.
    const auto ep1 = scenario(2, parasim_test::replace_once(tp2, "ep: 2", "ep: 1"), "", "inference", model, "sglang");
    const auto c = parallel::build_plan(ep1, ep1.strategies.front(), *cm, parallel::BuildOptions{});
    CHECK_FALSE(parallel::operator_options(ep1, c.strategy).shared_experts_whole);
}

TEST_CASE("moe_dense_tp_size other than 1 is refused at its own line and column") {
    try {
        (void)scenario(2, kDp2 + "    moe_dense_tp_size: 8\n", kFewRequests);
        FAIL("not refused");
    } catch (const ConfigError& e) {
        // At the value, after the key's 4-space indent and "moe_dense_tp_size: ".
        const std::string what = e.what();
        CHECK(what.find("moe_dense_tp_size: 8 is not one of 1") != std::string::npos);
        CHECK(e.where().line > 0);
        CHECK(e.where().column == 24);
    }
}

TEST_CASE("attention_dp with tp 2 disaggregated is refused") {
    try {
        (void)disaggregated("0,64,4\n", "decode_dp: 2", kTp2Dp2);
        FAIL("not refused");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("is not modelled") != std::string::npos);
    }
}

TEST_SUITE_END();
