// Serving: the request generator, the KV block pool, the schedulers'
// bookkeeping, the exactness of the iteration cache, determinism.
#include "serve_fixture.h"
#include "sim/exec/executor.h"
#include "sim/hw/cost_model.h"
#include "sim/net/topology.h"
#include "sim/serve/engine_state.h"
#include "sim/serve/iteration_cost.h"
#include "sim/serve/requests.h"
#include "sim/serve/scheduler/i_scheduler.h"
#include "sim/serve/serve_report.h"
#include "sim/serve/simulator.h"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <utility>

TEST_SUITE_BEGIN("unit");

using namespace sim;

TEST_CASE("the KV block pool counts blocks of block_size tokens and refuses what it does not have") {
    serve::BlockManager kv(10, 16);
    CHECK(kv.blocks_for(0) == 0);
    CHECK(kv.blocks_for(1) == 1);
    CHECK(kv.blocks_for(16) == 1);
    CHECK(kv.blocks_for(17) == 2);
    CHECK(kv.take(7));
    CHECK_FALSE(kv.take(4));  // 3 left: nothing taken
    CHECK(kv.used() == 7);
    kv.give_back(7);
    CHECK(kv.free() == 10);
    CHECK_THROWS_AS(kv.give_back(1), InternalError);
}

TEST_CASE("a sequence grows block by block, and preemption by recompute returns its blocks") {
    serve::EngineState st;
    st.kv = serve::BlockManager(4, 16);
    std::vector<serve::Sequence> seqs(2);
    st.seqs = seqs;
    st.seqs[0].prompt = 20;  // 2 blocks
    st.seqs[1].prompt = 30;  // 2 blocks
    st.waiting = {0, 1};
    REQUIRE(st.grow(0, 20));
    st.admit_front();
    REQUIRE(st.grow(1, 30));
    st.admit_front();
    CHECK(st.kv.used() == 4);
    // Prefills done, one token sampled each.
    st.seqs[0].computed = 20;
    st.seqs[0].generated = 1;
    st.seqs[1].computed = 30;
    st.seqs[1].generated = 1;
    // Sequence 0 needs token 21 in a 2-block sequence: fits; sequence 1 needs
    // token 31: fits (32 slots). Then token 33 of sequence 1 needs a third
    // block: the pool is full, so the latest admitted (1 itself) is preempted.
    std::vector<serve::Work> work;
    st.schedule_decodes(work);
    CHECK(work.size() == 2);
    st.seqs[0].computed = 21;
    st.seqs[0].generated = 2;
    st.seqs[1].computed = 31;
    st.seqs[1].generated = 2;
    work.clear();
    st.schedule_decodes(work);  // 1 needs slot 32: still its second block
    CHECK(work.size() == 2);
    st.seqs[1].computed = 32;
    st.seqs[1].generated = 3;
    work.clear();
    st.schedule_decodes(work);  // 1 needs slot 33: a third block, none free
    REQUIRE(work.size() == 1);
    CHECK(work[0].seq == 0);
    CHECK(st.preemptions == 1);
    CHECK(st.kv.used() == 2);
    CHECK(st.seqs[1].computed == 0);
    CHECK(st.seqs[1].unfed() == 33);  // prompt and generated tokens are prefilled again
    CHECK(st.waiting.front() == 1);
}

TEST_CASE("with nothing running, queued caches are dropped latest first until the queue's front fits") {
    // A disaggregated decode engine's queue: sequence 0, preempted, needs 3
    // blocks for its recompute (40 tokens); sequences 1 and 2 hold the 2
    // blocks each of their received caches (17 of 18 prompt tokens computed,
    // waiting for their first-token step). The pool has 5 blocks, 1 free.
    serve::EngineState st;
    st.kv = serve::BlockManager(5, 16);
    std::vector<serve::Sequence> seqs(3);
    st.seqs = seqs;
    st.seqs[0].prompt = 40;
    for (const std::uint32_t id : {1u, 2u}) {
        st.seqs[id].prompt = 18;
        st.seqs[id].computed = 17;
        st.seqs[id].blocks = 2;
    }
    REQUIRE(st.kv.take(4));
    st.waiting = {0, 1, 2};
    CHECK_FALSE(st.grow(0, 40));
    // The latest queued holder (2) drops its cache: 3 free, and it will
    // prefill its 18 tokens again.
    REQUIRE(st.drop_latest_queued_cache());
    CHECK(st.kv.free() == 3);
    CHECK(st.seqs[2].blocks == 0);
    CHECK(st.seqs[2].unfed() == 18);
    CHECK(st.seqs[1].blocks == 2);
    CHECK(st.preemptions == 1);
    CHECK(st.grow(0, 40));
    st.admit_front();
    // Then 1; then nobody queued holds blocks of its own.
    REQUIRE(st.drop_latest_queued_cache());
    CHECK(st.seqs[1].unfed() == 18);
    CHECK_FALSE(st.drop_latest_queued_cache());
    CHECK(st.kv.free() == 2);
}

