// Inside the plan builder: the Emitter places a strategy's operators on the
// simulated GPUs of each pipeline stage as tasks: kernels in lockstep, TP
// collectives (or, with overlap.tp_comm, the userbuffers ring exchange),
// the context-parallel K/V ring, and point-to-point sends between stages.
// builder.cpp (inference) and emit_training.cpp (training) drive it.
#pragma once

#include "sim/net/collective/i_collective.h"
#include "sim/parallel/index.h"
#include "sim/parallel/strategy.h"
#include "sim/workload/footprint.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace sim::parallel {

using workload::Operator;

struct Emitter {
    const config::ScenarioSpec& sc;
    const ResolvedStrategy& rs;
    const BuildOptions& options;
    workload::OperatorOptions opt;
    Plan& plan;
    PerIndex<LayerRange> vstages;  // layer range of each virtual stage
    // members[s] = simulated GPUs of stage s as (dp replica, cp rank, tp rank, local id)
    struct Member {
        int d, c, r;
        std::uint32_t local;
    };
    PerIndex<std::vector<Member>> members;
    std::map<std::tuple<int, int, int>, std::uint32_t> group_cache;  // (kind, stage, index) -> group
    std::string collective_algorithm = "auto";

    Placement placement = Placement::tp_first;
    PerIndex<std::vector<std::size_t>> cp_next;  // cp_next[s][i]: member index of i's successor on the CP ring
    // tp_members[s][d * cp + c]: indices into members[s] of the TP group of
    // replica d, CP rank c, in member order (a TP collective visits its
    // group's members, not the whole stage: dp x tp per collective otherwise).
    PerIndex<PerIndex<std::vector<std::uint32_t>>> tp_members = {};

    // GPU id of DP replica d, stage s, CP rank c, TP rank r. tp-first: TP
    // ranks, then CP ranks, are consecutive (a cp group stays in a node when
    // tp x cp divides gpus_per_node); pp-first: stages are consecutive;
    // pp-last: TP, CP, then DP ranks are consecutive and each stage holds a
    // block of dp x cp x tp GPUs (an EP group of ep x tp GPUs then fills
    // whole nodes when gpus_per_node divides it).
    int real(int d, int s, int c, int r) const {
        if (placement == Placement::pp_last) return (s * rs.dp + d) * rs.cp * rs.tp + c * rs.tp + r;
        const int replica = d * rs.pp * rs.cp * rs.tp;
        return placement == Placement::tp_first ? replica + s * rs.cp * rs.tp + c * rs.tp + r
                                                : replica + (c * rs.tp + r) * rs.pp + s;
    }

    void setup() {
        members = PerIndex<std::vector<Member>>(rs.pp);
        const int dps = options.collapse ? 1 : rs.dp;
        const int tps = options.collapse ? 1 : rs.tp;
        // CP ranks exchange K/V every layer, so all of them are simulated
        // (their ring transfers are the dependencies of each other's attention).
        for (int d = 0; d < dps; ++d)
            for (int s = 0; s < rs.pp; ++s)
                for (int c = 0; c < rs.cp; ++c)
                    for (int r = 0; r < tps; ++r) {
                        const auto local = static_cast<std::uint32_t>(plan.simulated_gpus.size());
                        plan.simulated_gpus.push_back(real(d, s, c, r));
                        members[s].push_back(Member{d, c, r, local});
                    }
        // Ring neighbour: the member of the same stage, replica and TP rank on the next CP rank.
        cp_next = PerIndex<std::vector<std::size_t>>(rs.pp);
        for (int s = 0; s < rs.pp; ++s) {
            const auto& mem = members[s];
            std::map<std::tuple<int, int, int>, std::size_t> index;  // (d, c, r) -> member
            for (std::size_t i = 0; i < mem.size(); ++i)
                index.emplace(std::make_tuple(mem[i].d, mem[i].c, mem[i].r), i);
            cp_next[s].resize(mem.size());
            for (std::size_t i = 0; i < mem.size(); ++i)
                cp_next[s][i] = index.at(std::make_tuple(mem[i].d, (mem[i].c + 1) % rs.cp, mem[i].r));
        }
        tp_members =
            PerIndex<PerIndex<std::vector<std::uint32_t>>>(rs.pp, PerIndex<std::vector<std::uint32_t>>(dps * rs.cp));
        for (int s = 0; s < rs.pp; ++s)
            for (std::size_t i = 0; i < members[s].size(); ++i)
                tp_members[s][members[s][i].d * rs.cp + members[s][i].c].push_back(static_cast<std::uint32_t>(i));
        plan.streams.resize(plan.simulated_gpus.size());
        plan.gpus_represented = sc.gpus;
    }

