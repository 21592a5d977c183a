// The plan search (sim/search/): the pruned search finds the exhaustive
// search's best plan, the bound is below every simulated iteration, results
// do not depend on the thread count, and bad search blocks are refused with
// file:line:column or an explicit "no plan satisfies".
#include "sim/search/search.h"
#include "tests/test_util.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

namespace {

namespace fs = std::filesystem;

// A scenario text written to a private file, loaded with the shipped data.
struct ScenarioFile {
    fs::path path;
    explicit ScenarioFile(const std::string& text, const std::string& name) {
        path = parasim_test::private_temp("search-" + name + ".yaml");
        std::ofstream(path) << text;
    }
    ~ScenarioFile() {
        std::error_code ec;
        fs::remove(path, ec);
    }
    sim::config::ScenarioSpec load() const { return sim::config::load_scenario(path.string(), {}); }
};

const char* kGpt13 = R"(name: search-gpt13
cluster: dgx-a100
model: gpt-1.3b
workload: {mode: training, dtype: fp16, seq_len: 2048, global_batch: 32, micro_batch: 1}
strategies:
  - {name: base, tp: 1, dp: auto}
search:
  space:
    tp: auto
    pp: auto
    micro_batch: [1, 2, 4]
    recompute: [none, full]
    schedule: auto
    virtual_stages: [2]
)";

// Case 2: a smaller cluster, GPU count searched, ZeRO and sp in the space.
const char* kGpuCount = R"(name: search-gpus
cluster: dgx-a100
model: gpt-1.3b
workload: {mode: training, dtype: fp16, seq_len: 1024, global_batch: 16, micro_batch: 1}
strategies:
  - {name: base, tp: 1, dp: auto}
search:
  space: {tp: [1, 2, 4], pp: [1, 2], sp: auto, zero: [0, 1], micro_batch: [1, 2]}
  constraints: {min_gpus: 2, max_gpus: 8}
  objective: cost
  price_per_gpu_hour: 2.0
)";

// Case 3: Llama 3 8B on one DGX H100, deep pipelines and interleaving.
const char* kLlama8 = R"(name: search-llama8
cluster: dgx-h100
model: llama3-8b
workload: {mode: training, dtype: bf16, seq_len: 2048, global_batch: 16, micro_batch: 1, recompute: selective}
strategies:
  - {name: base, tp: 1, dp: auto}
search:
  space: {tp: [1, 2, 8], pp: [1, 2, 4], schedule: [1f1b, interleaved-1f1b], virtual_stages: [2, 4]}
  objective: tokens_per_s_per_gpu
)";

// Case 4: TP groups across nodes (16 A100s, two DGX nodes): the bound's
// NIC term.
const char* kAcrossNodes = R"(name: search-nodes
cluster: dgx-a100-pod
gpus: 16
model: gpt-1.3b
workload: {mode: training, dtype: fp16, seq_len: 1024, global_batch: 16, micro_batch: 1}
strategies:
  - {name: base, tp: 1, dp: auto}
search:
  space: {tp: [4, 8, 16], pp: [1, 2], sp: auto, micro_batch: [1, 2]}
)";

// Case 5: a small MoE whose first layer is dense and 8x wider than an
// expert pair, expert parallelism searched (auto: every divisor of the 8
// experts): the bound must count dense and MoE layers each at its own cost
// (costing all eight layers as the dense one exceeds the simulated time).
const char* kMoe = R"(name: search-moe
cluster: dgx-h100
model:
  name: tiny-moe
  layers: 8
  hidden: 1024
  heads: 16
  kv_heads: 4
  ffn: 16384
  ffn_kind: swiglu
  vocab: 32000
  max_seq: 2048
  norm: rmsnorm
  position: rope
  bias: false
  tied_embeddings: false
  moe: {experts: 8, top_k: 2, ffn: 1024, first_dense_layers: 1}
workload: {mode: training, dtype: bf16, seq_len: 1024, global_batch: 16, micro_batch: 1, moe: {routing: balanced, grouped_gemm: true}}
strategies:
  - {name: base, tp: 1, dp: auto}
search:
  space: {tp: [1, 2], pp: [1, 2, 4], ep: auto, micro_batch: [1, 2]}
)";

// Case 6: data parallelism across nodes (32 A100s; tp 8 fills each node,
// so every data-parallel group has one rank per node), little compute per
// GPU and the gradient reduction after the backward (no overlap): the
// reduce-scatter, ZeRO's parameter all-gather through the NICs dominate,
// and the bound's data-parallel tail prunes (the bound without it prunes
// none of these with k = 3).
const char* kDpAcrossNodes = R"(name: search-dp-nodes
cluster: dgx-a100-pod
gpus: 32
model: gpt-6.7b
workload: {mode: training, dtype: fp16, seq_len: 512, global_batch: 8, micro_batch: 1}
strategies:
  - {name: base, tp: 8, dp: auto, overlap: {grad_reduce: false}}
