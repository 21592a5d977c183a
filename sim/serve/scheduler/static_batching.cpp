// Static batching (request-level, as FasterTransformer-era servers): when the
// engine is idle it takes up to max_batch waiting requests whose prompts fit
// max_tokens_per_iteration and whose whole sequences (prompt + output) fit
// the KV pool, prefills them in one iteration, then decodes them together
// until the last one finishes; nobody joins a batch in flight. A finished
// sequence stops computing (no padding).
#include "sim/serve/scheduler/i_scheduler.h"

namespace sim::serve::schedulers {

namespace {

class StaticBatching final : public IServingScheduler {
public:
    std::string_view name() const override { return "static"; }
    std::string_view description() const override {
        return "request-level batches: admit up to max_batch when idle, run them to the last token";
    }
    bool chunks_prefill() const override { return false; }
    bool iteration_level() const override { return false; }
    std::int64_t default_max_tokens() const override { return 8192; }

    void schedule(EngineState& st, std::vector<Work>& out) const override {
        if (!st.running.empty()) {
            // Blocks for the whole sequence were reserved at admission, so a
            // decode never runs out of them.
            for (const std::uint32_t id : st.running) out.push_back(Work{id, st.seqs[id].unfed()});
            return;
        }
        std::int64_t tokens = 0;
        while (!st.waiting.empty() && static_cast<std::int64_t>(st.running.size()) < st.max_batch) {
            const std::uint32_t id = st.waiting.front();
            Sequence& s = st.seqs[id];
            if (tokens + s.unfed() > st.max_tokens) break;
            const std::int64_t need = st.kv.blocks_for(s.prompt + s.output) - s.blocks;
            if (!st.kv.take(need)) break;
            s.blocks += need;
            tokens += s.unfed();
            st.admit_front();
            out.push_back(Work{id, s.unfed()});
        }
    }
};

}  // namespace

const IServingScheduler& static_batching() {
    static const StaticBatching s;
    return s;
}

}  // namespace sim::serve::schedulers