    // TP group of replica d, CP rank c at stage s; DP group of TP rank r at
    // stage s. Weights are replicated over the CP ranks, so gradients are
    // reduced over dp x cp GPUs (rank order: replica, then CP rank).
    std::uint32_t tp_group(int s, int d, int c) { return group(0, s, d * rs.cp + c); }
    // The same GPUs as tp_group, as a group whose collectives hold `sms` SMs
    // (kind 4: one SM count per run, the software profile's).
    std::uint32_t tp_group_holding(int s, int d, int c, int sms) {
        const std::uint32_t id = group(4, s, d * rs.cp + c);
        plan.groups[id].sms = sms;
        return id;
    }
    std::uint32_t dp_group(int s, int r) { return group(1, s, r); }
    // Expert parallelism (docs/moe.md section 1), Megatron-Core's rank
    // order: a stage's rank i = r + tp x (c + cp x d) (TP, CP, then DP rank)
    // is, in the MoE layers, i = et + etp x (e + ep x f): expert-TP rank et,
    // EP rank e, EDP rank f. EP group: the ranks with the same (et, f) (the
    // all-to-all); EDP group: the same (et, e) (the experts' gradient
    // reduction); expert-TP group: the same (e, f) (the all-gather and
    // reduce-scatter of a folded etp > 1, etp consecutive ranks inside one TP
    // group since etp divides tp; the TP group itself at etp = tp). With
    // etp = tp: et = r and the dp x cp ranks fold alone.
    struct ExpertRank {
        int etp, ep, edp;
    };
    ExpertRank expert_rank(const Member& x) const {
        const int i = x.r + rs.tp * (x.c + rs.cp * x.d), etp = rs.expert_tp();
        return {i % etp, (i / etp) % rs.ep, i / (etp * rs.ep)};
    }
    std::uint32_t edp_group(int s, int et, int e) { return group(3, s, et * rs.ep + e); }
    // The index of the EP (kind 2), EDP (kind 3), expert-TP (kind 5) or
    // expert-TP x EP (kind kTpEp: the same f, the allgather dispatcher's
    // tp_ep_group, docs/moe.md section 3l) group a rank belongs to.
    int fold_index(int kind, const ExpertRank& f) const {
        if (kind == 2) return f.etp * rs.edp() + f.edp;
        if (kind == 3) return f.etp * rs.ep + f.ep;
        if (kind == kTpEp) return f.edp;
        return f.ep + rs.ep * f.edp;
    }
    // The stage ranks i of an EP (kind 2, index et x edp + f), EDP (kind 3,
    // index et x ep + e) or expert-TP (kind 5, index e + ep x f) group, in
    // EP, EDP or expert-TP rank order.
    std::vector<int> fold_ranks(int kind, int idx) const {
        const int etp = rs.expert_tp(), edp = rs.edp();
        std::vector<int> i;
        if (kind == 2)
            for (int e = 0; e < rs.ep; ++e) i.push_back(idx / edp + etp * (e + rs.ep * (idx % edp)));
        else if (kind == 3)
            for (int f = 0; f < edp; ++f) i.push_back(idx / rs.ep + etp * (idx % rs.ep + rs.ep * f));
        else if (kind == kTpEp)
            for (int j = 0; j < etp * rs.ep; ++j) i.push_back(j + etp * rs.ep * idx);
        else
            for (int et = 0; et < etp; ++et) i.push_back(et + etp * idx);
        return i;
    }
    static constexpr int kDecodeEp = 6;  // the EP group's decode all-to-alls, on `moe_a2a_decode`'s algorithm
    // Every GPU of the stage (tp x dp x cp), the group of data-parallel
    // attention's gathered dense MLPs and LM head (docs/moe.md section 8b).
    static constexpr int kEngine = 7;
    static constexpr int kTpEp = 8;  // the etp x ep ranks of one EDP index: tp_ep_group (docs/moe.md section 3l)
    std::uint32_t group(int kind, int s, int idx) {
        const auto key = std::make_tuple(kind, s, idx);
        if (auto it = group_cache.find(key); it != group_cache.end()) return it->second;
        Group g;
        // The strategy's algorithm names an all-reduce algorithm; the EP
        // all-to-all takes auto's (the registry's all-to-all algorithm), in
        // decode the software profile's `moe_a2a_decode` (kind 6: the EP
        // group's GPUs for the decode exchanges, docs/moe.md section 3k).
        const bool decode_ep = kind == kDecodeEp;
        if (decode_ep) kind = 2;
        g.algorithm = decode_ep ? sc.profile.moe_a2a_decode : kind == 2 ? std::string("auto") : collective_algorithm;
        if (kind == 2 && sc.profile.moe_dispatcher != "alltoall") {
            // What a token-deduplicating all-to-all (deepep) needs to know.
            // A stack whose dispatcher is a plain all-to-all (software
            // profile `moe_dispatcher: alltoall`) does not hand it over, so
            // auto chooses among the all-to-alls of every routed copy.
            const auto& m = sc.model;
            g.tokens = net::TokenRouting{static_cast<int>(m.top_k), static_cast<int>(m.experts),
                                         static_cast<int>(m.expert_groups), static_cast<int>(m.expert_group_limit)};
        }
        if (kind == 2) {
            // The dispatcher's kernels hold the stack's SM count (DeepEP's
            // Buffer.num_sms under SGLang), else the collective library's;
            // beside compute they run slower than alone (docs/moe.md section
            // 8a): the stack's measured fraction.
            g.sms = sc.profile.moe_a2a_sms;
            g.beside_compute_rate = sc.profile.moe_a2a_beside_compute;
        }
        // DeepEP's low-latency kernels hold none while the data is in flight.
        if (decode_ep)
            if (const auto* a = net::find_collective_algorithm(g.algorithm); a != nullptr && !a->holds_sms())
                g.sms = -1;
        if (kind == kEngine) {
            for (int d = 0; d < rs.dp; ++d)
                for (int c = 0; c < rs.cp; ++c)
                    for (int r = 0; r < rs.tp; ++r) g.gpus.push_back(real(d, s, c, r));
            for (const auto& mem : members[s]) g.members.push_back(mem.local);
        } else if (kind == 0 || kind == 4) {
            for (int i = 0; i < rs.tp; ++i) g.gpus.push_back(real(idx / rs.cp, s, idx % rs.cp, i));
        } else if (kind >= 2) {
            for (int i : fold_ranks(kind, idx)) {
                const int q = i / rs.tp;
                g.gpus.push_back(real(q / rs.cp, s, q % rs.cp, i % rs.tp));
            }
            for (const auto& mem : members[s])
                if (fold_index(kind, expert_rank(mem)) == idx) g.members.push_back(mem.local);
        } else {
            for (int d = 0; d < rs.dp; ++d)
                for (int c = 0; c < rs.cp; ++c) g.gpus.push_back(real(d, s, c, idx));
        }
        for (const auto& mem : members[s])
            if (((kind == 0 || kind == 4) && mem.d * rs.cp + mem.c == idx) || (kind == 1 && mem.r == idx))
                g.members.push_back(mem.local);
        const auto id = plan.add_group(std::move(g));
        group_cache.emplace(key, id);
        return id;
    }

