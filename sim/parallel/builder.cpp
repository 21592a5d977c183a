// build_plan: resolves the strategy and its layer split (strategy.cpp),
// checks every stage's memory, and emits the inference run here or the
// training iteration (emit_training.cpp) through the Emitter (emitter.h).
#include "sim/parallel/builder.h"

#include "sim/core/limits.h"
#include "sim/parallel/emit_two_batch.h"
#include "sim/parallel/emitter.h"

namespace sim::parallel {

using config::Mode;

namespace {

void emit_inference(Emitter& em, PlanBuild& out) {
    const auto& sc = em.sc;
    const auto& rs = em.rs;
    const int pp = rs.pp, m = rs.microbatches;
    const auto& w = sc.workload;
    const int steps = static_cast<int>(std::min<std::int64_t>(w.decode_steps_simulated, w.output_tokens));
    out.decode_steps = steps;
    const std::int64_t mid = std::max<std::int64_t>(1, w.output_tokens / 2);
    out.decode_context_first = w.prompt_tokens + std::max<std::int64_t>(1, mid - steps / 2);
    PerIndex<std::uint32_t> prefill_end(m), step_end(m);  // per micro-batch
    const std::size_t width = em.members.front().size();
    const PerIndex<std::int64_t> sequences(rs.microbatch_sizes);  // per micro-batch

    // A pass walks every virtual stage in order (virtual stage vs runs on
    // stage vs mod pp); inference has no backward to interleave with, so the
    // schedule only decides where the layers live.
    const int nv = static_cast<int>(em.vstages.size());
    // A decode step ends with the profile's decode_step work on the last
    // stage (docs/software-profiles.md §2g): its small kernels, then the
    // host's waits and output copy, on the host stream, which the next
    // step's first kernel waits for (the host launches nothing meanwhile).
    const bool step_host = sc.profile.decode_step_host_syncs > 0 || sc.profile.decode_step_copy_bytes > 0;
    const bool dispatch_fp8 = em.opt.fp8_dispatch;
    auto run_pass = [&](Phase ph, int j, const workload::PassShape& shape, int step,
                        std::vector<std::vector<std::uint32_t>> entry) {
        std::vector<std::uint32_t> last(width, kNone);
        // A decode step's dispatch in FP8 under the profile's decode exchange (docs/moe.md section 3k).
        em.opt.fp8_dispatch = dispatch_fp8 || (ph == Phase::decode && em.opt.fp8_dispatch_decode);
        for (int vs = 0; vs < nv; ++vs) {
            const int s = vs % pp;
            std::vector<Operator> tail;
            if (ph == Phase::decode && vs + 1 == nv) tail = decode_step_kernels(sc, shape.batch);
            if (rs.overlap.two_batch) {
                // SGLang's two-batch overlap (pp 1: the one stage holds every layer).
                emit_two_batch_pass(em, ph, j, shape, step, tail, entry, last);
            } else {
                auto ops = em.forward_ops(vs, j, shape, false);
                ops.insert(ops.end(), tail.begin(), tail.end());
                em.emit_ops(s, ops, ph, j, step, entry, last);
            }
            if (ph == Phase::decode && vs + 1 == nv && step_host) {
                const auto& mem = em.members[s];
                for (std::size_t i = 0; i < mem.size(); ++i) {
                    Task t = em.base(ph, j, -1, step);
                    t.kind = TaskKind::host;
                    t.stream = StreamKind::host;
                    t.gpu = mem[i].local;
                    t.host_time = decode_step_host_time(sc, shape.batch);
                    std::vector<std::uint32_t> deps = entry[i].empty() ? std::vector<std::uint32_t>{last[i]} : entry[i];
                    last[i] = em.plan.add(t, deps);
                    entry[i].clear();
                }
            }
            if (vs + 1 < nv)
                entry = em.send(s, (vs + 1) % pp, Bytes::ceil(em.boundary_per_rank(shape)), ph, j, step, last);
        }
        return last.front();
    };

    // A profile's prefill_max_tokens splits a micro-batch's prompts into
    // sub-batches that run one after another (docs/software-profiles.md §2f).
    for (int j = 0; j < m; ++j) {
        const std::int64_t sub = prefill_sub_batch(sc, sequences[j]);
        for (std::int64_t done = 0; done < sequences[j]; done += sub) {
            const workload::PassShape shape{std::min(sub, sequences[j] - done), w.prompt_tokens, w.prompt_tokens};
            prefill_end[j] = run_pass(Phase::prefill, j, shape, -1, std::vector<std::vector<std::uint32_t>>(width));
        }
        out.plan.markers.push_back(prefill_end[j]);
    }
    for (int k = 0; k < steps; ++k) {
        for (int j = 0; j < m; ++j) {
            const std::int64_t ctx = out.decode_context_first + k;
            const workload::PassShape shape{sequences[j], 1, ctx};
            // The sampled token of the previous pass returns to the first
            // stage (token ids, 4 bytes per sequence).
            const std::uint32_t prev = k == 0 ? prefill_end[j] : step_end[j];
            std::vector<std::vector<std::uint32_t>> entry(width);
            if (pp > 1) {
                std::vector<std::uint32_t> lasts(width, prev);
                entry =
                    em.send(pp - 1, 0, Bytes{static_cast<std::uint64_t>(4 * shape.batch)}, Phase::decode, j, k, lasts);
            } else {
                for (auto& e : entry) e.push_back(prev);
            }
            step_end[j] = run_pass(Phase::decode, j, shape, k, entry);
            out.plan.markers.push_back(step_end[j]);
        }
    }
}

// Refuses a plan that would exceed limits().plan_tasks before any of it is
// built, from a lower bound on its size: each simulated GPU of a stage runs at
// least one kernel per layer, micro-batch and pass (forward and backward;
// prefill and each simulated decode step). Plan::add checks the exact count
// as the plan grows; this makes the hostile cases (millions of micro-batches
// or layers) fail at once instead of after gigabytes.
void refuse_oversized_plan(const config::ScenarioSpec& sc, const ResolvedStrategy& rs, std::size_t width) {
    const auto& w = sc.workload;
    const double passes =
        w.mode == Mode::training
            ? 2.0
            : 1.0 + static_cast<double>(std::min<std::int64_t>(w.decode_steps_simulated, w.output_tokens));
    const double at_least = static_cast<double>(width) * static_cast<double>(rs.microbatches) *
                            static_cast<double>(sc.model.layers) * passes;
    const auto cap = limits().plan_tasks;
    if (at_least > static_cast<double>(cap))
        throw LimitError(fmt::format("the simulation plan needs at least {:.3g} tasks ({} micro-batches x {} layers x "
                                     "{} simulated GPUs per stage x {} passes)",
                                     at_least, rs.microbatches, sc.model.layers, width, passes),
                         "plan-tasks", cap);
}

}  // namespace

PlanBuild build_plan(const config::ScenarioSpec& sc, const config::StrategySpec& spec, const hw::CostModel& cm,
                     const BuildOptions& options) {
    PlanBuild out;
    out.spec = spec;
    ResolvedStrategy rs = resolve_degrees(sc, spec);
    const std::vector<LayerRange> vstages = split_layers(sc, spec, rs, cm);
    rs.virtual_stage_layers = vstages;

    // Memory: the most loaded stage decides feasibility.
    double worst = -1;
    for (int s = 0; s < rs.pp; ++s) {
        const auto verdict = hw::check_capacity(stage_memory(sc, rs, s, vstages), sc.gpu.memory_capacity);
        if (verdict.breakdown.total() > worst) {
            worst = verdict.breakdown.total();
            out.memory = verdict;
            out.memory_stage = s;
        }
    }
    out.strategy = rs;
    if (out.memory.oom) return out;

    // Collapsing skips the traffic of identical groups, which is only right
    // when those groups do not share links with the simulated one: on a PCIe
    // fabric (GPUs behind shared switches) or with fewer NICs than GPUs per
    // node, every GPU is simulated.
    BuildOptions effective = options;
    const auto& cl = sc.cluster;
    const bool shared_fabric = cl.intra_node == net::IntraNode::pcie || cl.intra_node == net::IntraNode::nvlink_pairs ||
                               (sc.gpus > cl.gpus_per_node && cl.nics_per_node < cl.gpus_per_node);
    if (options.collapse && shared_fabric && (out.strategy.tp > 1 || out.strategy.dp > 1)) {
        effective.collapse = false;
        out.strategy.partition_note += std::string(out.strategy.partition_note.empty() ? "" : "; ") +
                                       "every GPU simulated: replicas share links on this fabric";
    }
    out.collapsed = effective.collapse;
    Emitter em{sc,
               out.strategy,
               effective,
               operator_options(sc, out.strategy),
               out.plan,
               PerIndex<LayerRange>(vstages),
               {},
               {},
               spec.collective,
               spec.placement,
               {}};
    em.setup();
    refuse_oversized_plan(sc, out.strategy, em.members.front().size());
    if (sc.workload.mode == Mode::inference) emit_inference(em, out);
    else emit_training(em, out);
    return out;
}

}  // namespace sim::parallel
