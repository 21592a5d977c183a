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
    // PyTorch's embedding backward is dense: embedding_backward_cuda_kernel
    // zero-fills a gradient of the whole table (this shard's vocabulary rows,
    // and the position table when learned) in the gradient's dtype before
    // the scatter (docs/workload-model.md §6).
    const double table = static_cast<double>(ceil_div(m.vocab, x.p) + (learned ? m.max_seq : 0)) * h;
    Operator op = make_op("embedding_bwd", KernelKind::embedding, x.act_dt, (learned ? 2 : 1) * T * h,
                          full_act(x) + T * 4.0 + rows, table * x.ab + rows,
                          {use(gathered_if_sp(x, flagged(x.act(aslot::resid, 0), kGrad)), full_act(x))});
    op.is_weight_grad = true;
    if (x.sp) set_sync(x, op, TpSync::before_column_parallel, full_act(x));
    // The dense gradient is then added into the stack's gradient storage:
    // Megatron's param hook (main_grad.add_(grad)), autograd's accumulation
    // into .grad after the first micro-batch, FSDP's copy into the flat gradient.
    Operator add = make_op("embedding_grad_add", KernelKind::elementwise, x.act_dt, table, table * (x.ab + x.gb),
                           table * x.gb, {});
    add.is_weight_grad = true;
    return {std::move(op), std::move(add)};
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

// HBM bytes of the training loss over `elements` logits of `ab` bytes each
// (docs/workload-model.md §6). Fused: the forward reads the logits and
// writes the softmax in their place, the backward reads it and writes the
// logits' gradient. FP32 unfused (Megatron's vocab_parallel_cross_entropy on
// logits.float(), megatron/core/tensor_parallel/cross_entropy.py), one pass
// per op, 4-byte elements after the cast:
//   forward:  .float() (r ab, w 4), max (r 4), -= max (r 4, w 4),
//             exp (r 4, w 4), sum (r 4), div_ by the sum (r 4, w 4)
//   backward: grad.mul_(grad_output) (r 4, w 4), autograd's cast back to
//             the logits' dtype (r 4, w ab)
// FP32 logits skip both casts. The target-logit gathers are per token.
struct CrossEntropyBytes {
    double fwd_read, fwd_written, bwd_read, bwd_written;
};

CrossEntropyBytes cross_entropy_bytes(const OperatorOptions& opt, double elements, double ab) {
    if (!opt.cross_entropy_fp32_unfused) return {elements * ab, elements * ab, elements * ab, elements * ab};
    const double cast_r = ab < 4.0 ? ab : 0.0, cast_w = ab < 4.0 ? 4.0 : 0.0;
    return {elements * (cast_r + 20.0), elements * (cast_w + 12.0), elements * (4.0 + cast_w),
            elements * (4.0 + cast_r)};
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
    ops.push_back(
        at_share(elementwise(x, "final_norm", x.norm_flops() * hd.norm_tokens * h, ns + x.norm_w, ns,
                             {use(x.act(aslot::resid, m.layers), ns), use(x.weight(wslot::final_norm), x.norm_w),
                              use(x.act(aslot::final_norm), ns, true)}),
                 x.o->memory_bound.norm));
    if (!training && opt.dp_head_gather > 1) {
        // Data-parallel attention, SGLang's default LM head (docs/moe.md
        // section 8b): every DP rank's last tokens gathered over the engine,
        // the head vocabulary-parallel over all its GPUs, the logits
        // all-gathered over it, each rank sampling its own tokens whole.
        HeadDims g = hd;
        g.x = dp_gathered_dims(x, opt.dp_head_gather);
        g.tokens = hd.tokens * opt.dp_head_gather;
        g.v_p = ceil_div(m.vocab, g.x.p);
        ops.push_back(linear_forward(g.x, lm_head_linear(g)));
        retarget_weight(m, ops.back());
        set_engine_syncs(g.x, ops, ops.size() - 1);
        ops.back().engine_before_bytes = Bytes::ceil(static_cast<double>(g.tokens) * h * x.ab);  // the last tokens
        const double gathered_logits = static_cast<double>(g.tokens * g.v_p * g.x.p) * x.ab;
        ops.back().engine_after = EngineSync::all_gather;
        ops.back().engine_after_bytes = Bytes::ceil(gathered_logits);
        const double t = static_cast<double>(hd.tokens), v = static_cast<double>(m.vocab);
        const double logits = t * v * x.ab;
        const std::uint64_t lid = x.act(aslot::logits);
        ops.push_back(elementwise(x, "sampling", 2 * t * v, logits, t * 4.0,
                                  {use(lid, logits), use(x.act(aslot::tokens), t * 4.0, true)}));
        return ops;
    }
    ops.push_back(linear_forward(x, lm_head_linear(hd)));
    retarget_weight(m, ops.back());
    const double t = static_cast<double>(hd.tokens), v = static_cast<double>(hd.v_p);
    const double logits = t * v * x.ab;
    const std::uint64_t lid = x.act(aslot::logits);
    if (training) {
        // Vocabulary-parallel cross-entropy: the softmax is kept (in place of
        // the logits) for the backward; three TP all-reduces of one float per
        // token (max, target logit, sum of exponentials).
        const CrossEntropyBytes cb = cross_entropy_bytes(opt, t * v, x.ab);
        Operator ce =
            elementwise(x, "cross_entropy", kSoftmaxFlops * t * v, cb.fwd_read + t * 4.0, cb.fwd_written + t * 4.0,
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
    const CrossEntropyBytes cb = cross_entropy_bytes(opt, t * v, x.ab);
    ops.push_back(elementwise(x, "cross_entropy_bwd", 2 * t * v, cb.bwd_read + t * 4.0, cb.bwd_written,
                              {use(lid, logits), use(flagged(lid, kGrad), logits, true)}));
    const Linear head = lm_head_linear(hd);
    ops.push_back(linear_dgrad(x, head));
    ops.push_back(linear_wgrad(x, head));
    retarget_weight(m, ops[ops.size() - 2]);
    retarget_weight(m, ops.back());
    const double ns = hd.norm_tokens * h * x.ab;
    ops.push_back(at_share(
        elementwise(
            x, "final_norm_bwd", 2 * x.norm_flops() * hd.norm_tokens * h, 2 * ns + x.norm_w, ns,
            {use(flagged(x.act(aslot::final_norm), kGrad), ns), use(x.act(aslot::resid, m.layers), ns),
             use(x.weight(wslot::final_norm), x.norm_w), use(flagged(x.act(aslot::resid, m.layers), kGrad), ns, true)}),
        x.o->memory_bound.norm_bwd));
    return ops;
}

}  // namespace sim::workload