    // Bytes each TP rank sends across a pipeline boundary: Megatron's
    // scatter/gather sends 1/tp of the activation per rank (under sequence
    // parallelism the activation is already sharded that way).
    double boundary_per_rank(const workload::PassShape& shape) const {
        const double b = workload::boundary_activation_bytes(sc.model, shape, opt).as_double();
        return opt.sequence_parallel ? b : b / rs.tp;
    }

    Task base(Phase ph, int mb, int layer, int step) const {
        Task t;
        t.phase = ph;
        t.microbatch = mb;
        t.layer = layer;
        t.step = step;
        return t;
    }

    // Emits `ops` on every simulated GPU of stage s in lockstep. `pending`
    // holds, per member, the cross-stream tasks the next kernel must wait
    // for; on return it holds the last task of each member's chain.
    void emit_ops(int s, const std::vector<Operator>& ops, Phase ph, int mb, int step,
                  std::vector<std::vector<std::uint32_t>>& pending, std::vector<std::uint32_t>& last) {
        const auto& mem = members[s];
        const bool tp_on = rs.tp > 1;
        std::vector<std::uint32_t> ring_in(mem.size(), kNone);  // the task that made the chunk a member forwards next
        // Asynchronous TP communication in the backward (Overlap::tp_backward):
        // `early`, the all-gather the next weight-gradient GEMM needs, issued
        // before the input-gradient GEMM; `deferred`, the input gradient's
        // all-reduce, which only the op after the weight-gradient GEMM waits for.
        std::vector<std::uint32_t> early, deferred;
        for (std::size_t k = 0; k < ops.size(); ++k) {
            const Operator& op = ops[k];
            if (tp_on && rs.overlap.tp_comm && overlappable(op)) {
                emit_overlapped(s, op, ph, mb, step, pending, last);
                continue;
            }
            const bool async_dgrad = tp_on && rs.overlap.tp_backward &&
                                     op.tp_sync == workload::TpSync::after_column_input_grad && k + 1 < ops.size() &&
                                     ops[k + 1].is_weight_grad;
            if (async_dgrad && ops[k + 1].tp_sync == workload::TpSync::before_column_parallel)
                early = side_collective(s, net::CollectiveOp::all_gather, ops[k + 1].tp_sync_bytes, ph, mb, step,
                                        pending, last);
            if (!early.empty() && op.is_weight_grad) {
                for (std::size_t i = 0; i < mem.size(); ++i) pending[i].push_back(early[i]);
                early.clear();
            } else if (tp_on && op.tp_sync == workload::TpSync::before_column_parallel) {
                tp_collective(s, net::CollectiveOp::all_gather, op.tp_sync_bytes, ph, mb, step, pending, last);
            }
            if (rs.ep > 1 && op.ep_count_gather_bytes.value > 0)
                ep_collective(s, net::CollectiveOp::all_gather, StreamKind::tp_comm, op.ep_count_gather_bytes, ph, mb,
                              step, pending, last);
            if (op.etp_scatter_bytes.value > 0)
                expert_collective(s, 5, net::CollectiveOp::reduce_scatter, exchange_stream(), op.etp_scatter_bytes, ph,
                                  mb, step, pending, last);
            if (rs.ep > 1 && op.ep_a2a_bytes.value > 0) ep_all_to_all(s, op.ep_a2a_bytes, ph, mb, step, pending, last);
            if (rs.ep > 1 && op.ep_probs_a2a_bytes.value > 0)
                ep_all_to_all(s, op.ep_probs_a2a_bytes, ph, mb, step, pending, last);
            if (op.etp_gather_bytes.value > 0)
                expert_collective(s, 5, net::CollectiveOp::all_gather, exchange_stream(), op.etp_gather_bytes, ph, mb,
                                  step, pending, last);
            if (op.engine_before != workload::EngineSync::none)
                engine_collective(s, op.engine_before, op.engine_before_bytes, ph, mb, step, pending, last);
            for (const Bytes b : {op.tpep_meta_gather_bytes, op.tpep_gather_bytes})
                if (b.value > 0)
                    expert_collective(s, kTpEp, net::CollectiveOp::all_gather, exchange_stream(), b, ph, mb, step,
                                      pending, last);
            if (op.cp_step == 0) ring_in = last;  // K and V (and dO) are ready once the preceding task is
            if (op.cp_step > 0) ring_step(s, op.cp_ring_bytes, ph, mb, step, ring_in, pending);
            // One descriptor for every member: they run the same kernel on the same tensor ids (each GPU has its own L2).
            const std::uint32_t kernel_id = mem.empty() ? kNone : plan.add_kernel(op.kernel);
            for (std::size_t i = 0; i < mem.size(); ++i) {
                Task t = base(ph, mb, -1, step);
                t.kind = TaskKind::kernel;
                t.stream = StreamKind::compute;
                t.gpu = mem[i].local;
                t.kernel = kernel_id;
                last[i] = plan.add(t, pending[i]);
                pending[i].clear();
            }
            if (op.tpep_scatter_bytes.value > 0)
                expert_collective(s, kTpEp, net::CollectiveOp::reduce_scatter, exchange_stream(), op.tpep_scatter_bytes,
                                  ph, mb, step, pending, last);
            if (!deferred.empty() && op.is_weight_grad) {
                // The weight-gradient GEMM ran beside the all-reduce; what
                // follows waits for both.
                if (k + 1 < ops.size()) {
                    for (std::size_t i = 0; i < mem.size(); ++i) pending[i].push_back(deferred[i]);
                } else {
                    join(s, deferred, ph, mb, step, pending, last);
                }
                deferred.clear();
            }
            if (tp_on && (op.tp_sync == workload::TpSync::after_row_parallel ||
                          op.tp_sync == workload::TpSync::after_column_input_grad)) {
                const auto cop =
                    opt.sequence_parallel ? net::CollectiveOp::reduce_scatter : net::CollectiveOp::all_reduce;
                if (async_dgrad) {
                    deferred = side_collective(s, cop, op.tp_sync_bytes, ph, mb, step, pending, last);
                } else {
                    tp_collective(s, cop, op.tp_sync_bytes, ph, mb, step, pending, last);
                }
            }
            if (op.engine_after != workload::EngineSync::none)
                engine_collective(s, op.engine_after, op.engine_after_bytes, ph, mb, step, pending, last);
        }
    }

