// The disaggregated handover (docs/serving.md, "Disaggregated prefill and
// decode" and "The handover's software"): a prefill replica's request goes
// to a decode replica (through that engine's own front end first where the
// proxy dispatches serially). With vLLM's NixlConnector the decode replica
// reserves blocks and reads the cache as flows after its worker posts the
// transfer's descriptors; with its P2pNcclConnector the prefill pushes the
// cache into the decode engine's receive buffer as soon as it ends, and the
// decode engine takes blocks for it only when it schedules the request.
#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/serve/serving_loop_impl.h"

#include <algorithm>

namespace sim::serve::loop_detail {

// The prefill replica keeps the request's KV blocks until its cache has
// moved; the router picks the decode replica now, which reserves blocks for
// the cache (first come first served) before the transfer starts. With the
// P2pNcclConnector the prefill's request ends at its first token and frees
// its blocks (request_finished returns false: the send thread holds copies
// gathered in the step, save_kv_layer), and the flows start at once: the
// send does not wait for the decode engine to have the request.
void Loop::hand_off(std::uint32_t id) {
    Sequence& s = seqs_[id];
    const bool push = pushes_cache();
    if (!setup_.prefilled) transfers_[id] = Transfer{sim_.now(), Time{}, push ? 0 : s.blocks, 0};
    if (push) {
        const auto p = static_cast<std::size_t>(res_.records[id].replica);
        reps_[p].st.kv.give_back(s.blocks);
        kick(p);
    }
    s.blocks = 0;
    s.output = requests_[id].output;
    const auto first = static_cast<std::size_t>(setup_.prefill_replicas);
    const std::size_t d = route(first, reps_.size() - first, setup_.prefilled ? routed_front_ : routed_decode_);
    res_.records[id].decode_replica = static_cast<std::int32_t>(d);
    if (setup_.prefilled) res_.records[id].replica = static_cast<std::int32_t>(d);
    Replica& dec = reps_[d];
    dec.st.outstanding += s.unfed() + s.output - s.generated;
    ++dec.stats.requests;
    if (push) {
        transfers_[id].start = sim_.now();
        res_.records[id].kv_wait_s = 0;
        start_flows(id, d);
    }
    if (sv_.serial_dispatch && !setup_.prefilled) {
        // The proxy sends the request on only now: the decode engine's own API
        // server takes it in (request_overhead of work, one request after
        // another) and hands it to its engine request_latency later, and only
        // then is its cache read and the request scheduled (docs/serving.md,
        // "Validation of disaggregation").
        decode_front_[dec.engine]->intake(id);
        return;
    }
    at_decode(id, d);
}

// The decode engine has the request (the prefill's end, or its own front
// end's intake after a serial dispatch).
void Loop::at_decode(std::uint32_t id, std::size_t d) {
    if (!setup_.prefilled) transfers_[id].handed = sim_.now();
    if (pushes_cache()) {
        transfers_[id].at_decode = true;
        receive(id, d);
        return;
    }
    reps_[d].incoming.push_back(id);
    accept_transfers(d);
}

// NixlConnector: the decode replica reserves the blocks of the next cache
// in line (first come first served), then its flows start.
void Loop::accept_transfers(std::size_t d) {
    Replica& dec = reps_[d];
    admit_landed(d);
    while (!dec.incoming.empty()) {
        const std::uint32_t id = dec.incoming.front();
        Sequence& s = seqs_[id];
        const std::int64_t need = dec.st.kv.blocks_for(s.computed);
        if (!dec.st.kv.take(need)) return;
        dec.incoming.pop_front();
        s.blocks = need;
        if (setup_.prefilled) {  // the cache is already here
            res_.records[id].kv_wait_s = (sim_.now() - arrival_[id]).seconds();
            land(id, d);
            continue;
        }
        Transfer& x = transfers_[id];
        x.start = sim_.now();
        res_.records[id].kv_wait_s = (x.start - x.handed).seconds();
        start_flows(id, d);
    }
}

// One flow per pair of tensor-parallel ranks whose KV heads overlap (rank
// i to rank i when both pools have the same tp), on the cluster's links,
// sharing them max-min fairly with every other transfer in flight.
void Loop::start_flows(std::uint32_t id, std::size_t d) {
    const Replica& dec = reps_[d];
    const Sequence& s = seqs_[id];
    Transfer& x = transfers_[id];
    // Rank i of the prefill replica holds heads [i/tp_p, (i+1)/tp_p) of
    // every layer's K and V, rank j of the decode replica needs
    // [j/tp_d, (j+1)/tp_d): i sends j the overlap, in units of
    // 1/(tp_p tp_d), of j's shard of computed x bytes_per_token.
    const Replica& pre = reps_[static_cast<std::size_t>(res_.records[id].replica)];
    const std::int64_t tp_p = pre.tp, tp_d = dec.tp;
    const double shard = static_cast<double>(s.computed) * dec.pool->bytes_per_token;
    // Each pair's read is posted as one descriptor per block and region
    // (docs/serving.md, "The handover's software"), serially by the
    // receiving GPU's worker, which may still be posting earlier reads;
    // vLLM's P2pNcclConnector posts none (one NCCL send a layer).
    const Time post_each = sv_.kv_connector == config::ServingSpec::KvConnector::nixl
                               ? setup_.scenario.profile.serving_kv_descriptor_post
                               : Time{};
    const auto post_ps =
        checked_mul(post_each.count_ps(), dec.st.kv.blocks_for(s.computed), dec.pool->regions_per_block);
    if (!post_ps) throw InternalError("serving: a KV transfer's descriptor posting time overflows");
    const Time post = Time::ps(*post_ps);
    x.flows_left = 0;
    for (std::int64_t i = 0; i < tp_p; ++i)
        for (std::int64_t j = 0; j < tp_d; ++j) {
            const std::int64_t overlap = std::min((i + 1) * tp_d, (j + 1) * tp_p) - std::max(i * tp_d, j * tp_p);
            if (overlap <= 0) continue;
            const Bytes bytes = Bytes::ceil(shard * static_cast<double>(overlap) / static_cast<double>(tp_p));
            ++x.flows_left;
            const int src = pre.first_gpu + static_cast<int>(i), dst = dec.first_gpu + static_cast<int>(j);
            res_.kv_bytes_moved += bytes.as_double();
            if (post == Time{}) {
                net_->start(src, dst, bytes, [this, id] { flow_done(id); });
                continue;
            }
            Time& free = posted_until_[static_cast<std::size_t>(dst)];
            free = std::max(free, sim_.now()) + post;
            sim_.schedule_at(
                free, [this, id, src, dst, bytes] { net_->start(src, dst, bytes, [this, id] { flow_done(id); }); });
        }
}

void Loop::flow_done(std::uint32_t id) {
    Transfer& x = transfers_[id];
    if (--x.flows_left > 0) return;
    const Time t = sim_.now();
    RequestRecord& rec = res_.records[id];
    const auto p = static_cast<std::size_t>(rec.replica);
    const auto d = static_cast<std::size_t>(rec.decode_replica);
    reps_[p].st.kv.give_back(x.src_blocks);
    x.src_blocks = 0;
    kick(p);  // its queue may have waited for these blocks
    rec.kv_transfer_s = (t - x.start).seconds();
    land(id, d);
}

// The cache is on decode replica d: the first token reaches the client, and
// the request runs when the batch has room (max_batch; SGLang's decode queues
// it while --max-running-requests run).
void Loop::land(std::uint32_t id, std::size_t d) {
    const Time t = sim_.now();
    if (pushes_cache()) {
        transfers_[id].landed = true;
        receive(id, d);
        return;
    }
    if (!setup_.prefilled && setup_.scenario.profile.serving_first_token_on_decode) {
        // The request waits to be scheduled like a new one whose prompt is
        // cached but its last token: that token's step samples the first
        // token the client sees (settle() records it).
        Sequence& s = seqs_[id];
        --s.computed;
        s.generated = 0;
        ++reps_[d].st.outstanding;
        reps_[d].st.waiting.push_back(id);
        kick(d);
        return;
    }
    res_.records[id].first_token_s = t.seconds();
    last_token_[id] = t;
    reps_[d].landed.push_back(id);
    admit_landed(d);
    kick(d);
}

// P2pNcclConnector: once the decode engine has both the request and its
// cache (in the receive buffer, outside the paged pool), the request joins
// its queue holding no blocks, with every prompt token but the last counted
// as computed (get_num_new_matched_tokens: prompt - 1); the scheduler takes
// its blocks when it admits it, like any request's, and that step copies
// the cache into them and samples the first token (start_load_kv).
void Loop::receive(std::uint32_t id, std::size_t d) {
    const Transfer& x = transfers_[id];
    if (!x.at_decode || !x.landed) return;
    Sequence& s = seqs_[id];
    --s.computed;
    s.generated = 0;
    s.received = s.computed;
    s.load = true;
    ++reps_[d].st.outstanding;
    reps_[d].st.waiting.push_back(id);
    kick(d);
}

// P2pNcclConnector: each side copies a request's cache with one PyTorch
// indexing kernel a layer, on the step's stream, over every prompt token:
// the prefill's gather of the finished prompt out of its blocks
// (save_kv_layer's extract_kv_from_layer), the decode's scatter of the
// received cache into the blocks just allocated (start_load_kv's
// inject_kv_into_layer, before the forward). Each kernel reads and writes
// its layer's share of the GPU's cache shard at the streaming rate.
Time Loop::kv_copy_time(Replica& rep) {
    if (!pushes_cache()) return Time{};
    const std::int64_t layers = setup_.scenario.model.layers;
    Time t{};
    for (const auto& w : rep.work) {
        Sequence& s = seqs_[w.seq];
        const bool gather = rep.role == Role::prefill && s.computed + w.tokens == s.prompt;
        const bool scatter = rep.role == Role::decode && s.load;
        if (!gather && !scatter) continue;
        s.load = false;
        hw::KernelDesc copy;
        copy.name = "kv_copy";
        copy.kind = hw::KernelKind::elementwise;
        copy.bytes_read = copy.bytes_written =
            Bytes::ceil(static_cast<double>(s.prompt) * rep.pool->bytes_per_token / static_cast<double>(layers));
        const MemoCostModel& kernels = rep.cost->kernel_costs();
        const Time each = kernels.cost(kernels.gpu(), copy, {}).duration;
        const auto ps = checked_mul(each.count_ps(), layers);
        if (!ps) throw InternalError("serving: a KV copy's time overflows");
        t += Time::ps(*ps);
    }
    return t;
}

void Loop::admit_landed(std::size_t d) {
    EngineState& st = reps_[d].st;
    auto& q = reps_[d].landed;
    while (!q.empty() && static_cast<std::int64_t>(st.running.size()) < st.max_batch) {
        st.running.push_back(q.front());
        q.pop_front();
    }
}

}  // namespace sim::serve::loop_detail
