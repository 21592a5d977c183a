// The serving loop: arrivals join the queue, the scheduler forms an
// iteration, the iteration's plan gives its time, tokens are sampled at its
// end (docs/serving.md, "The loop").
#include "sim/serve/simulator.h"

#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/parallel/strategy.h"
#include "sim/serve/engine_state.h"
#include "sim/serve/iteration_cost.h"
#include "sim/serve/scheduler/i_scheduler.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace sim::serve {

KvPool size_kv_pool(const config::ScenarioSpec& sc, const parallel::PlanBuild& build) {
    const auto& sv = *sc.workload.serving;
    KvPool p;
    p.memory = build.memory.breakdown;
    p.memory.kv_cache = 0;
    p.budget_bytes = sc.gpu.memory_capacity.as_double() * sv.gpu_memory_utilization;
    auto opt = parallel::operator_options(sc, build.strategy);
    opt.inference = true;
    p.bytes_per_token = static_cast<double>(sc.model.layers) * workload::layer_kv_bytes(sc.model, 1, 1, opt);
    p.block_size = sv.block_size;
    const double left = p.budget_bytes - p.memory.total();
    const double per_block = p.bytes_per_token * static_cast<double>(sv.block_size);
    p.blocks = left > 0 ? static_cast<std::int64_t>(std::floor(left / per_block)) : 0;
    if (p.blocks < 1)
        throw ConfigError(build.spec.where,
                          fmt::format("strategy '{}': no memory left for the KV cache: weights and workspace take "
                                      "{:.3g} GB of the {:.3g} GB the engine may use (gpu_memory_utilization {})",
                                      build.spec.name, p.memory.total() / 1e9, p.budget_bytes / 1e9,
                                      sv.gpu_memory_utilization));
    return p;
}

namespace {

// The iteration's shape, canonical: every decode in one group of its mean
// context (rounded up), each prefill chunk a group of its own, equal chunks
// merged, groups sorted (docs/serving.md says why the mean).
void batch_shape(const EngineState& st, const std::vector<Work>& work, std::int64_t bucket, parallel::IterationBatch& b,
                 std::vector<parallel::IterationGroup>& prefills) {
    b.groups.clear();
    b.sampled = 0;
    prefills.clear();
    std::int64_t decodes = 0, decode_ctx = 0;
    for (const auto& w : work) {
        const Sequence& s = st.seqs[w.seq];
        const std::int64_t ctx = s.computed + w.tokens;
        if (ctx == s.prompt + s.generated) ++b.sampled;
        if (w.tokens == 1 && !s.prefilling()) {
            ++decodes;
            decode_ctx += ctx;
        } else {
            prefills.push_back(parallel::IterationGroup{1, w.tokens, ctx});
        }
    }
    std::sort(prefills.begin(), prefills.end(), [](const auto& a, const auto& c) {
        return std::tie(a.new_tokens, a.context) < std::tie(c.new_tokens, c.context);
    });
    for (const auto& g : prefills) {
        if (!b.groups.empty() && b.groups.back().new_tokens == g.new_tokens && b.groups.back().context == g.context)
            ++b.groups.back().sequences;
        else
            b.groups.push_back(g);
    }
    if (decodes > 0) {
        const std::int64_t mean = (decode_ctx + decodes - 1) / decodes;
        b.groups.push_back(parallel::IterationGroup{decodes, 1, (mean + bucket - 1) / bucket * bucket});
    }
}

}  // namespace