TEST_CASE("a preempted sequence keeps its received cache and loads it again instead of recomputing it") {
    // vLLM's P2pNcclConnector keeps a received cache in its buffer until the
    // request ends and offers prompt - 1 tokens again after a preemption.
    // Sequence 0: an 18-token prompt, 17 tokens received, 5 generated,
    // 22 computed in 2 blocks. Preempted, it keeps the 17 received tokens
    // (to be copied into new blocks) and feeds 18 + 5 - 17 = 6 again, not 23.
    serve::EngineState st;
    st.kv = serve::BlockManager(4, 16);
    std::vector<serve::Sequence> seqs(1);
    st.seqs = seqs;
    serve::Sequence& s = st.seqs[0];
    s.prompt = 18;
    s.received = 17;
    s.generated = 5;
    s.computed = 22;
    REQUIRE(st.kv.take(2));
    s.blocks = 2;
    st.running = {0};
    CHECK(st.preempt_latest() == 0);
    CHECK(s.blocks == 0);
    CHECK(st.kv.free() == 4);
    CHECK(s.computed == 17);
    CHECK(s.unfed() == 6);
    CHECK(s.load);
    CHECK(st.outstanding == 5);
    // Readmitted: blocks for all 23 tokens again.
    CHECK(st.grow(0, 6));
    CHECK(s.blocks == 2);
}

TEST_CASE("the KV pool is the memory left after weights and workspace, in blocks") {
    const auto sc = serve_test::scenario(
        "    arrivals: {process: fixed, rate: 1}\n    prompt_tokens: {distribution: fixed, value: 100}\n"
        "    output_tokens: {distribution: fixed, value: 2}\n    requests: 2\n");
    const auto r = serve::simulate_serving(sc, sc.strategies.front(), {});
    // Llama 3 8B: 32 layers x K and V x 8 KV heads x 128 x 2 bytes.
    CHECK(r.pool.bytes_per_token == doctest::Approx(32.0 * 2 * 8 * 128 * 2));
    const double left = 0.9 * sc.gpu.memory_capacity.as_double() - r.pool.memory.weights - r.pool.memory.workspace;
    CHECK(r.pool.blocks == static_cast<std::int64_t>(std::floor(left / (16 * 131072.0))));
    CHECK(r.pool.memory.weights > 15e9);  // 8.03 B parameters in bf16
}