search:
  space: {tp: [8], pp: [1, 2, 4], sp: auto, zero: [0, 1], micro_batch: [1, 2]}
)";

// Case 7: inference on one DGX H100 under TTFT and TPOT limits: the
// inference bound (TTFT and decode period) orders and prunes, and
// candidates whose least TTFT or TPOT misses a limit go last.
const char* kServe8 = R"(name: search-serve8
cluster: dgx-h100
model: llama3-8b
workload: {mode: inference, dtype: bf16, batch: 64, prompt_tokens: 1024, output_tokens: 128}
strategies:
  - {name: base, tp: 1}
search:
  space: {tp: [1, 2, 4, 8], pp: auto, dp: auto, batch: auto}
  constraints: {gpus: [8], ttft_ms: 200, tpot_ms: 15}
  objective: tokens_per_s_per_gpu
)";

sim::search::SearchResult search(const sim::config::ScenarioSpec& sc, bool prune, int threads, int keep = 3) {
    sim::search::SearchOptions o;
    o.prune = prune;
    o.threads = threads;
    o.keep = keep;
    return sim::search::run_search(sc, o);
}

// The same plans simulated, pruned and ranked, with the same metrics.
void check_same(const sim::search::SearchResult& one, const sim::search::SearchResult& two) {
    CHECK(one.ranked == two.ranked);
    CHECK(one.simulated == two.simulated);
    CHECK(one.pruned == two.pruned);
    REQUIRE(one.ranked.size() == two.ranked.size());
    for (std::size_t i = 0; i < one.ranked.size(); ++i)
        CHECK(sim::report::run_json(*one.outcomes[one.ranked[i]].metrics) ==
              sim::report::run_json(*two.outcomes[two.ranked[i]].metrics));
}

}  // namespace

TEST_SUITE_BEGIN("e2e");

TEST_CASE("the pruned search returns the exhaustive search's best plan, and the bound is a bound") {
    const std::pair<const char*, const char*> cases[] = {
        {kGpt13, "gpt13"}, {kGpuCount, "gpus"},          {kLlama8, "llama8"}, {kAcrossNodes, "nodes"},
        {kMoe, "moe"},     {kDpAcrossNodes, "dp-nodes"}, {kServe8, "serve8"}};
    for (const auto& c : cases) {
        const std::string name = c.second;
        CAPTURE(name);
        const ScenarioFile f(c.first, name);
        const auto sc = f.load();
        const auto full = search(sc, false, 2);
        const auto pruned = search(sc, true, 2);
        REQUIRE(!full.ranked.empty());
        REQUIRE(!pruned.ranked.empty());
        CHECK(pruned.ranked.front() == full.ranked.front());
        CHECK(*pruned.outcomes[pruned.ranked.front()].value == *full.outcomes[full.ranked.front()].value);
        CHECK(pruned.simulated + pruned.pruned == full.simulated);
        CHECK(full.pruned == 0);
        // Every simulated iteration takes at least its bound.
        for (const auto& o : full.outcomes) {
            if (!o.metrics || !o.metrics->iteration_ms) continue;
            CAPTURE(o.candidate.strategy.name);
            CHECK(o.bound_s > 0);
            CHECK(o.bound_s * 1e3 <= *o.metrics->iteration_ms);
        }
    }
}

TEST_CASE("the bound holds the data-parallel tail: gradients and ZeRO's parameters through the NICs") {
    // tp 8 x dp 4 on four DGX A100 nodes, ZeRO-1, gradients reduced after
    // the backward: each GPU's 1/8 of the model (2-byte gradients, then
    // 2-byte parameters) is reduce-scattered, then all-gathered over 4
    // ranks on 4 nodes. A ring moves 3/4 of the buffer into each rank, one
    // step after another, each step's flow crossing a 200 Gb/s (25 GB/s)
    // network link: at least 2 x 3/4 x (parameters / 8) x 2 B / 25 GB/s,
    // about 100 ms. The compute of 8 sequences of 512 tokens is less.
    const ScenarioFile f(kDpAcrossNodes, "dp-tail");
    const auto sc = f.load();
    const auto res = search(sc, false, 2);
    const double params = sim::workload::count_parameters(sc.model).total;
    const double dp_s = 2 * 0.75 * params / 8 * 2 / 25e9;
    bool seen = false;
    for (const auto& o : res.outcomes) {
        if (o.candidate.strategy.name != "tp8-pp1-dp4-z1-1f1b-mb1-none") continue;
        seen = true;
        CHECK(o.bound_s >= dp_s);
        REQUIRE(o.metrics);
        CHECK(o.bound_s * 1e3 <= *o.metrics->iteration_ms);
    }
    CHECK(seen);
    // The pruned search skips some of the rest.
    CHECK(search(sc, true, 2).pruned > 0);
}

