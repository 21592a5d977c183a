// Multi-token prediction (DeepSeek-V3 report section 2.2; Megatron-Core's
// MultiTokenPredictionLayer): the operators of MTP module k in a training
// step, on the last pipeline stage after the main model
// (docs/workload-model.md, "Multi-token prediction"). Module k embeds the
// tokens shifted by k + 1 with the model's own table, normalises them and
// the previous depth's hidden state (enorm, hnorm), projects their
// concatenation 2h -> h (eh_proj, column-parallel; its output is
// all-gathered over the last dimension and split back to the sequence
// shard), runs one transformer layer (layer index layers + k, so MoE with
// its exchanges for an MoE model) and the shared output head with its loss.
#include "sim/workload/op_builders.h"

namespace sim::workload {
using namespace ops;

namespace {

Dims mtp_dims(const ModelSpec& m, std::int64_t depth, std::int64_t microbatch, const PassShape& shape,
              const OperatorOptions& opt) {
    if (depth < 0 || depth >= m.mtp_layers)
        throw InternalError(
            fmt::format("MTP depth {} is outside model '{}' ({} modules)", depth, m.name, m.mtp_layers));
    return make_dims(m, m.layers + depth, microbatch, shape, opt);
}

// The module's projection, column-parallel: [T, 2h] (gathered under SP) x [2h, h / tp].
Linear eh_proj_linear(const Dims& x) {
    const std::int64_t out = ceil_div(x.h, x.p);
    return column_parallel_linear(x, "mtp_eh_proj", wslot::mtp_eh, x.T, 2 * x.h, out,
                                  use(x.act(aslot::mtp_cat), 2.0 * full_act(x)),
                                  {use(x.act(aslot::mtp_eh), static_cast<double>(x.T * out) * x.ab)});
}

// enorm (of the embedding, `which` 0) or hnorm (of the hidden state, 1):
// each writes its half of the concatenation, on the sequence shard.
Operator mtp_norm(const Dims& x, const char* name, std::uint64_t in) {
    const double ns = shard_act(x);
    return elementwise(x, name, x.norm_flops() * x.Ts * static_cast<double>(x.h), ns + x.norm_w, ns,
                       {use(in, ns), use(x.weight(wslot::mtp_norms), x.norm_w), use(x.act(aslot::mtp_cat), ns, true)});
}

Operator mtp_norm_backward(const Dims& x, const char* name, std::uint64_t in) {
    const double ns = shard_act(x);
    return elementwise(x, name, 2 * x.norm_flops() * x.Ts * static_cast<double>(x.h), 2 * ns + x.norm_w, ns,
                       {use(flagged(x.act(aslot::mtp_cat), kGrad), ns), use(in, ns),
                        use(x.weight(wslot::mtp_norms), x.norm_w), use(flagged(in, kGrad), ns, true)});
}

// The model's own builders (embedding gather, output head) run again for
// the module: same weights, same cost; their kernels are named mtp_*.
std::vector<Operator> renamed(std::vector<Operator> ops) {
    for (auto& op : ops) op.kernel.name = "mtp_" + op.kernel.name;
    return ops;
}

void append(std::vector<Operator>& to, std::vector<Operator> ops) {
    for (auto& op : ops) to.push_back(std::move(op));
}

}  // namespace

std::vector<Operator> mtp_forward(const ModelSpec& m, std::int64_t depth, std::int64_t microbatch,
                                  const PassShape& shape, const OperatorOptions& opt) {
    const Dims x = mtp_dims(m, depth, microbatch, shape, opt);
    std::vector<Operator> ops = renamed(embedding_forward(m, microbatch, shape, opt));
    ops.push_back(mtp_norm(x, "mtp_enorm", x.act(aslot::resid, 0)));
    ops.push_back(mtp_norm(x, "mtp_hnorm", x.act(aslot::resid, x.layer)));
    ops.push_back(linear_forward(x, eh_proj_linear(x)));
    if (x.p > 1) {
        // all_gather_last_dim of the h / tp columns, then the copy of this
        // rank's sequence shard (scatter_to_sequence_parallel_region).
        const double ns = shard_act(x);
        Operator split = elementwise(
            x, "mtp_eh_split", 0, ns, ns,
            {use(flagged(x.act(aslot::mtp_eh), kGathered), ns), use(x.act(aslot::resid, x.layer), ns, true)});
        set_sync(x, split, TpSync::before_column_parallel, full_act(x));
        ops.push_back(std::move(split));
    }
    append(ops, layer_forward(m, x.layer, microbatch, shape, opt));
    append(ops, renamed(head_forward(m, microbatch, shape, opt, true)));
    return ops;
}

std::vector<Operator> mtp_backward(const ModelSpec& m, std::int64_t depth, std::int64_t microbatch,
                                   const PassShape& shape, const OperatorOptions& opt, Recompute recompute) {
    const Dims x = mtp_dims(m, depth, microbatch, shape, opt);
    std::vector<Operator> ops = renamed(head_backward(m, microbatch, shape, opt));
    append(ops, layer_backward(m, x.layer, microbatch, shape, opt, recompute));
    if (x.p > 1) {
        // The split's backward gathers the sequence (under SP); the last-dim
        // gather's backward reduce-scatters the columns.
        const double ns = shard_act(x), full = full_act(x);
        const std::uint64_t d_in = flagged(x.act(aslot::resid, x.layer), kGrad);
        const std::uint64_t d_eh = flagged(x.act(aslot::mtp_eh), kGrad);
        Operator gather = elementwise(x, "mtp_eh_split_bwd", 0, ns, ns,
                                      {use(flagged(d_in, kGathered), ns), use(partial_if_tp(x, d_eh), ns, true)});
        if (x.sp) set_sync(x, gather, TpSync::before_column_parallel, full);
        Operator reduce =
            elementwise(x, "mtp_eh_gather_bwd", 0, ns, ns, {use(partial_if_tp(x, d_eh), ns), use(d_eh, ns, true)});
        set_sync(x, reduce, TpSync::after_row_parallel, full);
        ops.push_back(std::move(gather));
        ops.push_back(std::move(reduce));
    }
    const Linear eh = eh_proj_linear(x);
    ops.push_back(linear_dgrad(x, eh));
    ops.push_back(linear_wgrad(x, eh));
    ops.push_back(mtp_norm_backward(x, "mtp_enorm_bwd", x.act(aslot::resid, 0)));
    ops.push_back(mtp_norm_backward(x, "mtp_hnorm_bwd", x.act(aslot::resid, x.layer)));
    append(ops, renamed(embedding_backward(m, microbatch, shape, opt)));
    return ops;
}

}  // namespace sim::workload