TEST_CASE("generated arrivals and lengths follow their distributions") {
    config::ServingSpec s;
    s.requests = 20000;
    s.rate = 4;
    s.prompt.kind = config::LengthDistribution::uniform;
    s.prompt.min = 10;
    s.prompt.max = 20;
    s.output.kind = config::LengthDistribution::lognormal;
    s.output.mean = 300;
    s.output.sigma = 0.5;
    s.output.max = 100000;
    const auto gaps_of = [](const std::vector<serve::Request>& r) {
        std::vector<double> g;
        for (std::size_t i = 1; i < r.size(); ++i) g.push_back(r[i].arrival_s - r[i - 1].arrival_s);
        return g;
    };
    const auto mean_sd = [](const std::vector<double>& v) {
        const double m = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
        double ss = 0;
        for (const double x : v) ss += (x - m) * (x - m);
        return std::pair<double, double>{m, std::sqrt(ss / static_cast<double>(v.size()))};
    };
    SUBCASE("poisson: exponential gaps of mean 1/rate, cv 1") {
        s.arrivals = config::ArrivalProcess::poisson;
        const auto r = serve::make_requests(s, 1 << 20);
        const auto [m, sd] = mean_sd(gaps_of(r));
        CHECK(m == doctest::Approx(0.25).epsilon(0.03));
        CHECK(sd / m == doctest::Approx(1.0).epsilon(0.03));
        CHECK(r.front().arrival_s == 0);
        std::vector<double> out;
        for (const auto& q : r) {
            CHECK(q.prompt >= 10);
            CHECK(q.prompt <= 20);
            out.push_back(static_cast<double>(q.output));
        }
        CHECK(mean_sd(out).first == doctest::Approx(300).epsilon(0.03));
    }
    SUBCASE("gamma: gaps of mean 1/rate and the coefficient of variation asked") {
        s.arrivals = config::ArrivalProcess::gamma;
        s.cv = 2.0;
        const auto [m, sd] = mean_sd(gaps_of(serve::make_requests(s, 1 << 20)));
        CHECK(m == doctest::Approx(0.25).epsilon(0.05));
        CHECK(sd / m == doctest::Approx(2.0).epsilon(0.05));
    }
    SUBCASE("fixed: every gap is 1/rate") {
        s.arrivals = config::ArrivalProcess::fixed;
        const auto r = serve::make_requests(s, 1 << 20);
        CHECK(r[100].arrival_s == doctest::Approx(25.0));
    }
    SUBCASE("normalize: the drawn gaps shifted by one and scaled so the last request comes at requests / rate") {
        // vllm bench serve's timing: request i after the first i + 1 gaps,
        // scaled so that the last of 20,000 at 4/s comes at exactly 5,000 s.
        s.arrivals = config::ArrivalProcess::poisson;
        const auto raw = serve::make_requests(s, 1 << 20);
        s.normalize = true;
        const auto r = serve::make_requests(s, 1 << 20);
        REQUIRE(r.size() == raw.size());
        CHECK(r.back().arrival_s == doctest::Approx(5000.0).epsilon(1e-12));
        CHECK(r.front().arrival_s > 0);
        // The same gaps, one scale: arrival i is raw arrival i + 1 times it.
        const double scale = r[0].arrival_s / raw[1].arrival_s;
        CHECK(r[999].arrival_s == doctest::Approx(raw[1000].arrival_s * scale).epsilon(1e-12));
        CHECK(scale == doctest::Approx(1.0).epsilon(0.03));  // 20,000 gaps: their sum is within 3% of 5,000 s
        CHECK(r[999].output == raw[999].output);             // lengths untouched
        // fixed gaps: every request one gap later, the last at exactly 5,000 s.
        s.arrivals = config::ArrivalProcess::fixed;
        const auto f = serve::make_requests(s, 1 << 20);
        CHECK(f[0].arrival_s == doctest::Approx(0.25).epsilon(1e-12));
        CHECK(f[100].arrival_s == doctest::Approx(25.25).epsilon(1e-12));
    }
    SUBCASE("the same seed gives the same requests; another seed others") {
        const auto a = serve::make_requests(s, 1 << 20), b = serve::make_requests(s, 1 << 20);
        s.seed = 2;
        const auto c = serve::make_requests(s, 1 << 20);
        CHECK(a[500].arrival_s == b[500].arrival_s);
        CHECK(a[500].output == b[500].output);
        CHECK(a[500].arrival_s != c[500].arrival_s);
    }
    SUBCASE("lengths are cut to the model's max_seq") {
        s.prompt.min = s.prompt.max = 5000;
        const auto r = serve::make_requests(s, 4096);
        CHECK(r[0].prompt == 4095);
        CHECK(r[0].output == 1);
        CHECK(r[0].clamped);
    }
}

TEST_CASE("nearest-rank percentiles") {
    std::vector<double> v;
    for (int i = 100; i >= 1; --i) v.push_back(i);
    const auto p = serve::percentiles(v);
    CHECK(p.p50 == 50);
    CHECK(p.p90 == 90);
    CHECK(p.p99 == 99);
    CHECK(p.mean == doctest::Approx(50.5));
}

