// The embedding (vocabulary-parallel gather and its scatter-add backward)
// and the head (final norm, LM head, loss), docs/workload-model.md §6.
#include "sim/workload/op_builders.h"

namespace sim::workload {
using namespace ops;

std::vector<Operator> embedding_forward(const ModelSpec& m, std::int64_t microbatch, const PassShape& shape,
                                        const OperatorOptions& opt) {
    const Dims x = make_dims(m, kEmbeddingLayer, microbatch, shape, opt);
    const double T = static_cast<double>(x.T), h = static_cast<double>(x.h);
    const bool learned = m.position == PositionKind::learned;
    // Vocabulary-parallel table: each shard gathers the rows it owns (1/tp of
    // the tokens on average) and the TP reduction assembles the result.
    const double rows = T * h * x.wb / static_cast<double>(x.p);
    const double ids = T * 4.0;
    Operator op = make_op("embedding", KernelKind::embedding, x.act_dt, learned ? T * h : 0.0,
                          ids + rows + (learned ? T * h * x.wb : 0.0), full_act(x),
                          {use(partial_if_tp(x, x.act(aslot::resid, 0)), full_act(x), true)});
    set_sync(x, op, TpSync::after_row_parallel, full_act(x));
    return {std::move(op)};
}

std::vector<Operator> embedding_backward(const ModelSpec& m, std::int64_t microbatch, const PassShape& shape,
                                         const OperatorOptions& opt) {
    const Dims x = make_dims(m, kEmbeddingLayer, microbatch, shape, opt);
    const double T = static_cast<double>(x.T), h = static_cast<double>(x.h);
    const bool learned = m.position == PositionKind::learned;
    // Scatter-add of the rows' gradients into the table gradient (read-modify-write).
    const double rows = T * h * x.gb / static_cast<double>(x.p) + (learned ? T * h * x.gb : 0.0);
    Operator op = make_op("embedding_bwd", KernelKind::embedding, x.act_dt, (learned ? 2 : 1) * T * h,
                          full_act(x) + T * 4.0 + rows, rows,
                          {use(gathered_if_sp(x, flagged(x.act(aslot::resid, 0), kGrad)), full_act(x))});
    op.is_weight_grad = true;
    if (x.sp) set_sync(x, op, TpSync::before_column_parallel, full_act(x));
    return {std::move(op)};
}

namespace {

struct HeadDims {
    Dims x;
    std::int64_t tokens = 0;  // tokens through the LM head
    double norm_tokens = 0;   // tokens through the final norm (per shard under SP)
    std::int64_t v_p = 0;
};

HeadDims head_dims(const ModelSpec& m, std::int64_t microbatch, const PassShape& shape, const OperatorOptions& opt,
                   bool training) {
    HeadDims hd{make_dims(m, kHeadLayer, microbatch, shape, opt)};
    if (training && hw::is_low_precision(opt.precision.compute)) {
        // Low-precision training keeps the LM head in the activations' 16-bit
        // type: Megatron-Core's output layer is a plain ColumnParallelLinear,
        // outside Transformer Engine's FP8 modules (docs/workload-model.md,
        // "FP8 training").
        hd.x.gemm_dt = hd.x.act_dt;
        hd.x.in_b = hd.x.ab;
        hd.x.wb = hd.x.ab;
    }
    hd.tokens = training ? hd.x.T : shape.batch;  // inference: the last token of each sequence
    hd.norm_tokens = static_cast<double>(hd.tokens) / (hd.x.sp ? static_cast<double>(hd.x.p) : 1.0);
    hd.v_p = ceil_div(m.vocab, hd.x.p);
    return hd;
}

// The LM head: column-parallel over the vocabulary.
Linear lm_head_linear(const HeadDims& hd) {
    const Dims& x = hd.x;
    return column_parallel_linear(x, "lm_head", wslot::lm_head, hd.tokens, x.h, hd.v_p,
                                  use(x.act(aslot::final_norm), static_cast<double>(hd.tokens * x.h) * x.ab),
                                  {use(x.act(aslot::logits), static_cast<double>(hd.tokens * hd.v_p) * x.ab)});
}

// The LM head's weight: the embedding table when tied.
std::uint64_t lm_head_weight_id(const ModelSpec& m) {
    return m.tied_embeddings ? weight_tensor_id(kEmbeddingLayer, wslot::table)
                             : weight_tensor_id(kHeadLayer, wslot::lm_head);
}

void retarget_weight(const ModelSpec& m, Operator& op) {
    for (auto& t : op.kernel.tensors) {
        if (t.id == weight_tensor_id(kHeadLayer, wslot::lm_head)) t.id = lm_head_weight_id(m);
        if (t.id == weight_tensor_id(kHeadLayer, wslot::lm_head | kGrad)) t.id = flagged(lm_head_weight_id(m), kGrad);
    }
}

}  // namespace

std::vector<Operator> head_forward(const ModelSpec& m, std::int64_t microbatch, const PassShape& shape,
                                   const OperatorOptions& opt, bool training) {
    const HeadDims hd = head_dims(m, microbatch, shape, opt, training);
    const Dims& x = hd.x;
    const double h = static_cast<double>(x.h);
    const double ns = hd.norm_tokens * h * x.ab;
    std::vector<Operator> ops;
    ops.push_back(elementwise(x, "final_norm", x.norm_flops() * hd.norm_tokens * h, ns + x.norm_w, ns,
                              {use(x.act(aslot::resid, m.layers), ns), use(x.weight(wslot::final_norm), x.norm_w),
                               use(x.act(aslot::final_norm), ns, true)}));
    ops.push_back(linear_forward(x, lm_head_linear(hd)));
    retarget_weight(m, ops.back());
    const double t = static_cast<double>(hd.tokens), v = static_cast<double>(hd.v_p);
    const double logits = t * v * x.ab;
    const std::uint64_t lid = x.act(aslot::logits);
    if (training) {
        // Vocabulary-parallel cross-entropy: the softmax is kept (in place of
        // the logits) for the backward; three TP all-reduces of one float per
        // token (max, target logit, sum of exponentials).
        Operator ce = elementwise(x, "cross_entropy", kSoftmaxFlops * t * v, logits + t * 4.0, logits + t * 4.0,
                                  {use(lid, logits), use(lid, logits, true), use(x.act(aslot::loss), t * 4.0, true)});
        set_sync(x, ce, TpSync::after_row_parallel, 3 * t * 4.0);
        ops.push_back(std::move(ce));
    } else {
        // Greedy sampling: per-shard arg-max, then an all-reduce of (value, index) per sequence.
        Operator s = elementwise(x, "sampling", 2 * t * v, logits, t * 4.0,
                                 {use(lid, logits), use(x.act(aslot::tokens), t * 4.0, true)});
        set_sync(x, s, TpSync::after_row_parallel, t * 8.0);
        ops.push_back(std::move(s));
    }
    return ops;
}

std::vector<Operator> head_backward(const ModelSpec& m, std::int64_t microbatch, const PassShape& shape,
                                    const OperatorOptions& opt) {
    const HeadDims hd = head_dims(m, microbatch, shape, opt, true);
    const Dims& x = hd.x;
    const double h = static_cast<double>(x.h);
    const double t = static_cast<double>(hd.tokens), v = static_cast<double>(hd.v_p);
    const double logits = t * v * x.ab;
    const std::uint64_t lid = x.act(aslot::logits);
    std::vector<Operator> ops;
    ops.push_back(elementwise(x, "cross_entropy_bwd", 2 * t * v, logits + t * 4.0, logits,
                              {use(lid, logits), use(flagged(lid, kGrad), logits, true)}));
    const Linear head = lm_head_linear(hd);
    ops.push_back(linear_dgrad(x, head));
    ops.push_back(linear_wgrad(x, head));
    retarget_weight(m, ops[ops.size() - 2]);
    retarget_weight(m, ops.back());
    const double ns = hd.norm_tokens * h * x.ab;
    ops.push_back(elementwise(
        x, "final_norm_bwd", 2 * x.norm_flops() * hd.norm_tokens * h, 2 * ns + x.norm_w, ns,
        {use(flagged(x.act(aslot::final_norm), kGrad), ns), use(x.act(aslot::resid, m.layers), ns),
         use(x.weight(wslot::final_norm), x.norm_w), use(flagged(x.act(aslot::resid, m.layers), kGrad), ns, true)}));
    return ops;
}

}  // namespace sim::workload
