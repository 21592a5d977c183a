// The serving event loop: arrivals, iterations and KV transfers on one
// Simulation (docs/serving.md, "The loop"); the host work around the steps
// (request intake, token streaming) is the front end's (front_end.h).
#include "sim/serve/serving_loop.h"

#include "sim/core/error.h"
#include "sim/core/simulation.h"
#include "sim/net/flow_network.h"
#include "sim/net/topology.h"
#include "sim/serve/engine_state.h"
#include "sim/serve/front_end.h"
#include "sim/serve/router/i_router.h"
#include "sim/serve/scheduler/i_scheduler.h"

#include <algorithm>
#include <deque>
#include <memory>

namespace sim::serve {

namespace {

enum class Role { both, prefill, decode };

struct Replica {
    EngineState st;
    Role role = Role::both;
    int first_gpu = 0, tp = 1;
    // Data-parallel attention: the engine's first replica and its ranks
    // (a replica on its own: itself and 1).
    std::size_t engine = 0;
    int ranks = 1;
    IterationCost* cost = nullptr;
    const KvPool* pool = nullptr;
    bool busy = false, kick_pending = false;
    bool prefix_cached = false;  // the shared prefix's blocks are held by this replica
    Time start{}, busy_time{};
    std::vector<Work> work;              // the iteration in flight
    std::deque<std::uint32_t> incoming;  // decode: handed-off requests waiting for KV blocks here
    std::deque<std::uint32_t> landed;    // decode: caches here, waiting for a place in the batch (max_batch)
    ReplicaStats stats;
    // Pipeline parallelism (pp > 1): up to pp batches in flight, each in a
    // slot; each stage runs one batch at a time, in the order they reach it.
    struct Slot {
        std::vector<Work> work;
        Time start{};
        bool busy = false;
        std::vector<Time> stage_time;  // its part on each stage
        Bytes send{};                  // activations each TP rank sends across a boundary
        int flows_left = 0;
    };
    std::vector<Slot> slots;
    std::vector<char> stage_busy;
    std::vector<std::vector<std::size_t>> stage_queue;  // slots waiting for the stage, in arrival order
    std::vector<std::uint32_t> held;                    // scratch: running sequences in flight
    int in_flight = 0;
    Time busy_since{};
};

// A disaggregated request's KV cache between its prefill and decode replicas.
struct Transfer {
    Time prefill_done{}, start{};
    std::int64_t src_blocks = 0;  // held on the prefill replica until the last byte arrives
    int flows_left = 0;
};

class Loop {
public:
    Loop(const LoopSetup& setup, const std::vector<Request>& requests, ServeResult& res);
    void run();

private:
    bool disaggregated() const { return setup_.prefill_replicas > 0; }
    // Open-loop arrivals not yet delivered (each kicks its replica).
    bool arrivals_pending() const { return !closed_ && arrived_ < requests_.size(); }
    std::size_t route(std::size_t first, std::size_t count, std::uint64_t& routed);
    void arrive(std::uint32_t id);
    void kick(std::size_t r);
    void start(std::size_t r);
    void finish(std::size_t r);
    bool schedule_work(Replica& rep);
    void start_engine(std::size_t first);
    void finish_engine(std::size_t first);
    void settle(std::size_t r, const std::vector<Work>& work, Time started);
    void start_pp(std::size_t r);
    void enter_stage(std::size_t r, std::size_t k, int s);
    void stage_done(std::size_t r, std::size_t k, int s);
    void finish_pp(std::size_t r, std::size_t k);
    int stage_gpu(const Replica& rep, int s, int i) const;
    void complete(Replica& rep, std::uint32_t id, Time client);
    void hand_off(std::uint32_t id);
    void accept_transfers(std::size_t d);
    void flow_done(std::uint32_t id);
    void land(std::uint32_t id, std::size_t d);
    void admit_landed(std::size_t d);
    void keep_point(std::size_t r, const TimelinePoint& point);
    Time swap_time(Replica& rep);
    std::int64_t apply_prefix(std::uint32_t id);
    void cache_prefix(Replica& rep, std::uint32_t id);