TEST_CASE("the schedulers are registered by name") {
    CHECK(serve::serving_scheduler_names() == std::vector<std::string>{"static", "continuous", "chunked-prefill"});
    CHECK(serve::serving_scheduler("chunked-prefill").chunks_prefill());
    CHECK_THROWS_AS(serve::serving_scheduler("fifo"), ModelError);
}

namespace {

// One request's scenario, its resolved strategy, and the iteration cost of both.
struct IterationFixture {
    config::ScenarioSpec sc = serve_test::scenario(
        "    arrivals: {process: fixed, rate: 1}\n    prompt_tokens: {distribution: fixed, value: 100}\n"
        "    output_tokens: {distribution: fixed, value: 2}\n    requests: 1\n");
    std::unique_ptr<hw::CostModel> cm = hw::make_cost_model("roofline");
    parallel::PlanBuild base = parallel::build_plan(sc, sc.strategies.front(), *cm, {});
    serve::IterationCost cost{sc, base, *cm};
};

}  // namespace

TEST_CASE("a cached iteration costs exactly what executing its plan with the plain cost model costs") {
    IterationFixture f;
    const auto& sc = f.sc;
    const auto& base = f.base;
    const auto& cm = f.cm;
    auto& cost = f.cost;
    const net::Topology topo(sc.cluster, sc.gpus);
    exec::ExecOptions eo;
    eo.host_kernel_issue = sc.profile.kernel_issue;
    eo.launch_queue_depth = sc.profile.launch_queue_depth;
    eo.kernel_efficiency = sc.profile.kernel_efficiency;
    const std::vector<parallel::IterationBatch> batches = {
        {{{1, 512, 512}}, 1},
        {{{32, 1, 700}}, 32},
        {{{1, 256, 768}, {16, 1, 900}}, 16},
        {{{32, 1, 700}}, 32},  // again: from the cache
    };
    for (const auto& b : batches) {
        const Time direct = exec::execute(parallel::build_iteration_plan(sc, base, b), sc.gpu, topo, *cm, eo).makespan;
        CHECK(cost.time(b) == direct);
    }
    CHECK(cost.hits() == 1);
    CHECK(cost.kernel_costs().hits() > 0);
}

TEST_CASE("a decode iteration is slower with more sequences and with longer contexts") {
    IterationFixture f;
    auto& cost = f.cost;
    const Time small = cost.time({{{8, 1, 512}}, 8});
    CHECK(cost.time({{{64, 1, 512}}, 64}) > small);
    CHECK(cost.time({{{8, 1, 4096}}, 8}) > small);
    // The weights are read once per iteration whatever the batch: 8
    // sequences cost far less than 8 single-sequence iterations.
    CHECK(small.seconds() < 2 * cost.time({{{1, 1, 512}}, 1}).seconds());
}

namespace {

// The KV pool of a small serving run of `model` on 8 H200 under TP 8, with
// the memory it had left (0.9 of HBM less weights, workspace and what the
// profile says the engine holds outside PyTorch's allocator).
std::pair<serve::KvPool, double> tp8_pool(const std::string& software, const std::string& model,
                                          const std::string& dtypes, const std::string& serving_extra) {
    const auto path =
        std::filesystem::temp_directory_path() / ("parasim-serve-tp8-pool-" + std::to_string(::getpid()) + ".yaml");
    {
        std::ofstream f(path);
        f << "name: pool\nsoftware: " << software << "\ncluster: h200-hgx\ngpus: 8\nmodel: " << model
          << "\nworkload:\n  mode: serving\n"
          << dtypes << "  serving:\n"
          << "    arrivals: {process: fixed, rate: 1}\n    prompt_tokens: {distribution: fixed, value: 16}\n"
          << "    output_tokens: {distribution: fixed, value: 2}\n    requests: 1\n"
          << serving_extra << "strategies:\n  - name: tp8\n    tp: 8\n";
    }
    const auto sc = config::load_scenario(path.string(), {});
    std::filesystem::remove(path);
    const auto r = serve::simulate_serving(sc, sc.strategies.front(), {});
    const double left = 0.9 * sc.gpu.memory_capacity.as_double() - r.pool.memory.weights - r.pool.memory.workspace -
                        r.pool.non_torch_bytes;
    return {r.pool, left};
}

}  // namespace

