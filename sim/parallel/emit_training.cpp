// A training iteration as tasks: the pipeline schedule's items on every
// stage (GPipe, 1F1B, interleaved 1F1B, DualPipe), ZeRO gathers, gradient buckets
// (overlapped or after the backward), the optimizer step and the parameter
// all-gather (after it, or during the forward with overlap.param_gather).
#include "sim/parallel/emitter.h"

#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/workload/footprint.h"

#include <functional>
#include <memory>
#include <utility>

namespace sim::parallel {

namespace {

// Each stage's items, in the order the strategy's schedule runs them.
PerIndex<std::vector<ScheduleItem>> schedule_items(const ResolvedStrategy& rs) {
    const PipelineShape shape{rs.pp, rs.microbatches, rs.virtual_stages};
    PerIndex<std::vector<ScheduleItem>> out(rs.pp);
    for (int s = 0; s < rs.pp; ++s) out[s] = rs.schedule->items(shape, s);
    return out;
}

// Per member of a stage, the tasks a receiving stage waits for.
using PerMember = std::vector<std::vector<std::uint32_t>>;

// Adds `more` to what each member waits for.
void append(PerMember& to, const PerMember& more) {
    for (std::size_t i = 0; i < more.size(); ++i) to[i].insert(to[i].end(), more[i].begin(), more[i].end());
}

}  // namespace

void emit_training(Emitter& em, PlanBuild& out) {
    const auto& sc = em.sc;
    const auto& rs = em.rs;
    const auto& m = sc.model;
    const auto& w = sc.workload;
    const int p = rs.pp, v = rs.virtual_stages, mbs = rs.microbatches;
    const int nv = p * v;
    // Where the layers live: rank s runs `chunks` virtual stages, chunk c
    // being vstage_of(s, c); a pass on chunk c moves to rank rank_of(vs, c).
    const PipelineShape pshape{p, mbs, v};
    const int chunks = rs.schedule->chunks(pshape);
    const auto vstage_of = [&](int s, int c) { return rs.schedule->virtual_stage(pshape, s, c); };
    const auto rank_of = [&](int vs, int c) { return rs.schedule->stage_of(pshape, vs, c); };
    const workload::PassShape shape{w.micro_batch, w.seq_len, w.seq_len};
    const auto items = schedule_items(rs);
    const std::size_t width = em.members.front().size();
    const auto params = workload::count_parameters(m);
    // The last stage's parameters outside its layers: the head, and the
    // multi-token-prediction modules' projections and norms (their layers
    // are buckets of their own, indices m.layers + k).
    const double head_params =
        params.lm_head + params.final_norm + static_cast<double>(m.mtp_layers) * params.mtp_module;
    const double wbytes = hw::bytes_per_element(em.opt.precision.weights);
    const double grad_bytes =
        config::gradient_reduce_bytes(sc.profile, wbytes, em.opt.precision.weights == hw::DType::bf16);
    // Sharded gradients under a stack that reduces every micro-batch (PyTorch
    // FSDP outside no_sync): each backward issues its buckets, not only the
    // last (docs/software-profiles.md §2b).
    const bool sync_every_mb = sc.profile.grad_sync_every_microbatch && rs.zero >= 2;
    const int shard_passes = rs.zero >= 2 && rs.dp * rs.cp > 1 ? sc.profile.grad_shard_passes : 0;
    const double boundary = em.boundary_per_rank(shape);

    // fwd_out[vs][mb] / bwd_out[vs][mb]: per member, the task the next stage waits for.
    PerIndex<PerIndex<PerMember>> fwd_out(nv, PerIndex<PerMember>(mbs));
    auto bwd_out = fwd_out;
    // Blocking sends (SoftwareProfile::pipeline_sends_blocking; docs/moe.md
    // section 3m): Megatron-Core's non-interleaved 1F1B waits for each batched
    // send and receive (p2p_communication._communicate: req.wait(), then
    // torch.cuda.synchronize()) before its next forward or backward, so on a
    // rank of one chunk the next item also waits for the previous item's send.
    // [stage]: per member, the send the stage's next item waits for.
    const bool blocking_sends = sc.profile.pipeline_sends_blocking && chunks == 1;
    PerIndex<PerMember> stage_send(p);
    // [stage][chunk]: the backward items still to emit that complete weight
    // gradients (all but the input-gradient halves of a zero-bubble split).
    PerIndex<PerIndex<int>> grad_left(p, PerIndex<int>(chunks, 0));
    // [mb]: the rank where the micro-batch enters (its virtual stage 0).
    PerIndex<int> entry_stage(mbs, 0);
    for (int s = 0; s < p; ++s)
        for (const auto& it : items[s]) {
            if (!it.forward && it.part != BackwardPart::input) ++grad_left[s][it.chunk];
            if (it.forward && vstage_of(s, it.chunk) == 0) entry_stage[it.mb] = s;
        }
    PerIndex<std::vector<std::uint32_t>> host_task(mbs);                                        // [mb]: per member
    PerIndex<std::vector<std::uint32_t>> last_dp(p, std::vector<std::uint32_t>(width, kNone));  // [stage]: per member

    // Over the dp x cp group of each TP rank; experts: over the expert-data-
    // parallel groups (dp x cp / ep ranks each) that have simulated members.
    auto dp_collective_over = [&](int s, net::CollectiveOp op, double bytes, Phase ph, int mb, int layer,
                                  const std::vector<std::uint32_t>& after, bool experts) {
        const int ranks = experts ? rs.edp() : rs.dp * rs.cp;
        if (ranks <= 1 || bytes <= 0) return;
        const auto& mem = em.members[s];
        const int tps = experts ? rs.expert_tp() : em.options.collapse ? 1 : rs.tp;
        const int subs = experts ? rs.ep : 1;
        for (int r = 0; r < tps; ++r)
            for (int j = 0; j < subs; ++j) {
                // Experts: the EDP group of expert-TP rank r and EP rank j.
                const auto in_group = [&](const Emitter::Member& x) {
                    if (!experts) return x.r == r;
                    const auto f = em.expert_rank(x);
                    return f.etp == r && f.ep == j;
                };
                bool any = false;
                for (const auto& x : mem) any = any || in_group(x);
                if (!any) continue;
                Task t = em.base(ph, mb, layer, -1);
                t.kind = TaskKind::collective;
                t.stream = StreamKind::dp_comm;
                t.group = experts ? em.edp_group(s, r, j) : em.dp_group(s, r);
                t.op = op;
                t.bytes = Bytes::ceil(bytes);
                t.gpu = em.plan.groups[t.group].members.front();
                std::vector<std::uint32_t> deps;
                // The dp_comm stream runs a bucket's dense part, then its
                // experts' part, so the last one done is the last issued.
                for (std::size_t i = 0; i < mem.size(); ++i)
                    if (in_group(mem[i]) && !after.empty()) deps.push_back(after[i]);
                const auto id = em.plan.add(t, deps);
                for (std::size_t i = 0; i < mem.size(); ++i)
                    if (in_group(mem[i])) last_dp[s][i] = id;
            }
    };
    // A transformer layer's parameters on one GPU, dense and experts
    // (without EP the experts stay in `dense`, as the per-layer count).
    // (Layer l's count: the leading dense layers of an MoE model differ.)
    const auto layer_params = [&](int l) { return workload::layer_parameters(params, m, l); };
    const auto layer_experts = [&](int l) {
        return rs.folds_experts() ? workload::layer_expert_params_per_shard(m, em.opt, l) : 0.0;
    };
    // The layer's experts over tp GPUs: ep x etp shards of layer_experts
    // (etp / tp is exactly 1 when etp = tp).
    const double experts_per_tp = rs.ep * (static_cast<double>(rs.expert_tp()) / rs.tp);
    const auto layer_dense = [&](int l) { return layer_params(l) / rs.tp - layer_experts(l) * experts_per_tp; };
    auto dp_collective = [&](int s, net::CollectiveOp op, double bytes, Phase ph, int mb, int layer,
                             const std::vector<std::uint32_t>& after) {
        dp_collective_over(s, op, bytes, ph, mb, layer, after, false);
    };
    // A layer's collective of `per_param` bytes per parameter: the dense
    // part over dp x cp, then the experts' part over the EDP group.
    auto layer_collective = [&](int s, net::CollectiveOp op, double per_param, Phase ph, int mb, int layer,
                                const std::vector<std::uint32_t>& after) {
        if (!rs.folds_experts())
            return dp_collective(s, op, layer_params(layer) / rs.tp * per_param, ph, mb, layer, after);
        dp_collective_over(s, op, layer_dense(layer) * per_param, ph, mb, layer, after, false);
        dp_collective_over(s, op, layer_experts(layer) * per_param, ph, mb, layer, after, true);
    };

    // Gradient buckets of a stage: reduced as each layer's last micro-batch
    // completes (overlap.grad_reduce), or all after the stage's backward ends.
    struct Bucket {
        double bytes;
        int layer, mb;
        bool experts;  // over the expert-data-parallel group
    };
    PerIndex<std::vector<Bucket>> deferred(p);
    const bool prologue = (sc.profile.grad_prereduce_nan_check || sc.profile.grad_prereduce_scale) && rs.dp * rs.cp > 1;
    auto emit_prologue = [&](int s, int mb, double local, PerMember& pending, std::vector<std::uint32_t>& last) {
        em.emit_ops(s,
                    workload::gradient_bucket_prologue(local, grad_bytes, sc.profile.grad_prereduce_nan_check,
                                                       sc.profile.grad_prereduce_scale),
                    Phase::backward, mb, -1, pending, last);
    };
    // Megatron's delay_grad_reduce: pipeline ranks after the first reduce once
    // their schedule is done (their DP traffic is off the critical path, and
    // the bucket passes below then do not hold up the backward's sends).
    const bool delay_later = sc.profile.delay_grad_reduce && p > 1 && v == 1;
    const auto overlapped = [&](int s) { return rs.overlap.grad_reduce && !(delay_later && s > 0); };
    PerIndex<std::vector<std::uint32_t>> stage_end(p, std::vector<std::uint32_t>(width, kNone));
    const auto reduce_op = rs.zero >= 1 ? net::CollectiveOp::reduce_scatter : net::CollectiveOp::all_reduce;
    auto grad_bucket = [&](int s, double bytes, int mb, int layer, const std::vector<std::uint32_t>& after) {
        if (overlapped(s)) dp_collective(s, reduce_op, bytes, Phase::backward, mb, layer, after);
        else deferred[s].push_back({bytes, layer, mb, false});
    };
    // A transformer layer's bucket (bytes per parameter).
    auto layer_bucket = [&](int s, int mb, int layer, const std::vector<std::uint32_t>& after) {
        if (!rs.folds_experts()) return grad_bucket(s, layer_params(layer) / rs.tp * grad_bytes, mb, layer, after);
        if (overlapped(s)) {
            layer_collective(s, reduce_op, grad_bytes, Phase::backward, mb, layer, after);
        } else {
            deferred[s].push_back({layer_dense(layer) * grad_bytes, layer, mb, false});
            deferred[s].push_back({layer_experts(layer) * grad_bytes, layer, mb, true});
        }
    };

    // overlap.param_gather (ZeRO 1 and 2; ZeRO-3 gathers per layer instead): the distributed optimizer's
    // parameter all-gather of the previous step runs bucket by bucket during
    // this forward (steady state), each layer's first forward waiting for its
    // bucket, instead of after the optimizer.
    const bool gather_in_forward = rs.overlap.param_gather && rs.zero >= 1 && rs.zero < 3 && rs.dp * rs.cp > 1;
    // (stage, layer (-1 embedding, -2 head)) -> per member: DualPipe holds
    // each layer on two ranks.
    std::map<std::pair<int, int>, std::vector<std::uint32_t>> gathered;
    if (gather_in_forward) {
        for (int s = 0; s < p; ++s)
            for (int c = 0; c < chunks; ++c) {
                const int vs = vstage_of(s, c);
                const auto [a, b] = em.vstages[vs];
                auto bucket = [&](int layer, double count) {
                    dp_collective(s, net::CollectiveOp::all_gather, count / rs.tp * wbytes, Phase::forward, -1, layer,
                                  {});
                    gathered[{s, layer}] = last_dp[s];
                };
                auto layer_gather = [&](int l) {
                    if (rs.folds_experts()) {
                        layer_collective(s, net::CollectiveOp::all_gather, wbytes, Phase::forward, -1, l, {});
                        gathered[{s, l}] = last_dp[s];
                    } else {
                        bucket(l, layer_params(l));
                    }
                };
                if (vs == 0) bucket(workload::kEmbeddingLayer, params.embedding);
                for (int l = a; l < b; ++l) layer_gather(l);
                if (vs + 1 == nv) {
                    bucket(workload::kHeadLayer, head_params);
                    for (int k = 0; k < m.mtp_layers; ++k) layer_gather(static_cast<int>(m.layers) + k);
                }
            }
    }
    auto wait_gather = [&](int s, int layer, std::vector<std::vector<std::uint32_t>>& pending) {
        if (!gather_in_forward) return;
        const auto& ids = gathered.at({s, layer});
        for (std::size_t i = 0; i < width; ++i) pending[i].push_back(ids[i]);
    };

    // An item (the forward or backward of one micro-batch on one chunk) as
    // steps on its chain: operators to emit, and actions (collectives,
    // sends, buckets) on the chain's tasks. One item alone runs its steps
    // in order; a pair under overlap.moe_a2a interleaves two (run_pair).
    struct Chain {
        std::vector<std::vector<std::uint32_t>> pending;  // per member: what the next kernel waits for
        std::vector<std::uint32_t> last;                  // per member: the chain's last task
    };
    struct Step {
        std::vector<Operator> ops;
        Phase phase = Phase::forward;
        std::function<void(Chain&)> act;  // set: an action, else the ops
    };
    // The stack's passes over a bucket of `local` parameters (this GPU's)
    // before its collective (grad_prereduce: Megatron's NaN-check norm and
    // 1/dp scale, docs/software-profiles.md §2b), on the compute stream right
    // before the bucket's collective is issued: in the backward for an
    // overlapped bucket, after the stage's schedule for a deferred one.
    auto bucket_prologue = [&](int s, int mb, double local, Chain& c) {
        if (!prologue || !overlapped(s)) return;
        emit_prologue(s, mb, local, c.pending, c.last);
    };
    const auto layer_local = [&](int l) {
        return rs.folds_experts() ? layer_dense(l) + layer_experts(l) : layer_params(l) / rs.tp;
    };
    auto item_steps = [&](int s, const ScheduleItem& it) {
        std::vector<Step> steps;
        const auto act = [&steps](std::function<void(Chain&)> f) {
            steps.push_back(Step{{}, Phase::forward, std::move(f)});
        };
        const auto ops = [&steps](std::vector<Operator> o, Phase ph) { steps.push_back(Step{std::move(o), ph, {}}); };
        const int vs = vstage_of(s, it.chunk);
        const int mb = it.mb;
        const int first_layer = em.vstages[vs].first, end_layer = em.vstages[vs].second;
        auto gather3 = [&, s, mb](int l, Phase ph) {
            return [&, s, mb, l, ph](Chain& c) {
                layer_collective(s, net::CollectiveOp::all_gather, wbytes, ph, mb, l, {});
                for (std::size_t i = 0; i < width; ++i) c.pending[i].push_back(last_dp[s][i]);
            };
        };
        auto wait_for = [&, s](int layer) { return [&, s, layer](Chain& c) { wait_gather(s, layer, c.pending); }; };
        if (it.forward) {
            act([&, vs, mb](Chain& c) {
                if (vs > 0) append(c.pending, fwd_out[vs - 1][mb]);
                if (vs == 0 && w.host_time_per_batch > Time{}) {
                    for (std::size_t i = 0; i < width; ++i) c.pending[i].push_back(host_task[mb][i]);
                }
            });
            if (vs == 0) {
                act(wait_for(workload::kEmbeddingLayer));
                ops(workload::embedding_forward(m, mb, shape, em.opt), Phase::forward);
            }
            for (int l = first_layer; l < end_layer; ++l) {
                act(wait_for(l));
                if (rs.zero >= 3) act(gather3(l, Phase::forward));
                ops(workload::layer_forward(m, l, mb, shape, em.opt), Phase::forward);
            }
            if (vs + 1 == nv) {
                act(wait_for(workload::kHeadLayer));
                ops(workload::head_forward(m, mb, shape, em.opt, true), Phase::forward);
                for (int k = 0; k < m.mtp_layers; ++k) {
                    const int l = static_cast<int>(m.layers) + k;
                    act(wait_for(l));
                    if (rs.zero >= 3) act(gather3(l, Phase::forward));
                    ops(workload::mtp_forward(m, k, mb, shape, em.opt), Phase::forward);
                }
            }
            act([&, s, vs, mb, chunk = it.chunk](Chain& c) {
                auto& slot = fwd_out[vs][mb];
                if (vs + 1 < nv) {
                    slot = em.send(s, rank_of(vs + 1, chunk), Bytes::ceil(boundary), Phase::forward, mb, -1, c.last);
                    if (blocking_sends) stage_send[s] = slot;
                } else slot = PerMember(width);
                for (std::size_t i = 0; i < width; ++i)
                    if (vs + 1 == nv) slot[i] = {c.last[i]};
            });
            return steps;
        }
        // A zero-bubble split (docs/parallelism.md, "DualPipe"): the input-
        // gradient item runs the backward's other kernels and sends; the
        // weight item runs its weight-gradient GEMMs later, on the same
        // compute stream, and issues the gradient buckets.
        const BackwardPart part = it.part;
        const bool grads = part != BackwardPart::input;
        const bool last_mb = grads && --grad_left[s][it.chunk] == 0;
        const bool sync = grads && (last_mb || sync_every_mb);
        const bool gather_params = rs.zero >= 3 && part != BackwardPart::weight;
        const auto bops = [&steps, part](std::vector<Operator> o, Phase ph) {
            if (part != BackwardPart::all)
                std::erase_if(
                    o, [part](const Operator& op) { return op.is_weight_grad != (part == BackwardPart::weight); });
            steps.push_back(Step{std::move(o), ph, {}});
        };
        if (part != BackwardPart::weight)
            act([&, vs, mb](Chain& c) {
                if (vs + 1 < nv) append(c.pending, bwd_out[vs + 1][mb]);
            });
        if (vs + 1 == nv) {
            // The MTP modules' backward first (their loss gradients reach
            // the main model's last hidden state through hnorm), deepest first.
            for (int k = static_cast<int>(m.mtp_layers) - 1; k >= 0; --k) {
                const int l = static_cast<int>(m.layers) + k;
                if (gather_params) act(gather3(l, Phase::backward));
                bops(workload::mtp_backward(m, k, mb, shape, em.opt, w.recompute), Phase::backward);
                if (sync)
                    act([&, s, mb, l](Chain& c) {
                        bucket_prologue(s, mb, layer_local(l), c);
                        layer_bucket(s, mb, l, c.last);
                    });
            }
            bops(workload::head_backward(m, mb, shape, em.opt), Phase::backward);
        }
        // ZeRO-3 re-gathers each layer's parameters for its backward. As
        // PyTorch FSDP does (backward prefetch, BACKWARD_PRE or _POST),
        // the all-gather of the next layer down is issued before this
        // layer's gradient reduce-scatter, so on the in-order dp_comm
        // stream it never waits behind this layer's backward
        // (docs/parallelism.md, "ZeRO-3").
        auto gather_next = std::make_shared<std::vector<std::uint32_t>>();
        auto gather = [&, s, mb, gather_next](int layer) {
            layer_collective(s, net::CollectiveOp::all_gather, wbytes, Phase::backward, mb, layer, {});
            *gather_next = last_dp[s];
        };
        if (gather_params && end_layer > first_layer) act([gather, end_layer](Chain&) { gather(end_layer - 1); });
        for (int l = end_layer - 1; l >= first_layer; --l) {
            if (gather_params)
                act([&, gather, gather_next, l, first_layer](Chain& c) {
                    for (std::size_t i = 0; i < width; ++i) c.pending[i].push_back((*gather_next)[i]);
                    if (l > first_layer) gather(l - 1);
                });
            bops(workload::layer_backward(m, l, mb, shape, em.opt, w.recompute), Phase::backward);
            // Bucketed gradient synchronisation: one bucket per layer,
            // issued once the last micro-batch's gradients are complete,
            // overlapping the backward of earlier layers.
            if (sync)
                act([&, s, mb, l](Chain& c) {
                    // Sharded gradients: the stack's passes over the layer's
                    // unsharded gradient come first (docs/software-profiles.md §2b).
                    if (shard_passes > 0)
                        em.emit_ops(s,
                                    {workload::gradient_shard_passes(layer_params(l) / rs.tp, shard_passes, wbytes,
                                                                     grad_bytes)},
                                    Phase::backward, mb, -1, c.pending, c.last);
                    bucket_prologue(s, mb, layer_local(l), c);
                    layer_bucket(s, mb, l, c.last);
                });
        }
        if (vs == 0) bops(workload::embedding_backward(m, mb, shape, em.opt), Phase::backward);
        act([&, s, vs, mb, sync, part, chunk = it.chunk](Chain& c) {
            if (sync && vs == 0) {
                bucket_prologue(s, mb, params.embedding / rs.tp, c);
                grad_bucket(s, params.embedding / rs.tp * grad_bytes, mb, -1, c.last);
            }
            if (sync && vs + 1 == nv && head_params - params.final_norm > 0) {
                bucket_prologue(s, mb, (head_params - params.final_norm) / rs.tp, c);
                grad_bucket(s, (head_params - params.final_norm) / rs.tp * grad_bytes, mb, -1, c.last);
            }
            if (c.last.front() != kNone) stage_end[s] = c.last;
            if (part == BackwardPart::weight) return;
            auto& slot = bwd_out[vs][mb];
            if (vs > 0) {
                slot = em.send(s, rank_of(vs - 1, chunk), Bytes::ceil(boundary), Phase::backward, mb, -1, c.last);
                if (blocking_sends) stage_send[s] = slot;
            }
        });
        return steps;
    };

    // One item alone: its steps in order; its first kernel also waits for
    // `also` (per member).
    auto emit_item = [&](int s, const ScheduleItem& it, const PerMember& also) {
        auto steps = item_steps(s, it);
        Chain c{also.empty() ? PerMember(width) : also, std::vector<std::uint32_t>(width, kNone)};
        if (!stage_send[s].empty()) append(c.pending, std::exchange(stage_send[s], {}));
        for (auto& st : steps) {
            if (st.act) st.act(c);
            else em.emit_ops(s, st.ops, st.phase, it.mb, -1, c.pending, c.last);
        }
    };

    // overlap.moe_a2a (docs/moe.md section 3e): a backward item and the
    // forward item that follows it on the stage run as a pair. Each is cut
    // at its expert-parallel all-to-alls into segments, and the segments
    // alternate on the compute stream, the backward's first: B0 F0 B1 F1
    // B2 F2 ... So each all-to-all (on the ep_comm stream) is issued after
    // its own segment and runs while the other micro-batch's next segment
    // computes, which is the pairing of DeepSeek-V3's Figure 4 and of
    // Megatron-Core's combined 1F1B: the backward's combine under the
    // forward's attention, the forward's dispatch under the backward's
    // experts, the backward's dispatch under the forward's experts, the
    // forward's combine under the backward's attention. Nothing is
    // discounted: the all-to-all takes what the flows take, and the
    // kernels it runs beside lose comm_sms SMs in the executor.
    struct Cursor {
        std::vector<Step> steps;
        Chain chain;
        int mb = 0;
        std::size_t step = 0, op = 0;
        bool done() const { return step == steps.size(); }
    };
    // A weight-gradient GEMM stays with the input-gradient GEMM before it
    // (emit_ops pairs them for the asynchronous TP reduction), so it never
    // starts a segment.
    const auto starts_segment = [](const Operator& op) { return op.ep_a2a_bytes.value > 0 && !op.is_weight_grad; };
    auto run_segment = [&](int s, Cursor& cur) {
        bool first = true;
        while (!cur.done()) {
            Step& st = cur.steps[cur.step];
            if (st.act) {
                st.act(cur.chain);
                ++cur.step;
                continue;
            }
            std::size_t end = cur.op;
            while (end < st.ops.size() && !(starts_segment(st.ops[end]) && !first)) {
                first = false;
                ++end;
            }
            if (end > cur.op) {
                if (cur.op == 0 && end == st.ops.size()) {
                    em.emit_ops(s, st.ops, st.phase, cur.mb, -1, cur.chain.pending, cur.chain.last);
                } else {
                    const std::vector<Operator> part(st.ops.begin() + static_cast<std::ptrdiff_t>(cur.op),
                                                     st.ops.begin() + static_cast<std::ptrdiff_t>(end));
                    em.emit_ops(s, part, st.phase, cur.mb, -1, cur.chain.pending, cur.chain.last);
                }
                cur.op = end;
            }
            if (cur.op < st.ops.size()) return;  // at the next all-to-all
            ++cur.step;
            cur.op = 0;
        }
    };
    auto run_pair = [&](int s, const ScheduleItem& bwd, const ScheduleItem& fwd) {
        const Chain fresh{std::vector<std::vector<std::uint32_t>>(width), std::vector<std::uint32_t>(width, kNone)};
        Cursor b{item_steps(s, bwd), fresh, bwd.mb};
        Cursor f{item_steps(s, fwd), fresh, fwd.mb};
        while (!b.done() || !f.done()) {
            run_segment(s, b);
            run_segment(s, f);
        }
    };
    const bool pair_items = rs.overlap.moe_a2a && rs.ep > 1;

    // Input pipeline: the host prepares micro-batches in order, one after another.
    if (w.host_time_per_batch > Time{}) {
        for (int j = 0; j < mbs; ++j) {
            for (const auto& mem : em.members[entry_stage[j]]) {
                Task t = em.base(Phase::input, j, -1, -1);
                t.kind = TaskKind::host;
                t.stream = StreamKind::host;
                t.gpu = mem.local;
                t.host_time = w.host_time_per_batch;
                host_task[j].push_back(em.plan.add(t, {}));
            }
        }
    }

    // Emit the per-stage schedules in an order that respects cross-stage
    // dependencies (a schedule is deadlock-free, so this always progresses).
    PerIndex<std::size_t> next(p, 0);
    PerIndex<PerIndex<char>> fwd_emitted(nv, PerIndex<char>(mbs, 0));
    auto bwd_emitted = fwd_emitted;
    std::size_t remaining = 0;
    for (const auto& v_items : items) remaining += v_items.size();
    // (A weight item follows its input-gradient item on the same rank.)
    const auto ready = [&](int s, const ScheduleItem& it) -> bool {
        const int vs = vstage_of(s, it.chunk);
        return it.forward ? (vs == 0 || fwd_emitted[vs - 1][it.mb])
                          : (vs + 1 == nv ? fwd_emitted[vs][it.mb] : bwd_emitted[vs + 1][it.mb]);
    };
    const auto mark = [&](int s, const ScheduleItem& it) {
        (it.forward ? fwd_emitted : bwd_emitted)[vstage_of(s, it.chunk)][it.mb] = 1;
        --remaining;
    };
    // Under pair_items: a backward followed by a forward (or, for a
    // schedule that names its pairs, an item marked paired and the next) is
    // emitted as a pair once both are ready. A pass with no progress emits
    // the first waiting pair's first item alone (the other stays next), so
    // emission never waits on a pair that the rest of the pipeline cannot feed.
    // Not overlapped, a named pair still starts once both its inputs are
    // in: DualPipe's _forward_backward_chunk receives the forward's input
    // and the backward's gradient, waits for both, then computes (so Table
    // 2's bubble, docs/parallelism.md "DualPipe").
    const bool named = rs.schedule->names_pairs();
    const auto is_pair = [&](const ScheduleItem& a, const ScheduleItem& b) {
        return named ? a.paired && a.forward != b.forward : pair_items && !a.forward && b.forward;
    };
    // What a backward item's first kernel waits for from another rank.
    const auto input_of = [&](int s, const ScheduleItem& b) {
        const int vs = vstage_of(s, b.chunk);
        return vs + 1 < nv ? bwd_out[vs + 1][b.mb] : PerMember{};
    };
    bool unpair_one = false;
    while (remaining > 0) {
        bool progress = false;
        for (int s = 0; s < p; ++s) {
            auto& idx = next[s];
            while (idx < items[s].size()) {
                const ScheduleItem it = items[s][idx];
                if (!ready(s, it)) break;
                if (idx + 1 < items[s].size() && is_pair(it, items[s][idx + 1])) {
                    const ScheduleItem f = items[s][idx + 1];
                    if (ready(s, f)) {
                        if (pair_items && it.forward) run_pair(s, f, it);
                        else if (pair_items) run_pair(s, it, f);
                        else {
                            emit_item(s, it, it.forward ? input_of(s, f) : PerMember{});
                            emit_item(s, f, {});
                        }
                        mark(s, it);
                        mark(s, f);
                        idx += 2;
                        progress = true;
                        continue;
                    }
                    if (!unpair_one) break;
                    unpair_one = false;
                }
                emit_item(s, it, {});
                mark(s, it);
                ++idx;
                progress = true;
            }
        }
        if (!progress && (pair_items || named) && !unpair_one) {
            unpair_one = true;
            continue;
        }
        if (!progress) throw InternalError("pipeline schedule deadlocked while emitting the plan");
    }

    // Without overlap.grad_reduce, the buckets go once the stage's backward is done.
    // Each after its passes, which the compute stream runs after the schedule.
    for (int s = 0; s < p; ++s) {
        std::vector<std::uint32_t> after = stage_end[s];
        for (const auto& b : deferred[s]) {
            if (prologue) {
                PerMember pending(width);
                emit_prologue(s, b.mb, b.bytes / grad_bytes, pending, after);
            }
            dp_collective_over(s, reduce_op, b.bytes, Phase::backward, b.mb, b.layer, after, b.experts);
        }
    }

    // Optimizer step after the gradient collectives, then (ZeRO 1 and 2, unless
    // it runs during the forward) the parameter all-gather. ZeRO-3 (FSDP)
    // updates its shard and gathers nothing here: the next forward gathers
    // layer by layer (docs/parallelism.md, "Data parallelism and ZeRO").
    for (int s = 0; s < p; ++s) {
        const auto& mem = em.members[s];
        double stage_params = 0;
        for (int c = 0; c < chunks; ++c) {
            const int vs = vstage_of(s, c);
            const auto [a, b] = em.vstages[vs];
            int dense = 0;  // leading dense layers of an MoE model in [a, b)
            for (int l = a; l < b; ++l) dense += m.experts > 0 && !m.is_moe_layer(l);
            stage_params += (b - a - dense) * params.per_layer + dense * params.dense_layer;
            if (vs == 0) stage_params += params.embedding;
            if (vs == nv - 1) stage_params += head_params + static_cast<double>(m.mtp_layers) * params.per_layer;
        }
        stage_params /= rs.tp;
        double local_params = stage_params / (rs.zero >= 1 ? rs.dp * rs.cp : 1);
        double stage_experts = 0;  // expert parameters on this GPU (EP only)
        if (rs.folds_experts()) {
            for (int c = 0; c < chunks; ++c) {
                const int vs = vstage_of(s, c);
                const auto [a, b] = em.vstages[vs];
                for (int l = a; l < b; ++l) stage_experts += layer_experts(l);
                if (vs == nv - 1)
                    for (int k = 0; k < m.mtp_layers; ++k)
                        stage_experts += layer_experts(static_cast<int>(m.layers) + k);
            }
            stage_params -= stage_experts * experts_per_tp;  // dense only from here
            local_params =
                stage_params / (rs.zero >= 1 ? rs.dp * rs.cp : 1) + stage_experts / (rs.zero >= 1 ? rs.edp() : 1);
        }
        std::vector<std::uint32_t> opt_task(mem.size());
        const std::uint32_t opt_kernel =
            mem.empty()
                ? kNone
                : em.plan.add_kernel(
                      workload::optimizer_step(local_params, em.opt, sc.profile.optimizer_bytes_per_param).kernel);
        for (std::size_t i = 0; i < mem.size(); ++i) {
            Task t = em.base(Phase::optimizer, -1, -1, -1);
            t.kind = TaskKind::kernel;
            t.stream = StreamKind::compute;
            t.gpu = mem[i].local;
            t.kernel = opt_kernel;
            opt_task[i] = em.plan.add(t, {last_dp[s][i]});
        }
        if (rs.zero >= 1 && rs.zero < 3 && !gather_in_forward) {
            dp_collective(s, net::CollectiveOp::all_gather, stage_params * wbytes, Phase::optimizer, -1, -1, opt_task);
            if (stage_experts > 0)
                dp_collective_over(s, net::CollectiveOp::all_gather, stage_experts * wbytes, Phase::optimizer, -1, -1,
                                   opt_task, true);
        }
    }
    out.tokens_per_iteration = static_cast<double>(w.global_batch) * static_cast<double>(w.seq_len);
    out.model_flops = workload::training_flops_per_token(m, w.seq_len) * out.tokens_per_iteration;
}

}  // namespace sim::parallel