TEST_CASE("the inference bound is below every simulated run, and an SLO it rules out is missed") {
    const ScenarioFile f(kServe8, "serve8-bound");
    const auto sc = f.load();
    const auto full = search(sc, false, 2);
    int bounded = 0, ruled_out = 0;
    for (const auto& o : full.outcomes) {
        if (!o.metrics || !o.metrics->tokens_per_s) continue;
        CAPTURE(o.candidate.strategy.name);
        // The run's time: batch x output_tokens over its tokens/s.
        const double total_s = static_cast<double>(o.candidate.batch) * 128 / *o.metrics->tokens_per_s;
        CHECK(o.bound_s > 0);
        CHECK(o.bound_s <= total_s);
        ++bounded;
        if (o.optimistic == -std::numeric_limits<double>::infinity()) {
            CHECK(!o.value);
            ++ruled_out;
        }
    }
    CHECK(bounded > 10);
    CHECK(ruled_out > 0);
    CHECK(search(sc, true, 2).pruned > 0);
}

TEST_CASE("ep is searched like any other degree, with run's rules") {
    const ScenarioFile f(kMoe, "moe-ep");
    const auto sc = f.load();
    const auto spec = sim::search::read_search(sc);
    CHECK(spec.ep.is_auto);
    const auto all = sim::search::enumerate(sc, spec);
    // tp {1, 2} x pp {1, 2, 4} x ep {1, 2, 4, 8} x micro_batch {1, 2}.
    CHECK(all.size() == 2 * 3 * 4 * 2);
    const auto res = search(sc, false, 2);
    // On 8 GPUs ep must divide dp = 8 / (tp x pp), so of ep {1, 2, 4, 8}:
    // tp1-pp1 (dp 8) refuses none, tp1-pp2 and tp2-pp1 (dp 4) refuse ep 8,
    // tp1-pp4 and tp2-pp2 (dp 2) refuse 4 and 8, tp2-pp4 (dp 1) refuses 2, 4
    // and 8; each for both micro-batch sizes.
    CHECK(res.invalid == 2 * (0 + 1 + 1 + 2 + 2 + 3));
    bool saw_ep8 = false;
    for (const auto& o : res.outcomes)
        if (o.candidate.strategy.ep == 8 && o.metrics) saw_ep8 = true;
    CHECK(saw_ep8);
}

TEST_CASE("with a per-layer expert histogram each MoE layer is bounded by its own load") {
    // kMoe's MoE layers 1 to 7, 8 experts: layer 1 (the one MoE layer that
    // stood for all in the bound) sends 8/15 of its copies to expert 0, the
    // others route flat. Bounding every MoE layer by layer 1 would put the
    // bound of an ep > 1 plan above its simulated iteration.
    const auto csv = parasim_test::private_temp("search-layers.csv");
    {
        std::ofstream out(csv);
        out << "layer,expert,tokens\n";
        for (int l = 1; l < 8; ++l)
            for (int e = 0; e < 8; ++e) out << l << "," << e << "," << (l == 1 && e == 0 ? 8 : 1) << "\n";
    }
    // Experts 16 times wider (ffn 16384), so that the MoE layers' expert
    // GEMMs weigh in the iteration.
    const std::string text =
        parasim_test::replace_once(parasim_test::replace_once(kMoe, "top_k: 2, ffn: 1024", "top_k: 2, ffn: 16384"),
                                   "routing: balanced", "routing: histogram(" + csv.filename().string() + ")");
    const ScenarioFile f(text, "moe-layers");
    const auto sc = f.load();
    const auto full = search(sc, false, 2);
    const auto pruned = search(sc, true, 2);
    REQUIRE(!full.ranked.empty());
    CHECK(pruned.ranked.front() == full.ranked.front());
    int with_ep = 0;
    for (const auto& o : full.outcomes) {
        if (!o.metrics || !o.metrics->iteration_ms) continue;
        CAPTURE(o.candidate.strategy.name);
        CHECK(o.bound_s * 1e3 <= *o.metrics->iteration_ms);
        if (o.candidate.strategy.ep > 1) ++with_ep;
    }
    CHECK(with_ep > 0);
    std::error_code ec;
    fs::remove(csv, ec);
}

