// build_iteration_plan: one serving iteration of a mixed batch (prefill
// chunks and decodes) as a task DAG, with the same operators, kernels and TP
// collectives as `run`'s inference (docs/serving.md, "One iteration").
#include "sim/parallel/builder.h"

#include "sim/core/error.h"
#include "sim/parallel/emitter.h"

#include <numeric>

namespace sim::parallel {

namespace {

// The attention kernels of `shape` in layer `layer` (the fused attention
// kernel: serving requires flash attention, checked by the caller).
void append_attention(const config::ScenarioSpec& sc, std::int64_t layer, const workload::PassShape& shape,
                      const workload::OperatorOptions& opt, std::vector<Operator>& ops) {
    for (auto& op : workload::layer_forward(sc.model, layer, 0, shape, opt))
        if (op.kernel.kind == hw::KernelKind::attention) ops.push_back(std::move(op));
}

std::vector<Operator> iteration_ops(const Emitter& em, int vs, const IterationBatch& batch) {
    const auto& sc = em.sc;
    const auto& opt = em.opt;
    std::int64_t tokens = 0;
    for (const auto& g : batch.groups) tokens += g.sequences * g.new_tokens;
    // The flattened batch: one sequence of all the iteration's tokens whose
    // K/V go to the cache (context > new_tokens); only its attention is
    // replaced, by the groups' own kernels.
    const workload::PassShape flat{1, tokens, tokens + 1};
    std::vector<Operator> ops;
    if (vs == 0) ops = workload::embedding_forward(sc.model, 0, flat, opt);
    const auto range = em.vstages[vs];
    for (int l = range.first; l < range.second; ++l) {
        for (auto& op : workload::layer_forward(sc.model, l, 0, flat, opt)) {
            if (op.kernel.kind != hw::KernelKind::attention) {
                ops.push_back(std::move(op));
                continue;
            }
            for (const auto& g : batch.groups)
                append_attention(sc, l, workload::PassShape{g.sequences, g.new_tokens, g.context}, opt, ops);
        }
    }
    if (vs + 1 == static_cast<int>(em.vstages.size()) && batch.sampled > 0) {
        auto h = workload::head_forward(sc.model, 0, workload::PassShape{batch.sampled, 1, 2}, opt, false);
        ops.insert(ops.end(), h.begin(), h.end());
    }
    return ops;
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
    const std::size_t width = em.members.front().size();
    std::vector<std::vector<std::uint32_t>> entry(width);
    std::vector<std::uint32_t> last(width, kNone);
    const int nv = static_cast<int>(em.vstages.size());
    std::int64_t tokens = 0;
    for (const auto& g : batch.groups) tokens += g.sequences * g.new_tokens;
    for (int vs = 0; vs < nv; ++vs) {
        const int s = vs % rs.pp;
        // One stage alone: its own operators, no sends (the serving loop
        // moves the activations between stages as flows).
        if (stage >= 0 && vs != stage) continue;
        em.emit_ops(s, iteration_ops(em, vs, batch), ph, 0, -1, entry, last);
        if (stage < 0 && vs + 1 < nv)
            entry =
                em.send(s, (vs + 1) % rs.pp,
                        Bytes::ceil(em.boundary_per_rank(workload::PassShape{1, tokens, tokens + 1})), ph, 0, -1, last);
    }
    plan.markers.push_back(last.front());
    return plan;
}

}  // namespace sim::parallel
