// build_iteration_plan: one serving iteration of a mixed batch (prefill
// chunks and decodes) as a task DAG, with the same operators, kernels and TP
// collectives as `run`'s inference (docs/serving.md, "One iteration").
#include "sim/parallel/builder.h"

#include "sim/core/error.h"
#include "sim/parallel/emit_two_batch.h"
#include "sim/parallel/emitter.h"

#include <algorithm>
#include <numeric>

namespace sim::parallel {

namespace {

// The attention kernels of `shape` in layer `layer` of micro-batch `mb` (the
// fused attention kernel: serving requires flash attention, checked by the
// caller).
void append_attention(const config::ScenarioSpec& sc, std::int64_t layer, int mb, const workload::PassShape& shape,
                      const workload::OperatorOptions& opt, std::vector<Operator>& ops) {
    for (auto& op : workload::layer_forward(sc.model, layer, mb, shape, opt))
        if (op.kernel.kind == hw::KernelKind::attention) ops.push_back(std::move(op));
}

std::int64_t tokens_of(const std::vector<IterationGroup>& groups) {
    std::int64_t tokens = 0;
    for (const auto& g : groups) tokens += g.sequences * g.new_tokens;
    return tokens;
}

// Layers [first, stop) of `groups` as micro-batch `mb`, appended to `ops`.
// The flattened batch: one sequence of all the groups' tokens whose K/V go
// to the cache (context > new_tokens); only its attention is replaced, by
// the groups' own kernels.
void append_layers(const Emitter& em, int first, int stop, int mb, const std::vector<IterationGroup>& groups,
                   std::vector<Operator>& ops) {
    const std::int64_t tokens = tokens_of(groups);
    const workload::PassShape flat{1, tokens, tokens + 1};
    for (int l = first; l < stop; ++l) {
        for (auto& op : workload::layer_forward(em.sc.model, l, mb, flat, em.opt)) {
            if (op.kernel.kind != hw::KernelKind::attention) {
                ops.push_back(std::move(op));
                continue;
            }
            for (const auto& g : groups)
                append_attention(em.sc, l, mb, workload::PassShape{g.sequences, g.new_tokens, g.context}, em.opt, ops);
        }
    }
}

std::vector<Operator> head_ops(const Emitter& em, const IterationBatch& batch) {
    if (batch.sampled == 0) return {};
    return workload::head_forward(em.sc.model, 0, workload::PassShape{batch.sampled, 1, 2}, em.opt, false);
}

std::vector<Operator> iteration_ops(const Emitter& em, int vs, const IterationBatch& batch) {
    std::vector<Operator> ops;
    if (vs == 0) {
        const std::int64_t tokens = tokens_of(batch.groups);
        ops = workload::embedding_forward(em.sc.model, 0, workload::PassShape{1, tokens, tokens + 1}, em.opt);
    }
    const auto range = em.vstages[vs];
    append_layers(em, range.first, range.second, 0, batch.groups, ops);
    if (vs + 1 == static_cast<int>(em.vstages.size())) {
        auto h = head_ops(em, batch);
        ops.insert(ops.end(), h.begin(), h.end());
    }
    return ops;
}

// The groups' first `k` sequences (in their canonical order) and the rest.
void split_groups(const std::vector<IterationGroup>& groups, std::int64_t k, std::vector<IterationGroup>& a,
                  std::vector<IterationGroup>& b) {
    for (const auto& g : groups) {
        const std::int64_t take = std::min(k, g.sequences);
        if (take > 0) a.push_back(IterationGroup{take, g.new_tokens, g.context});
        if (g.sequences > take) b.push_back(IterationGroup{g.sequences - take, g.new_tokens, g.context});
        k -= take;
    }
}

// overlap.two_batch (pp 1, docs/serving.md "Two-batch overlap"): the
// embedding and the dense layers on the whole iteration, the MoE layers as
// two halves split by SGLang's rule (serving_two_batch_first_half), the
// head on the merged batch, as `run`'s inference pass (emit_two_batch.cpp).
void emit_two_batch_iteration(Emitter& em, Phase ph, const IterationBatch& batch,
                              std::vector<std::vector<std::uint32_t>>& entry, std::vector<std::uint32_t>& last) {
    const std::int64_t k = serving_two_batch_first_half(batch, ph == Phase::decode);
    const int first = em.vstages.front().first, stop = em.vstages.front().second;
    const int first_moe = two_batch_first_moe(em, k > 0);
    const std::int64_t tokens = tokens_of(batch.groups);
    std::vector<Operator> whole =
        workload::embedding_forward(em.sc.model, 0, workload::PassShape{1, tokens, tokens + 1}, em.opt);
    append_layers(em, first, first_moe, 0, batch.groups, whole);
    em.emit_ops(0, whole, ph, 0, -1, entry, last);
    if (first_moe < stop) {
        std::vector<IterationGroup> ga, gb;
        split_groups(batch.groups, k, ga, gb);
        // Half B's tensors are other sequences: micro-batch index
        // `microbatches`, which no whole pass uses (as in `run`).
        std::vector<std::vector<Operator>> oa(static_cast<std::size_t>(stop - first_moe)), ob(oa.size());
        for (int l = first_moe; l < stop; ++l) {
            append_layers(em, l, l + 1, 0, ga, oa[static_cast<std::size_t>(l - first_moe)]);
            append_layers(em, l, l + 1, em.rs.microbatches, gb, ob[static_cast<std::size_t>(l - first_moe)]);
        }
        emit_two_halves(em, ph, 0, -1, oa, ob, entry, last);
    }
    em.emit_ops(0, head_ops(em, batch), ph, 0, -1, entry, last);
}

}  // namespace

Plan build_iteration_plan(const config::ScenarioSpec& sc, const PlanBuild& base, const IterationBatch& batch,
                          int stage) {
    if (batch.groups.empty()) throw InternalError("serving: an iteration with no sequences");
    Plan plan;
    const BuildOptions options{base.collapsed};
    auto opt = operator_options(sc, base.strategy);
    opt.inference = true;
    const auto& rs = base.strategy;
    Emitter em{sc,
               rs,
               options,
               opt,
               plan,
               PerIndex<LayerRange>(rs.virtual_stage_layers),
               {},
               {},
               base.spec.collective,
               base.spec.placement,
               {}};
    em.setup();
    const bool decode_only = std::all_of(batch.groups.begin(), batch.groups.end(),
                                         [](const IterationGroup& g) { return g.new_tokens == 1; });
    const Phase ph = decode_only ? Phase::decode : Phase::prefill;
    // A decode iteration's dispatch in FP8 under the profile's decode exchange (docs/moe.md section 3k).
    if (decode_only && em.opt.fp8_dispatch_decode) em.opt.fp8_dispatch = true;
    const std::size_t width = em.members.front().size();
    std::vector<std::vector<std::uint32_t>> entry(width);
    std::vector<std::uint32_t> last(width, kNone);
    const int nv = static_cast<int>(em.vstages.size());
    const std::int64_t tokens = tokens_of(batch.groups);
    for (int vs = 0; vs < nv; ++vs) {
        const int s = vs % rs.pp;
        // One stage alone: its own operators, no sends (the serving loop
        // moves the activations between stages as flows).
        if (stage >= 0 && vs != stage) continue;
        if (rs.overlap.two_batch) emit_two_batch_iteration(em, ph, batch, entry, last);
        else em.emit_ops(s, iteration_ops(em, vs, batch), ph, 0, -1, entry, last);
        if (stage < 0 && vs + 1 < nv)
            entry =
                em.send(s, (vs + 1) % rs.pp,
                        Bytes::ceil(em.boundary_per_rank(workload::PassShape{1, tokens, tokens + 1})), ph, 0, -1, last);
    }
    plan.markers.push_back(last.front());
    return plan;
}

}  // namespace sim::parallel
