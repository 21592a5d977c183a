// Continuous batching (iteration-level scheduling: Orca, OSDI 2022; vLLM's
// default scheduler before chunked prefill): at every iteration, waiting
// requests are admitted first-come first-served while the batch has room
// (max_batch sequences, max_tokens_per_iteration prompt tokens) and the KV
// pool has blocks for their prompts; an iteration that admits anybody runs
// only those prefills. Otherwise every running sequence decodes one token,
// and when the pool cannot hold the new tokens the latest admitted sequences
// are preempted (recompute).
#include "sim/serve/scheduler/i_scheduler.h"

namespace sim::serve::schedulers {

namespace {

class ContinuousBatching final : public IServingScheduler {
public:
    std::string_view name() const override { return "continuous"; }
    std::string_view description() const override {
        return "iteration-level batching (Orca/vLLM): prefill-first admission, decodes of all running, "
               "preemption by recompute";
    }
    bool chunks_prefill() const override { return false; }
    std::int64_t default_max_tokens() const override { return 8192; }

    void schedule(EngineState& st, std::vector<Work>& out) const override {
        std::int64_t tokens = 0;
        while (!st.waiting.empty() && static_cast<std::int64_t>(st.running.size()) < st.max_batch) {
            const std::uint32_t id = st.waiting.front();
            const std::int64_t n = st.seqs[id].unfed();
            // A preempted sequence's recompute (prompt + generated) may exceed
            // the budget that its prompt fitted; it then runs alone.
            const bool lone_recompute = out.empty() && st.seqs[id].generated > 0;
            if (tokens + n > st.max_tokens && !lone_recompute) break;
            if (!st.grow(id, n)) break;
            tokens += n;
            st.admit_front();
            out.push_back(Work{id, n});
        }
        if (!out.empty()) return;
        st.schedule_decodes(out);
    }
};

}  // namespace

const IServingScheduler& continuous_batching() {
    static const ContinuousBatching s;
    return s;
}

}  // namespace sim::serve::schedulers