TEST_CASE("the search is the same for any thread count") {
    const ScenarioFile f(kGpt13, "threads");
    const auto sc = f.load();
    const auto one = search(sc, true, 1);
    const auto two = search(sc, true, 2);
    check_same(one, two);
}

TEST_CASE("an executor that runs candidates ahead of the pruning decision changes nothing") {
    // The most speculative executor (an MPI run with many ranks at its
    // limit): it simulates every position, wanted or not, out of order.
    const ScenarioFile f(kGpt13, "ahead");
    const auto sc = f.load();
    const auto local = search(sc, true, 1);
    sim::search::SearchOptions o;
    o.keep = 3;
    o.executor = [](sim::search::OrderedWork& w) {
        std::vector<std::string> results(w.size());
        for (std::size_t k = w.size(); k-- > 0;) results[k] = w.run(k);
        for (std::size_t k = 0; k < w.size(); ++k) {
            (void)w.wanted(k);
            w.accept(k, results[k]);
        }
        return true;
    };
    const auto ahead = sim::search::run_search(sc, o);
    CHECK(local.pruned > 0);
    check_same(local, ahead);
    // A helper process (its executor returns false) reports nothing.
    o.executor = [](sim::search::OrderedWork&) { return false; };
    CHECK(!sim::search::run_search(sc, o).complete);
}

TEST_CASE("the search skips what run refuses and what does not fit, with run's reasons") {
    const ScenarioFile f(kGpt13, "verdicts");
    const auto res = search(f.load(), true, 2);
    // gpt-1.3b has 32 heads and 24 layers: tp 8 divides, pp 8 x v 2 = 16 does not divide 24.
    bool refused_interleaving = false;
    for (const auto& o : res.outcomes)
        if (o.verdict == sim::search::Verdict::invalid &&
            o.note.find("divisible by pp x virtual_stages") != std::string::npos)
            refused_interleaving = true;
    CHECK(refused_interleaving);
    CHECK(res.generated == res.equivalent + res.invalid + res.over_memory + res.pruned + res.simulated);
}

TEST_CASE("named in space.schedule, dualpipev is searched, bounded and can win where dualpipe cannot run") {
    // pp 3: DualPipe needs an even pp (invalid); DualPipeV cuts gpt-1.3b's
    // 24 layers into 6 chunks of 4, two a rank.
    const ScenarioFile f(R"(name: search-dualpipev
cluster: dgx-h100
gpus: 3
model: gpt-1.3b
workload: {mode: training, dtype: bf16, seq_len: 1024, global_batch: 16, micro_batch: 1}
strategies:
  - {name: base, tp: 1, dp: auto}
search:
  space: {tp: [1], pp: [3], sp: [false], zero: [0], micro_batch: [1], recompute: [none],
          schedule: [1f1b, dualpipe, dualpipev]}
)",
                         "dualpipev");
    const auto res = search(f.load(), false, 1);
    REQUIRE(res.outcomes.size() == 3);
    CHECK(res.outcomes[1].verdict == sim::search::Verdict::invalid);
    CHECK(res.outcomes[1].note.find("dualpipe needs an even pp") != std::string::npos);
    REQUIRE(res.outcomes[2].verdict == sim::search::Verdict::simulated);
    CHECK(res.outcomes[2].candidate.strategy.schedule->name() == "dualpipev");
    CHECK(res.outcomes[2].bound_s * 1e3 <= *res.outcomes[2].metrics->iteration_ms);
    REQUIRE(!res.ranked.empty());
    CHECK(res.ranked.front() == 2);
}

TEST_CASE("hand-given stage layers that give the even split are the even plan's equivalent") {
    // gpt-1.3b has 24 layers: on pp 4 the even split is 6 per stage, so
    // first_stage_layers 6 is the same plan; 5 is another.
    const ScenarioFile f(parasim_test::replace_once(
                             kGpt13,
                             "    tp: auto\n    pp: auto\n    micro_batch: [1, 2, 4]\n    recompute: [none, full]\n"
                             "    schedule: auto\n",
                             "    tp: [1]\n    pp: [4]\n    first_stage_layers: [0, 5, 6]\n    last_stage_layers: [0]\n"
                             "    sp: [false]\n    zero: [0]\n    micro_batch: [1]\n    recompute: [none]\n"
                             "    schedule: [1f1b]\n"),
                         "split");
    const auto res = search(f.load(), false, 1);
    REQUIRE(res.outcomes.size() == 3);
    CHECK(res.outcomes[0].verdict == sim::search::Verdict::simulated);
    CHECK(res.outcomes[1].verdict == sim::search::Verdict::simulated);
    CHECK(res.outcomes[2].verdict == sim::search::Verdict::equivalent);
    CHECK(res.outcomes[2].note == "the same layer split as #0");
}