ServeResult simulate_serving(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                             const ServeOptions& options) {
    if (!sc.workload.serving) throw InternalError("simulate_serving: the scenario has no serving block");
    const auto& sv = *sc.workload.serving;
    if (!sc.workload.flash_attention)
        throw ConfigError(sv.where, "serving needs a fused attention kernel (attention: naive is not supported)");
    const auto cm = hw::make_cost_model(options.cost_model);
    parallel::PlanBuild base;
    try {
        base = parallel::build_plan(sc, spec, *cm, parallel::BuildOptions{});
    } catch (const LimitError& e) {
        throw ConfigError(spec.where, fmt::format("strategy '{}': {}", spec.name, e.what()));
    }
    if (base.memory.oom)
        throw ConfigError(spec.where, fmt::format("strategy '{}': {}", spec.name, base.memory.explanation));
    if (base.strategy.pp != 1 || base.strategy.dp != 1)
        throw ConfigError(spec.where, fmt::format("strategy '{}': serving simulates one replica of tp GPUs; pp {} "
                                                  "and dp {} are not supported yet (give gpus = tp)",
                                                  spec.name, base.strategy.pp, base.strategy.dp));
    ServeResult res;
    res.strategy = spec.name;
    res.gpus = sc.gpus;
    res.pool = size_kv_pool(sc, base);

    const auto requests = make_requests(sv, sc.model.max_seq);
    EngineState st;
    st.kv = BlockManager(res.pool.blocks, res.pool.block_size);
    st.max_batch = sv.max_batch;
    st.max_tokens = sv.max_tokens_per_iteration;
    st.seqs.resize(requests.size());
    res.records.resize(requests.size());
    std::vector<Time> arrival(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) {
        const auto& r = requests[i];
        st.seqs[i].prompt = r.prompt;
        st.seqs[i].output = r.output;
        res.records[i].request = r;
        res.clamped += r.clamped ? 1 : 0;
        arrival[i] = Time::from_seconds_ceil(r.arrival_s);
        const std::int64_t need = st.kv.blocks_for(r.prompt + r.output);
        if (need > st.kv.total())
            throw ConfigError(sv.where, fmt::format("request {} ({} + {} tokens) needs {} KV blocks; the pool of "
                                                    "strategy '{}' holds {}",
                                                    i, r.prompt, r.output, need, spec.name, st.kv.total()));
        if (!sv.scheduler->chunks_prefill() && r.prompt > st.max_tokens)
            throw ConfigError(sv.where, fmt::format("request {} has a {}-token prompt, more than "
                                                    "max_tokens_per_iteration {} (scheduler {} does not chunk)",
                                                    i, r.prompt, st.max_tokens, sv.scheduler->name()));
    }

    IterationCost cost(sc, base, *cm);
    std::vector<Work> work;
    std::vector<Time> last_token(requests.size());
    parallel::IterationBatch batch;
    std::vector<parallel::IterationGroup> prefills;
    std::vector<TimelinePoint> timeline;
    std::uint64_t stride = 1;
    double batch_sum = 0;
    TimelinePoint last_point;
    // Requests released to the engine so far: all of them for open-loop
    // arrivals; for closed-loop clients, `concurrency` at 0 s and then one
    // more each time a request finishes, arriving at that moment.
    const bool closed = sv.arrivals == config::ArrivalProcess::closed;
    std::size_t released = closed ? std::min<std::size_t>(requests.size(), static_cast<std::size_t>(sv.concurrency))
                                   : requests.size();
    std::size_t next = 0, done = 0;
    int idle_retries = 0;
    Time t{};
    while (done < requests.size()) {
        while (next < released && arrival[next] <= t) st.waiting.push_back(static_cast<std::uint32_t>(next++));
        work.clear();
        sv.scheduler->schedule(st, work);
        if (work.empty()) {
            // Nothing can run: wait for the next arrival. A schedule that
            // preempted everything is retried once at the same time.
            if (next < released) {
                t = std::max(t, arrival[next]);
                continue;
            }
            if (++idle_retries > 2)
                throw InternalError(fmt::format("serving: scheduler {} made no progress at {} s ({} waiting, {} "
                                                "running)", sv.scheduler->name(), t.seconds(), st.waiting.size(),
                                                st.running.size()));
            continue;
        }
        idle_retries = 0;
        batch_shape(st, work, sv.decode_context_bucket, batch, prefills);
        const Time start = t;
        t += cost.time(batch);
        ++res.iterations;
        std::int64_t fed = 0;
        for (const auto& w : work) {
            Sequence& s = st.seqs[w.seq];
            RequestRecord& rec = res.records[w.seq];
            if (rec.first_scheduled_s < 0) rec.first_scheduled_s = start.seconds();
            fed += w.tokens;
            s.computed += w.tokens;
            if (s.computed != s.prompt + s.generated) continue;
            ++s.generated;
            if (rec.first_token_s < 0) rec.first_token_s = t.seconds();
            else rec.max_gap_s = std::max(rec.max_gap_s, (t - last_token[w.seq]).seconds());
            last_token[w.seq] = t;
            if (s.generated == s.output) {
                rec.finish_s = t.seconds();
                rec.preemptions = s.preemptions;
                st.kv.give_back(s.blocks);
                s.blocks = 0;
                ++done;
                if (closed && released < requests.size()) {  // the client sends its next request
                    arrival[released] = t;
                    res.records[released].request.arrival_s = t.seconds();
                    ++released;
                }
            }
        }
        st.running.erase(std::remove_if(st.running.begin(), st.running.end(),
                                        [&](std::uint32_t id) { return st.seqs[id].generated == st.seqs[id].output; }),
                         st.running.end());
        // Every stride-th iteration is kept; when 2 x max_timeline are kept,
        // every other one is dropped and the stride doubles, so memory stays
        // bounded however long the run (the mean batch still counts all).
        batch_sum += static_cast<double>(work.size());
        const TimelinePoint point{t.seconds(), static_cast<std::int64_t>(work.size()), fed, st.kv.used(),
                                  static_cast<std::int64_t>(st.waiting.size())};
        res.peak_kv_blocks = std::max(res.peak_kv_blocks, point.kv_blocks);
        last_point = point;
        if ((res.iterations - 1) % stride == 0) {
            timeline.push_back(point);
            if (timeline.size() >= 2 * options.max_timeline) {
                for (std::size_t i = 0; 2 * i < timeline.size(); ++i) timeline[i] = timeline[2 * i];
                timeline.resize((timeline.size() + 1) / 2);
                stride *= 2;
            }
        }
    }
    res.end_s = t.seconds();
    res.preemptions = st.preemptions;
    res.cache_hits = cost.hits();
    res.cache_misses = cost.misses();
    res.timeline = std::move(timeline);
    if (res.iterations > 0 && (res.iterations - 1) % stride != 0) res.timeline.push_back(last_point);  // the end state
    res.mean_batch = res.iterations > 0 ? batch_sum / static_cast<double>(res.iterations) : 0;
    return res;
}

}  // namespace sim::serve
