// overlap.two_batch: SGLang's two-batch overlap in an inference pass
// (docs/moe.md section 8a). The pass's sequences are split in two halves
// (SGLang's split rule); the MoE layers of the halves are cut at their
// expert-parallel all-to-alls into segments that alternate on the compute
// stream, so each half's dispatch and combine (on the ep_comm stream) run
// beside the other half's kernels, which lose the SMs the exchange holds.
#include "sim/parallel/emit_two_batch.h"
#include "sim/parallel/builder.h"
#include "sim/parallel/emitter.h"

#include "sim/core/checked.h"
#include "sim/core/error.h"

#include <algorithm>
#include <limits>

namespace sim::parallel {

std::int64_t serving_two_batch_first_half(const IterationBatch& batch, bool decode_only) {
    std::int64_t n = 0, tokens = 0;
    for (const auto& g : batch.groups) {
        const auto t = checked_mul(g.sequences, g.new_tokens);
        if (!t || *t > std::numeric_limits<std::int64_t>::max() - tokens)
            throw InternalError("two-batch split: the batch's tokens overflow");
        n += g.sequences;
        tokens += *t;
    }
    if (n < 2) return 0;
    if (decode_only) return n / 2;  // compute_split_seq_index: num_tokens // 2
    // _split_array_by_half_sum over the sequences' new tokens: the first k
    // whose running sum reaches floor(total / 2), at least 1, at most n - 1.
    const std::int64_t half = tokens / 2;
    std::int64_t k = 0, sum = 0;
    for (const auto& g : batch.groups) {
        if (sum >= half) break;
        // Sequences of this group still needed: ceil((half - sum) / new_tokens).
        const std::int64_t need = g.new_tokens > 0 ? (half - sum + g.new_tokens - 1) / g.new_tokens : g.sequences;
        const std::int64_t take = std::min(need, g.sequences);
        k += take;
        sum += take * g.new_tokens;
    }
    return std::clamp<std::int64_t>(k, 1, n - 1);
}

// Equal prompts are one group of the ragged rule.
std::int64_t two_batch_first_half(Phase ph, std::int64_t sequences, std::int64_t tokens) {
    IterationBatch one;
    one.groups.push_back(IterationGroup{sequences, tokens, tokens});
    return serving_two_batch_first_half(one, ph == Phase::decode);
}

int two_batch_first_moe(const Emitter& em, bool split) {
    if (em.vstages.size() != 1) throw InternalError("overlap.two_batch: one stage expected (pp 1)");
    const int first = em.vstages.front().first, stop = em.vstages.front().second;
    return split ? std::clamp(static_cast<int>(em.sc.model.first_dense_layers), first, stop) : stop;
}

namespace {

// One half-batch's MoE layers as a cursor over their operators: a segment
// runs from the cursor to the next operator an all-to-all precedes.
struct Half {
    std::vector<Operator> ops;
    std::size_t at = 0;
    std::vector<std::vector<std::uint32_t>> pending;  // per member: what the next kernel waits for
    std::vector<std::uint32_t> last;                  // per member: the half's last task
    bool done() const { return at == ops.size(); }
};

// Emits `h`'s next segment: its operators up to, not including, the next
// one that an all-to-all precedes (the segment's own first one included, so
// its all-to-all is issued here, after the previous segment of this half).
void run_segment(Emitter& em, Half& h, Phase ph, int mb, int step) {
    if (h.done()) return;
    std::size_t end = h.at + 1;
    while (end < h.ops.size() && h.ops[end].ep_a2a_bytes.value == 0) ++end;
    const std::vector<Operator> part(h.ops.begin() + static_cast<std::ptrdiff_t>(h.at),
                                     h.ops.begin() + static_cast<std::ptrdiff_t>(end));
    em.emit_ops(0, part, ph, mb, step, h.pending, h.last);
    h.at = end;
}

}  // namespace

void join_two_halves(const std::vector<std::vector<std::uint32_t>>& a_pending, const std::vector<std::uint32_t>& a_last,
                     const std::vector<std::vector<std::uint32_t>>& b_pending, const std::vector<std::uint32_t>& b_last,
                     std::vector<std::vector<std::uint32_t>>& entry, std::vector<std::uint32_t>& last) {
    for (std::size_t i = 0; i < entry.size(); ++i) {
        entry[i] = a_pending[i];
        entry[i].insert(entry[i].end(), b_pending[i].begin(), b_pending[i].end());
        for (const std::uint32_t t : {a_last[i], b_last[i]})
            if (t != kNone) entry[i].push_back(t);
        // The later of the two on the in-order compute stream (ids grow as
        // tasks are added): the halves' end when nothing follows (a serving
        // iteration that samples no token).
        if (a_last[i] != kNone && b_last[i] != kNone) last[i] = std::max(a_last[i], b_last[i]);
        else if (a_last[i] != kNone || b_last[i] != kNone) last[i] = a_last[i] != kNone ? a_last[i] : b_last[i];
    }
}

void emit_two_halves(Emitter& em, Phase ph, int mb, int step, const std::vector<std::vector<Operator>>& a_layers,
                     const std::vector<std::vector<Operator>>& b_layers, std::vector<std::vector<std::uint32_t>>& entry,
                     std::vector<std::uint32_t>& last) {
    // SGLang picks the stage order by the forward mode (operations_strategy.py):
    // decode runs its own (emit_two_batch_decode.cpp).
    if (ph == Phase::decode) {
        emit_two_halves_decode(em, mb, step, a_layers, b_layers, entry, last);
        return;
    }
    Half ha, hb;
    for (const auto& l : a_layers) ha.ops.insert(ha.ops.end(), l.begin(), l.end());
    for (const auto& l : b_layers) hb.ops.insert(hb.ops.end(), l.begin(), l.end());
    for (Half* h : {&ha, &hb}) {
        h->pending = entry;
        h->last = last;
    }
    // SGLang's prefill strategy (tbo_delta_stages 0): stage k of half A,
    // then stage k of half B (two_batch_overlap.py, _execute_two_batch_raw).
    while (!ha.done() || !hb.done()) {
        run_segment(em, ha, ph, mb, step);
        run_segment(em, hb, ph, mb, step);
    }
    // What follows (the head) runs on the merged batch: after both halves.
    join_two_halves(ha.pending, ha.last, hb.pending, hb.last, entry, last);
}

void emit_two_batch_pass(Emitter& em, Phase ph, int mb, const workload::PassShape& shape, int step,
                         const std::vector<Operator>& tail, std::vector<std::vector<std::uint32_t>>& entry,
                         std::vector<std::uint32_t>& last) {
    const auto& m = em.sc.model;
    const std::int64_t a = two_batch_first_half(ph, shape.batch, shape.new_tokens);
    // Before the MoE layers (SGLang runs the first_k_dense_replace layers
    // on the whole batch, DeepseekV2Model.forward): the embedding and the
    // dense layers; with no split, the whole pass.
    std::vector<Operator> whole = workload::embedding_forward(m, mb, shape, em.opt);
    const int first = em.vstages.front().first, stop = em.vstages.front().second;
    const int first_moe = two_batch_first_moe(em, a > 0);
    for (int l = first; l < first_moe; ++l) {
        auto f = workload::layer_forward(m, l, mb, shape, em.opt);
        whole.insert(whole.end(), f.begin(), f.end());
    }
    em.emit_ops(0, whole, ph, mb, step, entry, last);
    if (first_moe < stop) {
        // The halves' tensors are distinct sequences: half B's ids use the
        // micro-batch index mb + microbatches, which no whole pass uses.
        const int mb_b = em.rs.microbatches + mb;
        const workload::PassShape sa{a, shape.new_tokens, shape.context},
            sb{shape.batch - a, shape.new_tokens, shape.context};
        std::vector<std::vector<Operator>> oa, ob;
        for (int l = first_moe; l < stop; ++l) {
            oa.push_back(workload::layer_forward(m, l, mb, sa, em.opt));
            ob.push_back(workload::layer_forward(m, l, mb_b, sb, em.opt));
        }
        emit_two_halves(em, ph, mb, step, oa, ob, entry, last);
    }
    std::vector<Operator> after = workload::head_forward(m, mb, shape, em.opt, false);
    after.insert(after.end(), tail.begin(), tail.end());
    em.emit_ops(0, after, ph, mb, step, entry, last);
}

}  // namespace sim::parallel
