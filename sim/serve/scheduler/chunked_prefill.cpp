// Chunked prefill (Sarathi-Serve, OSDI 2024; vLLM with
// enable_chunked_prefill): every iteration has a budget of
// max_tokens_per_iteration tokens. Running decodes go first (one token each,
// preempting the latest admitted when blocks run out); the budget left is
// filled with prefill chunks, first of sequences already part-way through
// their prefill, then of waiting requests (admitted while the batch has room
// and the pool has blocks for the chunk). Decodes therefore never wait for a
// whole prompt: a long prefill is spread over several iterations.
#include "sim/serve/scheduler/i_scheduler.h"

#include <algorithm>

namespace sim::serve::schedulers {

namespace {

class ChunkedPrefill final : public IServingScheduler {
public:
    std::string_view name() const override { return "chunked-prefill"; }
    std::string_view description() const override {
        return "Sarathi-style: decodes first, then prefill chunks up to the token budget per iteration";
    }
    bool chunks_prefill() const override { return true; }
    std::int64_t default_max_tokens() const override { return 512; }

    void schedule(EngineState& st, std::vector<Work>& out) const override {
        st.schedule_decodes(out);
        std::int64_t budget = st.max_tokens - static_cast<std::int64_t>(out.size());
        for (const std::uint32_t id : st.running) {
            if (budget <= 0) break;
            if (!st.seqs[id].prefilling() || st.seqs[id].computed == 0) continue;
            const std::int64_t n = std::min(budget, st.seqs[id].unfed());
            if (!st.grow(id, n)) continue;
            budget -= n;
            out.push_back(Work{id, n});
        }
        while (budget > 0 && !st.waiting.empty() && static_cast<std::int64_t>(st.running.size()) < st.max_batch) {
            const std::uint32_t id = st.waiting.front();
            const std::int64_t n = std::min(budget, st.seqs[id].unfed());
            if (!st.grow(id, n)) break;
            budget -= n;
            st.admit_front();
            out.push_back(Work{id, n});
        }
    }
};

}  // namespace

const IServingScheduler& chunked_prefill() {
    static const ChunkedPrefill s;
    return s;
}

}  // namespace sim::serve::schedulers
