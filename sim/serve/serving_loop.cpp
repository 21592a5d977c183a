// The serving event loop: arrivals, iterations and completion on one
// Simulation (docs/serving.md, "The loop"); the host work around the steps
// (request intake, token streaming) is the front end's (front_end.h).
// Pipeline parallelism is in serving_loop_pp.cpp and the disaggregated
// handover in serving_loop_handover.cpp (the state: serving_loop_impl.h).
#include "sim/serve/serving_loop.h"

#include "sim/core/error.h"
#include "sim/serve/router/i_router.h"
#include "sim/serve/scheduler/i_scheduler.h"
#include "sim/serve/serving_loop_impl.h"

#include <algorithm>

namespace sim::serve {

namespace loop_detail {

Loop::Loop(const LoopSetup& setup, const std::vector<Request>& requests, ServeResult& res)
    : setup_(setup),
      sv_(*setup.scenario.workload.serving),
      requests_(requests),
      res_(res),
      closed_(sv_.arrivals == config::ArrivalProcess::closed),
      front_(sim_, setup.scenario.profile, [this](std::uint32_t id) {
          if (!closed_) ++arrived_;
          arrive(id);
      }) {
    const std::size_t n = requests.size();
    seqs_.resize(n);
    arrival_.resize(n);
    last_token_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        seqs_[i].prompt = requests[i].prompt;
        // A prefill replica's work ends at the first token.
        seqs_[i].output = disaggregated() ? 1 : requests[i].output;
        arrival_[i] = Time::from_seconds_ceil(requests[i].arrival_s);
    }
    reps_.resize(static_cast<std::size_t>(setup.replicas));
    int gpu = 0;
    for (std::size_t r = 0; r < reps_.size(); ++r) {
        Replica& rep = reps_[r];
        rep.role = setup.prefilled                                ? Role::decode
                   : !disaggregated()                             ? Role::both
                   : static_cast<int>(r) < setup.prefill_replicas ? Role::prefill
                                                                  : Role::decode;
        const bool other = rep.role == Role::decode && setup.decode_cost;
        rep.cost = other ? setup.decode_cost : &setup.cost;
        rep.pool = other ? setup.decode_pool : &res.pool;
        rep.tp = other ? setup.decode_tp : setup.tp;
        rep.first_gpu = gpu;
        gpu += rep.tp;
        // Engines of lockstep ranks, counted from the start of their pool.
        const bool decode_pool = rep.role == Role::decode && disaggregated();
        rep.ranks = decode_pool ? setup.decode_lockstep : setup.lockstep;
        const std::size_t pool_first = decode_pool ? static_cast<std::size_t>(setup.prefill_replicas) : 0;
        rep.engine = r - (r - pool_first) % static_cast<std::size_t>(rep.ranks);
        rep.st.kv = BlockManager(rep.pool->blocks, rep.pool->block_size);
        rep.st.max_batch = sv_.max_batch;
        rep.st.max_tokens = sv_.max_tokens_per_iteration;
        rep.st.seqs = seqs_;
        rep.st.swap = sv_.swap_preemption;
        rep.stats.role = rep.role == Role::both ? "both" : rep.role == Role::prefill ? "prefill" : "decode";
        rep.stats.first_gpu = rep.first_gpu;
        rep.stats.tp = rep.tp;
        rep.stats.pp = setup.pp;
        if (setup.pp > 1) {
            gpu += rep.tp * (setup.pp - 1);
            rep.slots.resize(static_cast<std::size_t>(setup.pp));
            for (auto& b : rep.slots) b.stage_time.resize(static_cast<std::size_t>(setup.pp));
            rep.stage_busy.assign(static_cast<std::size_t>(setup.pp), 0);
            rep.stage_queue.resize(static_cast<std::size_t>(setup.pp));
            for (auto& q : rep.stage_queue) q.reserve(static_cast<std::size_t>(setup.pp));
        }
    }
    if (setup.pp > 1) in_flight_.assign(n, 0);
    if (disaggregated() || setup.pp > 1) {
        topo_ = std::make_unique<net::Topology>(setup.scenario.cluster, setup.scenario.gpus);
        net_ = std::make_unique<net::FlowNetwork>(sim_, *topo_);
        if (disaggregated()) {
            transfers_.resize(n);
            posted_until_.assign(static_cast<std::size_t>(setup.scenario.gpus), Time{});
            if (sv_.serial_dispatch)
                for (std::size_t r = 0; r < reps_.size(); ++r)
                    decode_front_.push_back(
                        std::make_unique<FrontEnd>(sim_, setup.scenario.profile, [this](std::uint32_t id) {
                            at_decode(id, static_cast<std::size_t>(res_.records[id].decode_replica));
                        }));
        }
    }
    prefix_blocks_ = sv_.shared_prefix_tokens / res.pool.block_size;
    released_ = closed_ ? std::min<std::size_t>(n, static_cast<std::size_t>(sv_.concurrency)) : n;
}

std::size_t Loop::route(std::size_t first, std::size_t count, std::uint64_t& routed) {
    load_.clear();
    for (std::size_t i = 0; i < count; ++i) load_.push_back(reps_[first + i].st.outstanding);
    const std::size_t pick = sv_.router->pick(load_, routed++);
    if (pick >= count)
        throw InternalError(fmt::format("router {} picked replica {} of {}", sv_.router->name(), pick, count));
    return first + pick;
}

void Loop::arrive(std::uint32_t id) {
    if (setup_.prefilled) {
        Sequence& s = seqs_[id];
        s.computed = s.prompt;
        s.generated = 1;  // sampled by the prefill that ran elsewhere
        res_.records[id].prefill_done_s = sim_.now().seconds();
        hand_off(id);
        return;
    }
    const std::size_t front = disaggregated() ? static_cast<std::size_t>(setup_.prefill_replicas) : reps_.size();
    const std::size_t r = route(0, front, routed_front_);
    Replica& rep = reps_[r];
    const Sequence& s = seqs_[id];
    res_.records[id].replica = static_cast<std::int32_t>(r);
    if (rep.prefix_cached) apply_prefix(id);
    if (sv_.async_scheduling && rep.busy) rep.deferred_now.push_back(id);  // joins the step after next
    else rep.st.waiting.push_back(id);
    rep.st.outstanding += s.unfed() + s.output - s.generated;
    ++rep.stats.requests;
    kick(r);
}

// An idle replica runs its scheduler once every event at this instant has
// run (arrivals at the same time join the same iteration).
void Loop::kick(std::size_t r) {
    // A data-parallel-attention engine's ranks start together: kick its first.
    r = reps_[r].engine;
    Replica& rep = reps_[r];
    if (rep.busy || rep.kick_pending) return;
    rep.kick_pending = true;
    sim_.schedule_at(sim_.now(), [this, r] {
        reps_[r].kick_pending = false;
        start(r);
    });
}

void Loop::start(std::size_t r) {
    Replica& rep = reps_[r];
    if (rep.busy) return;
    if (setup_.pp > 1) {
        start_pp(r);
        return;
    }
    if (rep.ranks > 1) {
        start_engine(r);
        return;
    }
    if (!schedule_step(rep)) return;
    batch_shape(rep.st, rep.work, sv_.decode_context_bucket, batch_, prefills_);
    rep.start = sim_.now();
    rep.busy = true;
    ++res_.iterations;
    ++rep.stats.iterations;
    // The engine's host time per step is serial with the GPU's work, or,
    // with async scheduling, done for the next step while the GPU runs this
    // one, so a step takes the longer of the two (docs/serving.md).
    const Time gpu = rep.cost->time(batch_) + swap_time(rep) + kv_copy_time(rep);
    const Time host = front_.step_host_time(rep.work.size());
    sim_.schedule_at(rep.start + (sv_.async_scheduling ? std::max(gpu, host) : gpu + host), [this, r] { finish(r); });
}

// The replica's scheduler pass; false when nothing can run. Then the next
// arrival (or a transfer's end) kicks the replica again. A schedule that
// preempted everything is retried at once. With nothing running, no later
// event frees blocks for the queue's front, so queued caches are dropped,
// latest first, until it runs (EngineState::drop_latest_queued_cache); a
// replica still stuck when the run ends is an InternalError.
bool Loop::schedule_work(Replica& rep) {
    for (int attempt = 0;; ++attempt) {
        rep.work.clear();
        sv_.scheduler->schedule(rep.st, rep.work);
        if (!rep.work.empty()) return true;
        if (rep.st.running.empty() && !rep.st.waiting.empty() && rep.st.drop_latest_queued_cache()) {
            attempt = 0;
            continue;
        }
        if (arrivals_pending() || attempt >= 2) return false;
    }
}

// The scheduler pass of a step that starts now. With async scheduling vLLM's
// engine core schedules a step while the GPU still runs the one before it (a
// queue of two batches: step_with_batch_queue, vllm/v1/engine/core.py,
// vllm-project/vllm@c3ad791e), and drains newly arrived requests only after
// that step's result, when the next step is already scheduled: a request that
// arrives while step N runs joins step N + 2. If nothing else can be
// scheduled now, the engine had no step in flight (vLLM schedules none when
// nothing is schedulable) and takes the request at once (docs/serving.md,
// "Host time of the serving engine").
bool Loop::schedule_step(Replica& rep) {
    if (!sv_.async_scheduling) return schedule_work(rep);
    const auto release = [&rep] {
        rep.st.waiting.insert(rep.st.waiting.end(), rep.deferred_next.begin(), rep.deferred_next.end());
        rep.deferred_next.clear();
    };
    release();
    rep.deferred_next.swap(rep.deferred_now);  // deferred_now is empty now
    if (schedule_work(rep)) return true;
    if (rep.deferred_next.empty()) return false;
    release();
    return schedule_work(rep);
}

// Data-parallel attention (docs/serving.md, "Data-parallel attention"): each
// rank of the engine that starts at replica `first` schedules its own batch;
// the MoE layers' all-to-alls join the ranks in every layer, so the step
// ends for all of them when the slowest rank's batch ends (SGLang runs an
// idle rank's empty batch through the same collectives). A rank's time is
// the engine's symmetric plan run with its batch on every rank, so the
// step is max over ranks of t(batch_r), and the host time the longest
// rank's (each rank has its own scheduler process).
void Loop::start_engine(std::size_t first) {
    const std::size_t n = static_cast<std::size_t>(reps_[first].ranks);
    if (reps_[first].busy) return;
    Time gpu{}, host{};
    bool any = false;
    for (std::size_t m = first; m < first + n; ++m) {
        Replica& rep = reps_[m];
        if (!schedule_step(rep)) continue;
        any = true;
        batch_shape(rep.st, rep.work, sv_.decode_context_bucket, batch_, prefills_);
        ++rep.stats.iterations;
        gpu = std::max(gpu, rep.cost->time(batch_) + swap_time(rep) + kv_copy_time(rep));
        host = std::max(host, front_.step_host_time(rep.work.size()));
    }
    if (!any) return;
    ++res_.iterations;
    for (std::size_t m = first; m < first + n; ++m) {
        reps_[m].start = sim_.now();
        reps_[m].busy = true;
    }
    const Time end = sim_.now() + (sv_.async_scheduling ? std::max(gpu, host) : gpu + host);
    sim_.schedule_at(end, [this, first] { finish_engine(first); });
}

void Loop::finish_engine(std::size_t first) {
    const std::size_t end = first + static_cast<std::size_t>(reps_[first].ranks);
    for (std::size_t m = first; m < end; ++m) {
        Replica& rep = reps_[m];
        rep.busy = false;
        if (rep.work.empty()) continue;  // an idle rank: it waited, nothing to settle
        rep.busy_time += sim_.now() - rep.start;
        settle(m, rep.work, rep.start);
        rep.work.clear();
    }
    // A decode rank's finished requests freed blocks that caches waiting
    // to move here may take.
    for (std::size_t m = first; m < end && reps_[first].role == Role::decode; ++m) accept_transfers(m);
    start_engine(first);
}

// Swapping blocks the iteration: the caches swapped out and in while it was
// scheduled cross each GPU's own PCIe link (every GPU its shard, in
// parallel), one direction after the other, at the link's bandwidth.
Time Loop::swap_time(Replica& rep) {
    EngineState& st = rep.st;
    Time t{};
    for (std::int64_t* tokens : {&st.swapped_out, &st.swapped_in}) {
        if (*tokens == 0) continue;
        const Bytes bytes = Bytes::ceil(static_cast<double>(*tokens) * rep.pool->bytes_per_token);
        t += setup_.pcie->latency + transfer_time(bytes, setup_.pcie->bandwidth);
        (tokens == &st.swapped_out ? res_.swap_out_bytes : res_.swap_in_bytes) += bytes.as_double();
        *tokens = 0;
    }
    res_.swap_time_s += t.seconds();
    return t;
}

// The engine returns the blocks now; the client has its last token at
// `client` (now, or later through the front end) and, closed loop, sends its
// next request then.
void Loop::complete(Replica& rep, std::uint32_t id, Time client) {
    Sequence& s = seqs_[id];
    RequestRecord& rec = res_.records[id];
    rec.finish_s = client.seconds();
    rec.preemptions = s.preemptions;
    rep.st.kv.give_back(s.blocks - s.shared_blocks);
    s.blocks = 0;
    ++done_;
    if (closed_ && released_ < requests_.size()) {  // the client sends its next request
        const auto next = static_cast<std::uint32_t>(released_++);
        arrival_[next] = client;
        res_.records[next].request.arrival_s = client.seconds();
        if (client == sim_.now()) front_.intake(next);
        else sim_.schedule_at(client, [this, next] { front_.intake(next); });
    }
}

void Loop::finish(std::size_t r) {
    Replica& rep = reps_[r];
    rep.busy_time += sim_.now() - rep.start;
    settle(r, rep.work, rep.start);
    rep.busy = false;
    if (rep.role == Role::decode) accept_transfers(r);
    start(r);
}

// The end of an iteration that started at `started`: every fed request
// advances, sampled tokens go to their clients, finished requests end.
void Loop::settle(std::size_t r, const std::vector<Work>& work, Time started) {
    Replica& rep = reps_[r];
    const Time t = sim_.now();
    std::int64_t fed = 0, to_clients = 0;
    handoffs_.clear();
    if (front_.streams() && rep.role != Role::prefill)
        for (const auto& w : work)
            if (seqs_[w.seq].computed + w.tokens == seqs_[w.seq].prompt + seqs_[w.seq].generated) ++to_clients;
    const Time client = front_.deliver(to_clients);
    for (const auto& w : work) {
        Sequence& s = seqs_[w.seq];
        RequestRecord& rec = res_.records[w.seq];
        if (rec.first_scheduled_s < 0) rec.first_scheduled_s = started.seconds();
        fed += w.tokens;
        s.computed += w.tokens;
        rep.st.outstanding -= w.tokens;
        if (prefix_blocks_ > 0 && !rep.prefix_cached && s.computed >= prefix_blocks_ * res_.pool.block_size)
            cache_prefix(rep, w.seq);
        if (s.computed != s.prompt + s.generated) continue;
        ++s.generated;
        if (rep.role == Role::prefill) {
            rec.prefill_done_s = t.seconds();
        } else {
            if (rec.first_token_s < 0) rec.first_token_s = client.seconds();
            else rec.max_gap_s = std::max(rec.max_gap_s, (client - last_token_[w.seq]).seconds());
            last_token_[w.seq] = client;
        }
        if (s.generated != s.output) continue;
        --rep.st.outstanding;  // the last sampled token is never fed
        if (rep.role == Role::prefill && requests_[w.seq].output > 1) {
            handoffs_.push_back(w.seq);
            continue;
        }
        if (rep.role == Role::prefill) {  // a one-token request ends at its prefill
            rec.first_token_s = t.seconds();
            last_token_[w.seq] = t;
        }
        complete(rep, w.seq, rep.role == Role::prefill ? t : client);
    }
    rep.st.running.erase(std::remove_if(rep.st.running.begin(), rep.st.running.end(),
                                        [&](std::uint32_t id) { return seqs_[id].generated == seqs_[id].output; }),
                         rep.st.running.end());
    batch_sum_ += static_cast<double>(work.size());
    res_.tokens_fed += static_cast<std::uint64_t>(fed);
    const TimelinePoint point{t.seconds(), static_cast<std::int64_t>(work.size()), fed, rep.st.kv.used(),
                              static_cast<std::int64_t>(rep.st.waiting.size())};
    res_.peak_kv_blocks = std::max(res_.peak_kv_blocks, point.kv_blocks);
    rep.stats.peak_kv_blocks = std::max(rep.stats.peak_kv_blocks, point.kv_blocks);
    if (r == 0) keep_point(r, point);
    for (const std::uint32_t id : handoffs_) hand_off(id);
}

// A request that has not started yet skips the whole blocks of the cached
// prefix that its prompt covers, less its last token (which is always fed,
// to sample from): they count as computed and as blocks it holds, owned by
// the cache. Returns the tokens it skips.
std::int64_t Loop::apply_prefix(std::uint32_t id) {
    Sequence& s = seqs_[id];
    if (s.computed != 0 || s.generated != 0 || s.swapped) return 0;
    const std::int64_t shared = std::min(prefix_blocks_, (s.prompt - 1) / res_.pool.block_size);
    if (shared <= 0) return 0;
    s.shared_blocks = s.blocks = shared;
    s.computed = shared * res_.pool.block_size;
    res_.records[id].prefix_hit_tokens = s.computed;
    return s.computed;
}

// The first prefill on a replica to compute the whole prefix leaves its
// first blocks to the cache (the pool count does not change: the blocks
// change owner), and every request queued there that has not started skips
// the prefix from now on.
void Loop::cache_prefix(Replica& rep, std::uint32_t id) {
    rep.prefix_cached = true;
    seqs_[id].shared_blocks = prefix_blocks_;
    for (const std::uint32_t q : rep.st.waiting) rep.st.outstanding -= apply_prefix(q);
}

// Every stride-th iteration is kept; when 2 x max_timeline are kept, every
// other one is dropped and the stride doubles, so memory stays bounded
// however long the run (the mean batch still counts all).
void Loop::keep_point(std::size_t r, const TimelinePoint& point) {
    last_point_ = point;
    if ((reps_[r].stats.iterations - 1) % stride_ != 0) return;
    timeline_.push_back(point);
    if (timeline_.size() >= 2 * setup_.max_timeline) {
        for (std::size_t i = 0; 2 * i < timeline_.size(); ++i) timeline_[i] = timeline_[2 * i];
        timeline_.resize((timeline_.size() + 1) / 2);
        stride_ *= 2;
    }
}

void Loop::run() {
    const std::size_t n = requests_.size();
    if (closed_) {
        for (std::size_t i = 0; i < released_; ++i) front_.intake(static_cast<std::uint32_t>(i));
    } else {
        // Every arrival is queued before anything else, so at equal times
        // arrivals run first and join the iteration that starts then.
        sim_.reserve(n + 2 * reps_.size());
        for (std::size_t i = 0; i < n; ++i)
            sim_.schedule_at(arrival_[i], [this, i] { front_.intake(static_cast<std::uint32_t>(i)); });
    }
    sim_.run();
    if (done_ < n)
        throw InternalError(fmt::format("serving: scheduler {} made no progress at {} s ({} of {} requests done)",
                                        sv_.scheduler->name(), sim_.now().seconds(), done_, n));
    res_.end_s = std::max(sim_.now(), front_.stream_end()).seconds();  // the front end may stream after the last event
    res_.timeline = std::move(timeline_);
    const std::uint64_t first_iterations = reps_.front().stats.iterations;
    if (first_iterations > 0 && (first_iterations - 1) % stride_ != 0) res_.timeline.push_back(last_point_);
    res_.mean_batch = res_.iterations > 0 ? batch_sum_ / static_cast<double>(res_.iterations) : 0;
    for (auto& rep : reps_) {
        rep.stats.busy_s = rep.busy_time.seconds();
        rep.stats.preemptions = rep.st.preemptions;
        res_.preemptions += rep.st.preemptions;
        res_.replica_stats.push_back(rep.stats);
    }
}

}  // namespace loop_detail

void run_serving_loop(const LoopSetup& setup, const std::vector<Request>& requests, ServeResult& res) {
    loop_detail::Loop loop(setup, requests, res);
    loop.run();
}

}  // namespace sim::serve