TEST_CASE("DeepSeek-V3 under TP 8: every rank's KV pool holds the whole 576-wide latent, 70 272 bytes a token") {
    // MLA has one latent "KV head", which tensor parallelism cannot split:
    // vLLM's ModelConfig.get_num_kv_heads returns 1 under MLA and its MLA
    // backends shape the cache (blocks, block_size, 576) on every rank.
    const auto r = tp8_pool("{name: vllm}", "deepseek-v3", "  dtype: fp8\n  kv_dtype: bf16\n", "");
    const serve::KvPool& pool = r.first;
    // 61 layers x (kv_lora_rank 512 + rope 64) x 2 bytes, not / 8.
    CHECK(pool.bytes_per_token == doctest::Approx(61.0 * (512 + 64) * 2));
    CHECK(pool.blocks == static_cast<std::int64_t>(std::floor(r.second / (16 * 70272.0))));
}

TEST_CASE("vLLM 0.7's KV pool pads each MLA cache entry to 256 bytes: 1280 bytes a layer, 78 080 a token") {
    // vllm/worker/cache_engine.py (PR #12676 to PR #14842): 576 BF16 values,
    // 1152 bytes, rounded up to a multiple of 256 = 1280 bytes, on every one
    // of the 61 layers; with FlashMLA's blocks of 64 tokens. A model without
    // MLA keeps its packed entries under the same profile.
    const std::string v07 = "{name: vllm, version: '0.7.4'}", blocks64 = "    block_size: 64\n";
    const auto m = tp8_pool(v07, "deepseek-v3", "  dtype: fp8\n  kv_dtype: bf16\n", blocks64);
    CHECK(m.first.bytes_per_token == doctest::Approx(61.0 * 1280));
    CHECK(m.first.block_size == 64);
    CHECK(m.first.blocks == static_cast<std::int64_t>(std::floor(m.second / (64 * 78080.0))));
    // Without MLA: 8 KV heads of 64 under TP 8 (one a rank), K and V in FP8:
    // 2 x 64 x 1 = 128 bytes a layer, not a multiple of 256, unpadded.
    const auto g =
        tp8_pool(v07,
                 "{name: t, layers: 4, hidden: 512, heads: 8, kv_heads: 8, head_dim: 64, ffn: 1024, ffn_kind: swiglu, "
                 "vocab: 1024, max_seq: 4096, norm: rmsnorm, tied_embeddings: false, position: rope, bias: false}",
                 "  dtype: bf16\n  kv_dtype: fp8\n", blocks64);
    CHECK(g.first.bytes_per_token == doctest::Approx(4.0 * 128));
    CHECK(g.first.blocks == static_cast<std::int64_t>(std::floor(g.second / (64 * 4.0 * 128))));
}

TEST_CASE("vLLM 0.7 takes the memory it holds outside PyTorch's allocator off the KV pool: 2.53 GiB, 543 blocks") {
    // vllm/utils.py memory_profiling: KV = budget - (weights + activation peak
    // + non_torch_increase); vllm-0.7.yaml's non_torch_memory is 2.53 GiB =
    // 2.53 x 2^30 = 2 716 566 814.72 bytes, and a block of 64 tokens of
    // 78 080 bytes is 4 997 120 bytes: 543.6 blocks fewer than without it.
    const std::string dtypes = "  dtype: fp8\n  kv_dtype: bf16\n", blocks64 = "    block_size: 64\n";
    const auto v07 = tp8_pool("{name: vllm, version: '0.7.4'}", "deepseek-v3", dtypes, blocks64);
    CHECK(v07.first.non_torch_bytes == doctest::Approx(2.53 * 1073741824.0));
    const double with = v07.second, without = with + 2.53 * 1073741824.0;
    CHECK(v07.first.blocks == static_cast<std::int64_t>(std::floor(with / 4997120.0)));
    const auto packed = static_cast<std::int64_t>(std::floor(without / 4997120.0));
    CHECK((packed - v07.first.blocks == 543 || packed - v07.first.blocks == 544));
    // The stacks without the key hold nothing outside the allocator.
    CHECK(tp8_pool("{name: vllm}", "deepseek-v3", dtypes, "").first.non_torch_bytes == 0);
}

TEST_SUITE_END();
