// overlap.two_batch in a decode step: SGLang's decode stage order (docs/moe.md
// section 8a, "The decode order"). Each half's MoE layers are cut into the
// five stages of SGLang's DeepSeek decode strategy, and half A runs two
// stages ahead of half B. Each exchange is issued where SGLang calls its `_a`
// operation (DeepEP's low-latency send) and waited for where it calls its
// `_b` (the receive hook), so it flies beside whatever the compute stream runs
// between the two, and a wait on the in-order compute stream holds back
// every kernel after it, of both halves. Prefill keeps the alternation of
// emit_two_batch.cpp.
#include "sim/parallel/builder.h"
#include "sim/parallel/emit_two_batch.h"
#include "sim/parallel/emitter.h"

#include "sim/core/error.h"

#include <string>

namespace sim::parallel {

namespace {

// One step of a stage: operators, or an exchange issued (DeepEP's send, the
// `_a` operation) or waited for (its receive hook, the `_b`).
struct Step {
    enum class Kind { ops, issue, wait } kind = Kind::ops;
    std::vector<Operator> ops;
    Bytes bytes;  // issue: each rank's bytes of the all-to-all
};
using Stage = std::vector<Step>;

Step ops_step(const std::vector<Operator>& layer, std::size_t from, std::size_t to) {
    Step s;
    s.ops.assign(layer.begin() + static_cast<std::ptrdiff_t>(from), layer.begin() + static_cast<std::ptrdiff_t>(to));
    return s;
}

Step issue_step(Bytes bytes) {
    Step s;
    s.kind = Step::Kind::issue;
    s.bytes = bytes;
    return s;
}

Step wait_step() {
    Step s;
    s.kind = Step::Kind::wait;
    return s;
}

// Where a MoE layer's operators (moe_forward's order) meet SGLang's operations:
// the attention kernel starts op_core; the dispatch's permute is dispatch_a's
// kernel; the first expert operator carries the dispatch's exchange and the
// combine operator the combine's.
struct LayerCut {
    std::size_t core = 0, dispatch = 0, experts = 0, combine = 0;
};

LayerCut cut_layer(const std::vector<Operator>& ops) {
    const std::size_t n = ops.size();
    LayerCut c{n, n, n, n};
    for (std::size_t i = 0; i < n; ++i) {
        const Operator& op = ops[i];
        if (c.core == n && op.kernel.kind == hw::KernelKind::attention) c.core = i;
        if (c.dispatch == n && op.kernel.name == "moe_dispatch") c.dispatch = i;
        if (op.ep_a2a_bytes.value > 0) {
            if (c.experts == n) c.experts = i;
            else if (c.combine == n) c.combine = i;
        }
    }
    if (!(c.core < c.dispatch && c.dispatch < c.experts && c.experts < c.combine && c.combine < n))
        throw InternalError(
            "overlap.two_batch decode: a MoE layer without attention, dispatch, experts and combine "
            "in that order");
    return c;
}

// SGLang's `_compute_moe_deepseek_blog_decode` (operations_strategy.py at
// sgl-project/sglang@1e90555b): a layer's operations cut by its yields into
//   S0 op_output, op_comm_postprocess_layer (the previous layer's), then
//      op_comm_prepare_attn, self_attn.op_prepare   | yield
//   S1 self_attn.op_core, op_comm_prepare_mlp, op_gate, op_select_experts | yield
//   S2 op_dispatch_a, op_shared_experts             | yield
//   S3 op_dispatch_b, op_experts, op_combine_a      | yield
//   S4 op_combine_b                                 | yield
// the layers' lists concatenated, so a layer's output opens the next layer's
// S0 and the last layer's output is a stage of its own (5 L + 1 stages).
std::vector<Stage> decode_stages(const std::vector<std::vector<Operator>>& layers) {
    std::vector<Stage> stages;
    Stage open;  // S0 so far: the previous layer's output
    for (const auto& layer : layers) {
        const LayerCut c = cut_layer(layer);
        open.push_back(ops_step(layer, 0, c.core));
        stages.push_back(std::move(open));
        stages.push_back({ops_step(layer, c.core, c.dispatch)});
        // dispatch_a: the permute, then the send; the shared experts beside it.
        stages.push_back({ops_step(layer, c.dispatch, c.dispatch + 1), issue_step(layer[c.experts].ep_a2a_bytes),
                          ops_step(layer, c.dispatch + 1, c.experts)});
        // dispatch_b: the receive; the experts; combine_a: the send back.
        Step experts = ops_step(layer, c.experts, c.combine);
        experts.ops.front().ep_a2a_bytes = Bytes{0};
        stages.push_back({wait_step(), std::move(experts), issue_step(layer[c.combine].ep_a2a_bytes)});
        // combine_b: the receive and the weighted sum of a token's copies.
        Step combine = ops_step(layer, c.combine, c.combine + 1);
        combine.ops.front().ep_a2a_bytes = Bytes{0};
        stages.push_back({wait_step(), std::move(combine)});
        open = {ops_step(layer, c.combine + 1, layer.size())};
    }
    stages.push_back(std::move(open));
    return stages;
}

// SGLang's tbo_delta_stages for decode: half A starts this many stages ahead.
constexpr std::size_t kDecodeDeltaStages = 2;

struct Half {
    std::vector<Stage> stages;
    std::vector<std::vector<std::uint32_t>> pending;
    std::vector<std::uint32_t> last;
    std::vector<std::uint32_t> in_flight;  // per member: the exchange issued and not yet waited for
};

void run_stage(Emitter& em, Half& h, std::size_t k, Phase ph, int mb, int step) {
    for (const Step& s : h.stages[k]) {
        switch (s.kind) {
            case Step::Kind::ops:
                if (!s.ops.empty()) em.emit_ops(0, s.ops, ph, mb, step, h.pending, h.last);
                break;
            case Step::Kind::issue: {
                // After the half's kernels so far; its next kernels do not wait.
                auto pending = h.pending;
                h.in_flight = h.last;
                em.ep_all_to_all(0, s.bytes, ph, mb, step, pending, h.in_flight);
                break;
            }
            case Step::Kind::wait:
                for (std::size_t i = 0; i < h.pending.size(); ++i) h.pending[i].push_back(h.in_flight[i]);
                break;
        }
    }
}

}  // namespace

void emit_two_halves_decode(Emitter& em, int mb, int step, const std::vector<std::vector<Operator>>& a_layers,
                            const std::vector<std::vector<Operator>>& b_layers,
                            std::vector<std::vector<std::uint32_t>>& entry, std::vector<std::uint32_t>& last) {
    const Phase ph = Phase::decode;
    Half ha, hb;
    ha.stages = decode_stages(a_layers);
    hb.stages = decode_stages(b_layers);
    if (ha.stages.size() != hb.stages.size() || ha.stages.size() < kDecodeDeltaStages)
        throw InternalError("overlap.two_batch decode: the halves' stages differ");
    for (Half* h : {&ha, &hb}) {
        h->pending = entry;
        h->last = last;
    }
    // _execute_two_batch_raw (two_batch_overlap.py at sgl-project/sglang@01419072):
    // A's first delta stages, then A's stage k + delta beside B's stage k, then B's last delta.
    const std::size_t n = ha.stages.size(), d = kDecodeDeltaStages;
    for (std::size_t k = 0; k < d; ++k) run_stage(em, ha, k, ph, mb, step);
    for (std::size_t k = 0; k + d < n; ++k) {
        run_stage(em, ha, k + d, ph, mb, step);
        run_stage(em, hb, k, ph, mb, step);
    }
    for (std::size_t k = n - d; k < n; ++k) run_stage(em, hb, k, ph, mb, step);
    join_two_halves(ha.pending, ha.last, hb.pending, hb.last, entry, last);
}

}  // namespace sim::parallel
