// Block allocation, preemption by recompute and admission shared by the
// serving schedulers.
#include "sim/serve/engine_state.h"

#include "sim/core/error.h"

#include <algorithm>

namespace sim::serve {

bool EngineState::grow(std::uint32_t seq, std::int64_t tokens) {
    Sequence& s = seqs[seq];
    const std::int64_t need = kv.blocks_for(s.computed + tokens) - s.blocks;
    if (need <= 0) return true;
    if (!kv.take(need)) return false;
    s.blocks += need;
    if (s.swapped) {
        swapped_in += s.computed - s.shared_blocks * kv.block_size();
        s.swapped = false;
    }
    return true;
}

std::uint32_t EngineState::preempt_latest() {
    if (running.empty()) throw InternalError("serving: preemption with nothing running");
    const std::uint32_t victim = running.back();
    running.pop_back();
    Sequence& s = seqs[victim];
    kv.give_back(s.blocks - s.shared_blocks);
    s.blocks = s.shared_blocks;
    // A cached shared prefix stays: only the sequence's own tokens go.
    const std::int64_t keep = s.shared_blocks * kv.block_size();
    if (swap && s.computed > keep) {
        swapped_out += s.computed - keep;
        s.swapped = true;
    } else {
        // A received cache stays in the connector's buffer and is loaded
        // again when the sequence is readmitted (vLLM's P2pNcclConnector:
        // get_num_new_matched_tokens offers prompt - 1 tokens to a preempted
        // request too, and the buffer is freed only when the request ends).
        const std::int64_t reload = std::max(keep, std::min(s.received, s.computed));
        outstanding += s.computed - reload;
        s.computed = reload;
        s.load = reload > keep;
    }
    ++s.preemptions;
    ++preemptions;
    waiting.push_front(victim);
    return victim;
}

bool EngineState::drop_latest_queued_cache() {
    for (auto it = waiting.rbegin(); it != waiting.rend(); ++it) {
        Sequence& s = seqs[*it];
        if (s.blocks <= s.shared_blocks) continue;
        kv.give_back(s.blocks - s.shared_blocks);
        s.blocks = s.shared_blocks;
        const std::int64_t keep = s.shared_blocks * kv.block_size();
        outstanding += s.computed - keep;
        s.computed = keep;
        ++s.preemptions;
        ++preemptions;
        return true;
    }
    return false;
}

void EngineState::schedule_decodes(std::vector<Work>& out) {
    // Oldest first: a sequence admitted earlier keeps its blocks, and the
    // latest admitted gives them up (vLLM's recompute policy).
    for (std::size_t i = 0; i < running.size(); ++i) {
        const std::uint32_t id = running[i];
        if (seqs[id].prefilling()) continue;
        while (!grow(id, 1)) {
            const std::uint32_t victim = preempt_latest();
            if (victim == id) break;  // it was the latest itself
        }
        if (i < running.size() && running[i] == id) out.push_back(Work{id, 1});
    }
    // Items of sequences preempted after they were listed are dropped.
    out.erase(std::remove_if(out.begin(), out.end(), [&](const Work& w) { return seqs[w.seq].blocks == 0; }),
              out.end());
}

void EngineState::admit_front() {
    running.push_back(waiting.front());
    seqs[waiting.front()].admitted = ++admissions;
    waiting.pop_front();
}

}  // namespace sim::serve