    // A TP collective that the next kernel does not wait for: issued after
    // the chain so far (as tp_collective), but `pending` and `last` are left
    // as they were. Returns, per member, the collective to wait for later.
    std::vector<std::uint32_t> side_collective(int s, net::CollectiveOp cop, Bytes bytes, Phase ph, int mb, int step,
                                               std::vector<std::vector<std::uint32_t>>& pending,
                                               std::vector<std::uint32_t>& last) {
        auto p = pending;
        auto l = last;
        tp_collective(s, cop, bytes, ph, mb, step, p, l);
        return l;
    }

    // Ends a chain on both its last kernel and `others` (per member): a
    // zero-byte copy on the TP stream, after the others in stream order, so
    // `last` stands for everything again (sends and gradient buckets follow it).
    void join(int s, const std::vector<std::uint32_t>& others, Phase ph, int mb, int step,
              std::vector<std::vector<std::uint32_t>>& pending, std::vector<std::uint32_t>& last) {
        const auto& mem = members[s];
        for (std::size_t i = 0; i < mem.size(); ++i) {
            Task t = base(ph, mb, -1, step);
            t.kind = TaskKind::transfer;
            t.stream = StreamKind::tp_comm;
            t.gpu = mem[i].local;
            t.peer = static_cast<std::uint32_t>(plan.simulated_gpus[mem[i].local]);
            t.bytes = Bytes{0};
            last[i] = plan.add(t, {last[i], others[i]});
            pending[i] = {last[i]};
        }
    }

