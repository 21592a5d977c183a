// The serving loop under pipeline parallelism (docs/serving.md, "Pipeline
// parallelism"): up to pp batches in flight per replica, each stage running
// one at a time, activations crossing stage boundaries as flows.
#include "sim/serve/scheduler/i_scheduler.h"
#include "sim/serve/serving_loop_impl.h"

#include <algorithm>

namespace sim::serve::loop_detail {

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

}  // namespace sim::serve::loop_detail