TEST_SUITE_END();

TEST_SUITE_BEGIN("unit");

TEST_CASE("bad search blocks are refused at file:line:column") {
    const auto err = [](const std::string& text) {
        const ScenarioFile f(text, "bad");
        try {
            const auto sc = f.load();
            sim::search::read_search(sc);
        } catch (const sim::ConfigError& e) {
            return std::string(e.what()).substr(f.path.string().size());
        }
        return std::string("no error");
    };
    using parasim_test::replace_once;
    CHECK(err(replace_once(kGpt13, "micro_batch: [1, 2, 4]", "micro_batch: []")) ==
          ":11:18: search.space.micro_batch: an empty list leaves nothing to search: give values or auto");
    CHECK(err(replace_once(kGpuCount, "{min_gpus: 2, max_gpus: 8}", "{min_gpus: 16, max_gpus: 8}")) ==
          ":9:41: search.constraints.max_gpus: min_gpus=16 exceeds max_gpus=8: no GPU count is left");
    CHECK(err(replace_once(kGpt13, "virtual_stages: [2]", "virtual_stages: [2]\n  constraints: {ttft_ms: 100}")) ==
          ":15:26: search.constraints.ttft_ms: ttft_ms is an inference SLO; this scenario trains");
    CHECK(err(replace_once(kGpuCount, "  price_per_gpu_hour: 2.0\n", ""))
              .find("objective cost needs price_per_gpu_hour") != std::string::npos);
    CHECK(
        err(replace_once(kGpuCount, "  objective: cost\n  price_per_gpu_hour: 2.0\n", "  objective: time_to_budget\n"))
            .find("objective time_to_budget needs token_budget") != std::string::npos);
    CHECK(err(replace_once(kGpuCount, "  price_per_gpu_hour: 2.0\n",
                           "  price_per_gpu_hour: 2.0\n  token_budget: 1e9\n")) ==
          ":12:17: search.token_budget: token_budget applies to objective time_to_budget");
}

TEST_CASE("time_to_budget ranks as tokens/s does, and its value is the budget over the throughput") {
    const ScenarioFile a(kLlama8, "budget-tps");
    const ScenarioFile b(parasim_test::replace_once(kLlama8, "objective: tokens_per_s_per_gpu",
                                                    "objective: time_to_budget\n  token_budget: 1.5e12"),
                         "budget-time");
    const auto sa = a.load(), sb = b.load();
    const auto tps = search(sa, false, 2, 1000);
    const auto time = search(sb, false, 2, 1000);
    REQUIRE(!time.ranked.empty());
    // One GPU count: tokens/s per GPU and time to the budget order the plans alike.
    CHECK(time.ranked == tps.ranked);
    const auto& best = time.outcomes[time.ranked.front()];
    // 1.5e12 tokens at the plan's tokens/s, in seconds, negated (higher is better).
    CHECK(*best.value == doctest::Approx(-1.5e12 / *best.metrics->tokens_per_s));
}

TEST_CASE("an impossible SLO gives 'no plan satisfies' with the closest candidates") {
    const ScenarioFile f(R"(name: search-slo
cluster: dgx-a100
model: gpt-1.3b
workload: {mode: inference, dtype: fp16, batch: 4, prompt_tokens: 128, output_tokens: 8}
strategies:
  - {name: base, tp: 1}
search:
  space: {tp: [1, 2], batch: auto}
  constraints: {gpus: [2], tpot_ms: 0.001}
)",
                         "slo");
    const auto res = search(f.load(), true, 1);
    CHECK(res.ranked.empty());
    // tp 1 and 2 x batch 1, 2 and 4; batch 1 cannot feed dp 2 (run's rule);
    // no bound for inference, so the rest are simulated.
    CHECK(res.invalid == 1);
    CHECK(res.simulated == 5);
    const std::string msg = sim::search::no_plan_message(res);
    CHECK(msg.rfind("no plan satisfies the search's constraints", 0) == 0);
    CHECK(msg.find("closest candidates: #1 tp1-pp1-dp2-1f1b-b2 (2 GPUs): tpot_ms: ") != std::string::npos);
    CHECK(msg.find(" ms > 0.001 ms") != std::string::npos);
}

TEST_SUITE_END();