    // One step of the context-parallel ring: every CP rank sends the chunk it
    // holds (its own K/V at the first step, then the one it last received) to
    // the next rank on the p2p stream; the receiver's next attention step
    // waits for it, while the current step computes on the chunk already
    // present, so the overlap comes out of the simulation.
    void ring_step(int s, Bytes bytes, Phase ph, int mb, int step, std::vector<std::uint32_t>& ring_in,
                   std::vector<std::vector<std::uint32_t>>& pending) {
        const auto& mem = members[s];
        const auto& next = cp_next[s];
        std::vector<std::uint32_t> sent(mem.size());
        for (std::size_t i = 0; i < mem.size(); ++i) {
            Task t = base(ph, mb, -1, step);
            t.kind = TaskKind::transfer;
            t.stream = StreamKind::p2p;
            t.gpu = mem[i].local;
            t.peer = static_cast<std::uint32_t>(plan.simulated_gpus[mem[next[i]].local]);
            t.bytes = bytes;
            std::vector<std::uint32_t> deps;
            if (ring_in[i] != kNone) deps.push_back(ring_in[i]);
            sent[i] = plan.add(t, deps);
        }
        for (std::size_t i = 0; i < mem.size(); ++i) {
            pending[next[i]].push_back(sent[i]);
            ring_in[next[i]] = sent[i];
        }
    }

    // `sms` > 0: the collective's kernels hold that many SMs (Group::sms)
    // instead of the collective library's comm_sms.
    void tp_collective(int s, net::CollectiveOp cop, Bytes bytes, Phase ph, int mb, int step,
                       std::vector<std::vector<std::uint32_t>>& pending, std::vector<std::uint32_t>& last,
                       int sms = 0) {
        const int dps = options.collapse ? 1 : rs.dp;
        std::vector<std::uint32_t> deps;
        for (int d = 0; d < dps; ++d)
            for (int c = 0; c < rs.cp; ++c) {
                Task t = base(ph, mb, -1, step);
                t.kind = TaskKind::collective;
                t.stream = StreamKind::tp_comm;
                t.group = sms > 0 ? tp_group_holding(s, d, c, sms) : tp_group(s, d, c);
                t.op = cop;
                t.bytes = bytes;
                const auto& who = tp_members[s][d * rs.cp + c];
                deps.clear();
                for (const std::uint32_t i : who) {
                    deps.push_back(last[i]);
                    deps.insert(deps.end(), pending[i].begin(), pending[i].end());
                }
                t.gpu = plan.groups[t.group].members.front();
                const auto id = plan.add(t, deps);
                for (const std::uint32_t i : who) {
                    pending[i] = {id};
                    last[i] = id;
                }
            }
    }

    // A collective over every GPU of the stage (data-parallel attention's
    // gathered layout, docs/moe.md section 8b) on the TP stream, after every
    // member's chain so far; the next kernel waits for it.
    void engine_collective(int s, workload::EngineSync sync, Bytes bytes, Phase ph, int mb, int step,
                           std::vector<std::vector<std::uint32_t>>& pending, std::vector<std::uint32_t>& last) {
        const auto& mem = members[s];
        Task t = base(ph, mb, -1, step);
        t.kind = TaskKind::collective;
        t.stream = StreamKind::tp_comm;
        t.group = group(kEngine, s, 0);
        t.op = sync == workload::EngineSync::all_gather       ? net::CollectiveOp::all_gather
               : sync == workload::EngineSync::reduce_scatter ? net::CollectiveOp::reduce_scatter
                                                              : net::CollectiveOp::all_reduce;
        t.bytes = bytes;
        std::vector<std::uint32_t> deps;
        for (std::size_t i = 0; i < mem.size(); ++i) {
            if (last[i] != kNone) deps.push_back(last[i]);
            deps.insert(deps.end(), pending[i].begin(), pending[i].end());
        }
        t.gpu = plan.groups[t.group].members.front();
        const auto id = plan.add(t, deps);
        for (std::size_t i = 0; i < mem.size(); ++i) {
            pending[i] = {id};
            last[i] = id;
        }
    }