    const LoopSetup& setup_;
    const config::ServingSpec& sv_;
    const std::vector<Request>& requests_;
    ServeResult& res_;
    Simulation sim_;
    std::unique_ptr<net::Topology> topo_;  // disaggregated only
    std::unique_ptr<net::FlowNetwork> net_;
    std::vector<Sequence> seqs_;
    std::vector<Replica> reps_;
    std::vector<Time> arrival_, last_token_;
    std::vector<char> in_flight_;  // pp > 1: the sequence is in a batch in flight
    std::vector<Transfer> transfers_;
    std::vector<std::int64_t> load_;  // route()'s scratch
    std::vector<std::uint32_t> handoffs_;
    parallel::IterationBatch batch_;
    std::vector<parallel::IterationGroup> prefills_;
    const bool closed_;
    std::int64_t prefix_blocks_ = 0;  // whole blocks of the shared prefix (0: no prefix caching)
    std::size_t released_ = 0, arrived_ = 0, done_ = 0;
    std::uint64_t routed_front_ = 0, routed_decode_ = 0;
    // The host work around the engine's steps: request intake, token
    // streaming and the host time per step (front_end.h).
    FrontEnd front_;
    // Replica 0's timeline (simulator.h says how it thins).
    std::vector<TimelinePoint> timeline_;
    std::uint64_t stride_ = 1;
    TimelinePoint last_point_;
    double batch_sum_ = 0;
};

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
        if (disaggregated()) transfers_.resize(n);
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
    rep.st.waiting.push_back(id);
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
    if (!schedule_work(rep)) return;
    batch_shape(rep.st, rep.work, sv_.decode_context_bucket, batch_, prefills_);
    rep.start = sim_.now();
    rep.busy = true;
    ++res_.iterations;
    ++rep.stats.iterations;
    // The engine's host time per step is serial with the GPU's work, or,
    // with async scheduling, done for the next step while the GPU runs this
    // one, so a step takes the longer of the two (docs/serving.md).
    const Time gpu = rep.cost->time(batch_) + swap_time(rep);
    const Time host = front_.step_host_time(rep.work.size());
    sim_.schedule_at(rep.start + (sv_.async_scheduling ? std::max(gpu, host) : gpu + host), [this, r] { finish(r); });
}

// The replica's scheduler pass; false when nothing can run. Then the next
// arrival (or a transfer's end) kicks the replica again. A schedule that
// preempted everything is retried at once; a replica still stuck when the
// run ends is an InternalError.
bool Loop::schedule_work(Replica& rep) {
    for (int attempt = 0;; ++attempt) {
        rep.work.clear();
        sv_.scheduler->schedule(rep.st, rep.work);
        if (!rep.work.empty()) return true;
        if (arrivals_pending() || attempt >= 2) return false;
    }
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
        if (!schedule_work(rep)) continue;
        any = true;
        batch_shape(rep.st, rep.work, sv_.decode_context_bucket, batch_, prefills_);
        ++rep.stats.iterations;
        gpu = std::max(gpu, rep.cost->time(batch_) + swap_time(rep));
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

// Pipeline parallelism (docs/serving.md, "Pipeline parallelism"; vLLM's
// batch queue of pp batches): while a slot is free, the scheduler forms a
// batch from the requests not in flight, which enters stage 0.
void Loop::start_pp(std::size_t r) {
    Replica& rep = reps_[r];
    for (;;) {
        std::size_t k = 0;
        while (k < rep.slots.size() && rep.slots[k].busy) ++k;
        if (k == rep.slots.size()) return;
        Replica::Slot& b = rep.slots[k];
        // A request in a batch in flight is not scheduled again until that
        // batch ends: the scheduler sees the others only.
        auto& running = rep.st.running;
        rep.held.clear();
        std::size_t kept = 0;
        for (const std::uint32_t id : running) {
            if (in_flight_[id]) rep.held.push_back(id);
            else running[kept++] = id;
        }
        running.resize(kept);
        for (int attempt = 0;; ++attempt) {
            b.work.clear();
            sv_.scheduler->schedule(rep.st, b.work);
            if (!b.work.empty() || arrivals_pending() || attempt >= 2) break;
        }
        // Back in admission order.
        const std::size_t mid = running.size();
        running.insert(running.end(), rep.held.begin(), rep.held.end());
        std::inplace_merge(running.begin(), running.begin() + static_cast<std::ptrdiff_t>(mid), running.end(),
                           [&](std::uint32_t a, std::uint32_t c) { return seqs_[a].admitted < seqs_[c].admitted; });
        if (b.work.empty()) return;
        batch_shape(rep.st, b.work, sv_.decode_context_bucket, batch_, prefills_);
        std::int64_t tokens = 0;
        for (const auto& w : b.work) {
            in_flight_[w.seq] = 1;
            tokens += w.tokens;
        }
        for (std::size_t s = 0; s < b.stage_time.size(); ++s) b.stage_time[s] = setup_.stage_costs[s]->time(batch_);
        // The engine's host time precedes the step (the first stage waits for it).
        b.stage_time[0] += front_.step_host_time(b.work.size());
        b.send = Bytes::ceil(static_cast<double>(tokens) * setup_.boundary_bytes_per_token);
        b.start = sim_.now();
        b.busy = true;
        if (rep.in_flight++ == 0) rep.busy_since = b.start;
        rep.busy = rep.in_flight == setup_.pp;
        ++res_.iterations;
        ++rep.stats.iterations;
        enter_stage(r, k, 0);
    }
}

// GPU of TP rank i of stage s (the strategy's placement, one replica).
int Loop::stage_gpu(const Replica& rep, int s, int i) const {
    return rep.first_gpu + (setup_.placement == parallel::Placement::pp_first ? i * setup_.pp + s : s * rep.tp + i);
}

void Loop::enter_stage(std::size_t r, std::size_t k, int s) {
    Replica& rep = reps_[r];
    const auto si = static_cast<std::size_t>(s);
    if (rep.stage_busy[si]) {
        rep.stage_queue[si].push_back(k);
        return;
    }
    rep.stage_busy[si] = 1;
    sim_.schedule_at(sim_.now() + rep.slots[k].stage_time[si], [this, r, k, s] { stage_done(r, k, s); });
}

// A stage is free for the next batch waiting for it; the batch's
// activations go to the next stage as one flow per TP rank (rank i to rank
// i) on the cluster's flow network, or the batch ends on the last stage.
void Loop::stage_done(std::size_t r, std::size_t k, int s) {
    Replica& rep = reps_[r];
    const auto si = static_cast<std::size_t>(s);
    rep.stage_busy[si] = 0;
    if (!rep.stage_queue[si].empty()) {
        const std::size_t next = rep.stage_queue[si].front();
        rep.stage_queue[si].erase(rep.stage_queue[si].begin());
        enter_stage(r, next, s);
    }
    if (s + 1 == setup_.pp) {
        finish_pp(r, k);
        return;
    }
    Replica::Slot& b = rep.slots[k];
    b.flows_left = rep.tp;
    for (int i = 0; i < rep.tp; ++i)
        net_->start(stage_gpu(rep, s, i), stage_gpu(rep, s + 1, i), b.send, [this, r, k, s] {
            if (--reps_[r].slots[k].flows_left == 0) enter_stage(r, k, s + 1);
        });
}

void Loop::finish_pp(std::size_t r, std::size_t k) {
    Replica& rep = reps_[r];
    Replica::Slot& b = rep.slots[k];
    for (const auto& w : b.work) in_flight_[w.seq] = 0;
    settle(r, b.work, b.start);
    b.busy = false;
    if (--rep.in_flight == 0) rep.busy_time += sim_.now() - rep.busy_since;
    rep.busy = false;
    start(r);
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

// The prefill replica keeps the request's KV blocks until its cache has
// moved; the router picks the decode replica now, which reserves blocks for
// the cache (first come first served) before the transfer starts.
void Loop::hand_off(std::uint32_t id) {
    Sequence& s = seqs_[id];
    if (!setup_.prefilled) transfers_[id] = Transfer{sim_.now(), Time{}, s.blocks, 0};
    s.blocks = 0;
    s.output = requests_[id].output;
    const auto first = static_cast<std::size_t>(setup_.prefill_replicas);
    const std::size_t d = route(first, reps_.size() - first, setup_.prefilled ? routed_front_ : routed_decode_);
    res_.records[id].decode_replica = static_cast<std::int32_t>(d);
    if (setup_.prefilled) res_.records[id].replica = static_cast<std::int32_t>(d);
    Replica& dec = reps_[d];
    dec.st.outstanding += s.unfed() + s.output - s.generated;
    ++dec.stats.requests;
    dec.incoming.push_back(id);
    accept_transfers(d);
}

// One flow per pair of tensor-parallel ranks whose KV heads overlap (rank
// i to rank i when both pools have the same tp), on the cluster's links,
// sharing them max-min fairly with every other transfer in flight.
void Loop::accept_transfers(std::size_t d) {
    Replica& dec = reps_[d];
    admit_landed(d);
    while (!dec.incoming.empty()) {
        const std::uint32_t id = dec.incoming.front();
        Sequence& s = seqs_[id];
        const std::int64_t need = dec.st.kv.blocks_for(s.computed);
        if (!dec.st.kv.take(need)) return;
        dec.incoming.pop_front();
        s.blocks = need;
        if (setup_.prefilled) {  // the cache is already here
            res_.records[id].kv_wait_s = (sim_.now() - arrival_[id]).seconds();
            land(id, d);
            continue;
        }
        Transfer& x = transfers_[id];
        x.start = sim_.now();
        res_.records[id].kv_wait_s = (x.start - x.prefill_done).seconds();
        // Rank i of the prefill replica holds heads [i/tp_p, (i+1)/tp_p) of
        // every layer's K and V, rank j of the decode replica needs
        // [j/tp_d, (j+1)/tp_d): i sends j the overlap, in units of
        // 1/(tp_p tp_d), of j's shard of computed x bytes_per_token.
        const Replica& pre = reps_[static_cast<std::size_t>(res_.records[id].replica)];
        const std::int64_t tp_p = pre.tp, tp_d = dec.tp;
        const double shard = static_cast<double>(s.computed) * dec.pool->bytes_per_token;
        x.flows_left = 0;
        for (std::int64_t i = 0; i < tp_p; ++i)
            for (std::int64_t j = 0; j < tp_d; ++j) {
                const std::int64_t overlap = std::min((i + 1) * tp_d, (j + 1) * tp_p) - std::max(i * tp_d, j * tp_p);
                if (overlap <= 0) continue;
                const Bytes bytes = Bytes::ceil(shard * static_cast<double>(overlap) / static_cast<double>(tp_p));
                ++x.flows_left;
                net_->start(pre.first_gpu + static_cast<int>(i), dec.first_gpu + static_cast<int>(j), bytes,
                            [this, id] { flow_done(id); });
                res_.kv_bytes_moved += bytes.as_double();
            }
    }
}

void Loop::flow_done(std::uint32_t id) {
    Transfer& x = transfers_[id];
    if (--x.flows_left > 0) return;
    const Time t = sim_.now();
    RequestRecord& rec = res_.records[id];
    const auto p = static_cast<std::size_t>(rec.replica);
    const auto d = static_cast<std::size_t>(rec.decode_replica);
    reps_[p].st.kv.give_back(x.src_blocks);
    x.src_blocks = 0;
    kick(p);  // its queue may have waited for these blocks
    rec.kv_transfer_s = (t - x.start).seconds();
    land(id, d);
}

// The cache is on decode replica d: the first token reaches the client, and
// the request runs when the batch has room (max_batch; SGLang's decode queues
// it while --max-running-requests run).
void Loop::land(std::uint32_t id, std::size_t d) {
    const Time t = sim_.now();
    res_.records[id].first_token_s = t.seconds();
    last_token_[id] = t;
    reps_[d].landed.push_back(id);
    admit_landed(d);
    kick(d);
}

void Loop::admit_landed(std::size_t d) {
    EngineState& st = reps_[d].st;
    auto& q = reps_[d].landed;
    while (!q.empty() && static_cast<std::int64_t>(st.running.size()) < st.max_batch) {
        st.running.push_back(q.front());
        q.pop_front();
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

}  // namespace

void run_serving_loop(const LoopSetup& setup, const std::vector<Request>& requests, ServeResult& res) {
    Loop loop(setup, requests, res);
    loop.run();
}

}  // namespace sim::serve