    // The token dispatch or combine of an MoE layer: one all-to-all per EP
    // group that has simulated members, after their last task (and what
    // they wait for). On the tp_comm stream, since like a TP collective it
    // blocks the compute that follows; with overlap.moe_a2a on a stream of
    // its own, so that while it runs the compute stream and the TP
    // collectives serve the other micro-batch of a pair (emit_training.cpp);
    // likewise with overlap.two_batch, the other half-batch (emit_two_batch.cpp).
    void ep_all_to_all(int s, Bytes bytes, Phase ph, int mb, int step, std::vector<std::vector<std::uint32_t>>& pending,
                       std::vector<std::uint32_t>& last) {
        ep_collective(s, net::CollectiveOp::all_to_all, exchange_stream(), bytes, ph, mb, step, pending, last);
    }
    // The expert-TP gather and scatter ride on the exchange's stream: they
    // are part of it, and on tp_comm under overlap.moe_a2a they would hold
    // the other micro-batch's (or half-batch's) TP collectives behind the
    // all-to-all they wait for.
    StreamKind exchange_stream() const {
        return rs.overlap.moe_a2a || rs.overlap.two_batch ? StreamKind::ep_comm : StreamKind::tp_comm;
    }

    // A collective over each EP group of stage s, on `stream`, after each
    // member's chain so far; the next kernel waits for it.
    void ep_collective(int s, net::CollectiveOp cop, StreamKind stream, Bytes bytes, Phase ph, int mb, int step,
                       std::vector<std::vector<std::uint32_t>>& pending, std::vector<std::uint32_t>& last) {
        expert_collective(s, 2, cop, stream, bytes, ph, mb, step, pending, last);
    }

    // The same over each group of kind `kind` (fold_index: 2 EP, 5 expert-TP, 7 expert-TP x EP)
    // that has simulated members, in group index order.
    void expert_collective(int s, int kind, net::CollectiveOp cop, StreamKind stream, Bytes bytes, Phase ph, int mb,
                           int step, std::vector<std::vector<std::uint32_t>>& pending,
                           std::vector<std::uint32_t>& last) {
        const auto& mem = members[s];
        std::map<int, std::vector<std::size_t>> by_group;  // group index -> members
        for (std::size_t i = 0; i < mem.size(); ++i) by_group[fold_index(kind, expert_rank(mem[i]))].push_back(i);
        for (const auto& [idx, who] : by_group) {
            Task t = base(ph, mb, -1, step);
            t.kind = TaskKind::collective;
            t.stream = stream;
            const bool decode_a2a = kind == 2 && ph == Phase::decode && cop == net::CollectiveOp::all_to_all &&
                                    sc.profile.moe_a2a_decode != "auto";
            t.group = group(decode_a2a ? kDecodeEp : kind, s, idx);
            t.op = cop;
            t.bytes = bytes;
            std::vector<std::uint32_t> deps;
            for (std::size_t i : who) {
                if (last[i] != kNone) deps.push_back(last[i]);
                deps.insert(deps.end(), pending[i].begin(), pending[i].end());
            }
            t.gpu = plan.groups[t.group].members.front();
            const auto id = plan.add(t, deps);
            for (std::size_t i : who) {
                pending[i] = {id};
                last[i] = id;
            }
        }
    }

    // --tp-comm-overlap (Transformer Engine userbuffers, sequence parallel):
    // the all-gather before a GEMM and the reduce-scatter after it become a
    // ring exchange of tp chunks over point-to-point copies between the TP
    // neighbours, pipelined with the GEMM split into tp chunks of its tokens.
    // All-gather: chunk 0 computes on the local shard while it is sent on;
    // chunk j waits for the shard received at step j - 1, which is forwarded
    // at step j. Reduce-scatter: chunk j computes a partial output block and
    // sends it, added to the partial received, at step j; the result is
    // complete with the last chunk and the last partial received. A rank
    // receives at step j when its own send of step j completes (all ranks run
    // alike), so one simulated TP rank suffices. Copies and GEMM chunks
    // compete for SMs and HBM in the executor. Weight-gradient GEMMs
    // (tokens are their k) keep the plain order.
    static bool overlappable(const Operator& op) {
        return (op.tp_sync == workload::TpSync::before_column_parallel ||
                op.tp_sync == workload::TpSync::after_row_parallel ||
                op.tp_sync == workload::TpSync::after_column_input_grad) &&
               op.kernel.kind == hw::KernelKind::gemm && !op.is_weight_grad && op.cp_step < 0 && op.kernel.m >= 2;
    }

    void emit_overlapped(int s, const Operator& op, Phase ph, int mb, int step,
                         std::vector<std::vector<std::uint32_t>>& pending, std::vector<std::uint32_t>& last) {
        if (op.tp_sync == workload::TpSync::after_row_parallel && sc.profile.tp_comm_row_fprop_pipeline) {
            emit_pipelined_rs(s, op, ph, mb, step, pending, last);
            return;
        }
        const auto& mem = members[s];
        const int chunks = static_cast<int>(std::min<std::int64_t>(rs.tp, op.kernel.m));
        const std::uint32_t kernel_id = plan.add_kernel(kernel_chunk(op.kernel, chunks, &hw::KernelDesc::m));
        // Bytes of one ring step: one rank's shard of the activation.
        const auto n = static_cast<std::uint64_t>(rs.tp);
        const Bytes shard{(op.tp_sync_bytes.value + n - 1) / n};
        const bool gather_first = op.tp_sync == workload::TpSync::before_column_parallel;
        std::vector<std::uint32_t> sent(mem.size(), kNone);  // each member's latest ring copy
        auto copy = [&](std::size_t i, std::vector<std::uint32_t> deps) {
            Task t = base(ph, mb, -1, step);
            t.kind = TaskKind::transfer;
            t.stream = StreamKind::p2p;
            t.gpu = mem[i].local;
            t.peer = static_cast<std::uint32_t>(real(mem[i].d, s, mem[i].c, (mem[i].r + 1) % rs.tp));
            t.bytes = shard;
            if (sent[i] != kNone) deps.push_back(sent[i]);
            sent[i] = plan.add(t, deps);
        };
        for (int j = 0; j < chunks; ++j) {
            for (std::size_t i = 0; i < mem.size(); ++i) {
                std::vector<std::uint32_t> input = pending[i];
                if (last[i] != kNone) input.push_back(last[i]);
                std::vector<std::uint32_t> deps = j == 0 ? input : std::vector<std::uint32_t>{};
                if (gather_first && j > 0) deps.push_back(sent[i]);  // the shard received at step j - 1
                if (gather_first && j + 1 < chunks) copy(i, j == 0 ? input : std::vector<std::uint32_t>{});
                last[i] = chunk_task(mem[i].local, kernel_id, ph, mb, step, deps);
                pending[i].clear();
                if (!gather_first && j + 1 < chunks) copy(i, {last[i]});
            }
        }
        if (!gather_first)
            for (std::size_t i = 0; i < mem.size(); ++i)
                if (sent[i] != kNone) pending[i] = {sent[i]};  // the last partial received
    }

    // Transformer Engine's `pipeline` method for the reduce-scatter after a
    // row-parallel forward GEMM (userbuffers' split_overlap_rs, software
    // profile `tp_comm_row_fprop: pipeline`): the GEMM runs as
    // tp_comm_pipeline_splits chunks of its output features (n), whatever tp
    // is, every chunk over all the tokens; once chunk j is done, its slice
    // of the output (1 / splits of the activation) is reduce-scattered over
    // the TP group by userbuffers' kernels while chunk j + 1 computes. The
    // reduce-scatters are collectives on the TP stream (one after another,
    // as on TE's communication stream) of a TP group whose kernels hold
    // tp_comm_pipeline_sms SMs (Group::sms; the executor slows the GEMM
    // chunks beside them). The op after waits for the last reduce-scatter.
    void emit_pipelined_rs(int s, const Operator& op, Phase ph, int mb, int step,
                           std::vector<std::vector<std::uint32_t>>& pending, std::vector<std::uint32_t>& last) {
        const auto& mem = members[s];
        const int chunks = static_cast<int>(std::min<std::int64_t>(sc.profile.tp_comm_pipeline_splits, op.kernel.n));
        const std::uint32_t kernel_id = plan.add_kernel(kernel_chunk(op.kernel, chunks, &hw::KernelDesc::n));
        const auto parts = static_cast<std::uint64_t>(chunks);
        const Bytes slice{(op.tp_sync_bytes.value + parts - 1) / parts};
        std::vector<std::uint32_t> scattered(mem.size(), kNone);  // each member's latest reduce-scatter
        for (int j = 0; j < chunks; ++j) {
            for (std::size_t i = 0; i < mem.size(); ++i) {
                // Chunk 0 waits for the op's inputs; later chunks follow it
                // on the compute stream, not the reduce-scatters.
                std::vector<std::uint32_t> deps;
                if (j == 0) {
                    deps = pending[i];
                    if (last[i] != kNone) deps.push_back(last[i]);
                }
                last[i] = chunk_task(mem[i].local, kernel_id, ph, mb, step, deps);
                pending[i].clear();
            }
            // Chunk j's reduce-scatter waits for chunk j alone (the TP
            // stream orders it after chunk j - 1's).
            scattered = last;
            std::vector<std::vector<std::uint32_t>> none(mem.size());
            tp_collective(s, net::CollectiveOp::reduce_scatter, slice, ph, mb, step, none, scattered,
                          sc.profile.tp_comm_pipeline_sms);
        }
        for (std::size_t i = 0; i < mem.size(); ++i) pending[i] = {scattered[i]};  // the output is complete
    }

    // A GEMM chunk on GPU `local`'s compute stream.
    std::uint32_t chunk_task(std::uint32_t local, std::uint32_t kernel_id, Phase ph, int mb, int step,
                             const std::vector<std::uint32_t>& deps) {
        Task t = base(ph, mb, -1, step);
        t.kind = TaskKind::kernel;
        t.stream = StreamKind::compute;
        t.gpu = local;
        t.kernel = kernel_id;
        return plan.add(t, deps);
    }

    // One of `chunks` equal slices of a GEMM along `dim` (m, the tokens; or
    // n, the output features): FLOPs, bytes and tensors scale by 1 / chunks
    // (the operand not sliced, the weight for m and the input for n, is
    // re-read by every slice; taken as staying in L2 between them, so its HBM
    // traffic is not repeated).
    static hw::KernelDesc kernel_chunk(const hw::KernelDesc& k, int chunks, std::int64_t hw::KernelDesc::*dim) {
        hw::KernelDesc c = k;
        const auto n = static_cast<std::uint64_t>(chunks);
        const auto part = [n](Bytes b) { return Bytes{(b.value + n - 1) / n}; };
        c.name = k.name + "_chunk";
        c.*dim = (k.*dim + chunks - 1) / chunks;
        c.flops = Flops{k.flops.value / static_cast<double>(chunks)};
        c.bytes_read = part(k.bytes_read);
        c.bytes_written = part(k.bytes_written);
        c.epilogue_read = part(k.epilogue_read);
        for (auto& u : c.tensors) u.size = part(u.size);
        return c;
    }

    // Point-to-point sends from every member of stage `from` to its
    // counterpart on stage `to`; returns, per member of `to`, the transfer it waits for.
    std::vector<std::vector<std::uint32_t>> send(int from, int to, Bytes bytes, Phase ph, int mb, int step,
                                                 const std::vector<std::uint32_t>& last) {
        const auto& src = members[from];
        const auto& dst = members[to];
        std::vector<std::vector<std::uint32_t>> out(dst.size());
        for (std::size_t i = 0; i < src.size(); ++i) {
            if (from == to) {
                out[i].push_back(last[i]);
                continue;
            }
            Task t = base(ph, mb, -1, step);
            t.kind = TaskKind::transfer;
            t.stream = StreamKind::p2p;
            t.gpu = src[i].local;
            t.peer = static_cast<std::uint32_t>(real(src[i].d, to, src[i].c, src[i].r));
            t.bytes = bytes;
            const auto id = plan.add(t, {last[i]});
            out[i].push_back(id);  // members are laid out alike on every stage
        }
        return out;
    }

    std::vector<Operator> forward_ops(int vs, int mb, const workload::PassShape& shape, bool training) const {
        std::vector<Operator> ops;
        const auto& m = sc.model;
        if (vs == 0) {
            auto e = workload::embedding_forward(m, mb, shape, opt);
            ops.insert(ops.end(), e.begin(), e.end());
        }
        for (int l = vstages[vs].first; l < vstages[vs].second; ++l) {
            auto f = workload::layer_forward(m, l, mb, shape, opt);
            ops.insert(ops.end(), f.begin(), f.end());
        }
        if (vs + 1 == static_cast<int>(vstages.size())) {
            auto h = workload::head_forward(m, mb, shape, opt, training);
            ops.insert(ops.end(), h.begin(), h.end());
        }
        return ops;
    }
};

// The training iteration (schedule items of every stage, gradient buckets,
// optimizer, ZeRO gathers): emit_training.cpp.
void emit_training(Emitter& em, PlanBuild& out);

// overlap.two_batch's passes: emit_two_batch.h.

}  // namespace sim::parallel
