// Per-layer kernel sequences with exact FLOPs, bytes and shapes: the
// layer's linears, MLP, the layer in order (forward, backward, recompute,
// hidden dropout) and the public interface; the MoE block is moe_ops.cpp. The rules
// (and every formula) are listed in docs/workload-model.md. The shared
// builders are op_builders.*, the attention core attention_ops.cpp, the
// embedding and head embedding_head_ops.cpp.
#include "sim/workload/operators.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "sim/core/error.h"
#include "sim/workload/op_builders.h"

namespace sim::workload {
using namespace ops;

namespace {

// ---- the layer's linears -------------------------------------------------------

// The output projection: row-parallel. Its output gradient is the residual
// stream's after the attention branch (sequential) or after the whole layer
// (parallel).
Linear out_linear(const Dims& x) {
    const std::uint64_t residual = x.parallel ? x.act(aslot::resid, x.layer + 1) : x.act(aslot::resid_mid);
    // MLA decode with W_UV absorbed at load: W_UV_O (heads x kv_lora ->
    // hidden, under w_uv's slot) projects the core's latent output.
    const bool folded = x.absorbed && x.o->mla_absorbed_weights;
    const std::int64_t width = folded ? x.mla->kv_lora_rank : x.dout;
    Linear l = row_parallel_linear(
        x, "out_proj", folded ? wslot::w_uv : wslot::out, x.T, x.a_p * width, x.h,
        use(x.act(folded ? aslot::o_latent : aslot::attn), static_cast<double>(x.T * x.a_p * width) * x.ab),
        use(x.act(aslot::out_proj), full_act(x)), residual);
    l.has_bias = x.bias.out;  // added in the residual kernel
    return l;
}

// The dense MLP reads the second norm, or under the parallel block the one
// norm the attention reads too (its input gradient still gets its own buffer).
MlpIds dense_mlp_ids(const Dims& x) {
    MlpIds ids;
    ids.prefix = "mlp";
    ids.w_up = wslot::mlp_up;
    ids.w_down = wslot::mlp_down;
    ids.tokens = x.T;
    ids.in = x.act(x.parallel ? aslot::norm1 : aslot::norm2);
    ids.gate = x.act(aslot::gate);
    ids.up = x.act(aslot::up);
    ids.silu = x.act(aslot::silu);
    ids.act = x.act(aslot::act);
    ids.out = x.act(aslot::down);
    return ids;
}

// Outputs of the up GEMM: [gate | up] for SwiGLU, one tensor for GELU.
std::vector<TensorUse> up_outputs(const Dims& x, const MlpIds& ids, bool write) {
    const double f = static_cast<double>(ids.tokens * x.f_p) * x.ab;
    if (x.swiglu) return {use(ids.gate, f, write), use(ids.up, f, write)};
    return {use(ids.up, f, write)};
}

// The dense MLP is column-parallel up, row-parallel down; an expert's GEMMs
// have no TP collective of their own (the dispatch and combine carry them).
Linear mlp_up_linear(const Dims& x, const MlpIds& ids) {
    const std::string name = ids.prefix + "_up";
    const TensorUse in = use(ids.in, static_cast<double>(ids.tokens * x.h) * x.ab);
    const auto outs = up_outputs(x, ids, true);
    Linear l = ids.dense ? column_parallel_linear(x, name, ids.w_up, ids.tokens, x.h, x.fup_p, in, outs)
                         : plain_linear(name, ids.w_up, ids.tokens, x.h, x.fup_p, in, outs);
    // Under the parallel block it reads norm1's output but writes its input
    // gradient to norm2's slot (added to the attention's in norm1's backward).
    if (ids.dense && x.parallel)
        l.dx_writes = {TensorUse{partial_if_tp(x, flagged(x.act(aslot::norm2), kGrad)), in.size, true}};
    l.has_bias = x.bias.mlp;  // bias added by the activation kernel (or its own kernel when unfused)
    return l;
}

Linear mlp_down_linear(const Dims& x, const MlpIds& ids) {
    const std::string name = ids.prefix + "_down";
    const TensorUse act = use(ids.act, static_cast<double>(ids.tokens * x.f_p) * x.ab);
    const TensorUse out = use(ids.out, static_cast<double>(ids.tokens * x.h) * x.ab);
    if (!ids.dense) return plain_linear(name, ids.w_down, ids.tokens, x.f_p, x.h, act, {out});
    Linear l =
        row_parallel_linear(x, name, ids.w_down, ids.tokens, x.f_p, x.h, act, out, x.act(aslot::resid, x.layer + 1));
    l.has_bias = x.bias.mlp;
    return l;
}

// Bias (unfused) and activation between the up and down GEMMs.
void mlp_activation_forward(const Dims& x, const MlpIds& ids, std::vector<Operator>& ops) {
    const double n = static_cast<double>(ids.tokens * x.f_p);  // elements of the activation output
    const double f = n * x.ab;
    const double bias = x.bias.mlp ? static_cast<double>(x.fup_p) * x.wb : 0.0;
    const double up_elems = static_cast<double>(ids.tokens * x.fup_p);
    const auto ups = up_outputs(x, ids, false);
    if (!x.o->fuse_elementwise && x.bias.mlp) {
        std::vector<TensorUse> uses = ups;
        const auto w = up_outputs(x, ids, true);
        uses.insert(uses.end(), w.begin(), w.end());
        ops.push_back(elementwise(x, ids.prefix + "_bias_add", up_elems, up_elems * x.ab + bias, up_elems * x.ab,
                                  std::move(uses)));
    }
    const double fused_bias = x.o->fuse_elementwise ? bias : 0.0;
    const double fused_bias_flops = x.o->fuse_elementwise && x.bias.mlp ? up_elems : 0.0;
    const std::string bias_tag = x.o->fuse_elementwise && x.bias.mlp ? "bias_" : "";
    if (!x.swiglu) {
        ops.push_back(at_share(elementwise(x, ids.prefix + "_" + bias_tag + "gelu", kGeluFlops * n + fused_bias_flops,
                                           f + fused_bias, f, {use(ids.up, f), use(ids.act, f, true)}),
                               x.o->memory_bound.activation));
        return;
    }
    if (x.o->fuse_elementwise) {
        ops.push_back(
            at_share(elementwise(x, ids.prefix + "_" + bias_tag + "swiglu", (kSiluFlops + 1) * n + fused_bias_flops,
                                 2 * f + fused_bias, f, {use(ids.gate, f), use(ids.up, f), use(ids.act, f, true)}),
                     x.o->memory_bound.activation));
        return;
    }
    ops.push_back(
        at_share(elementwise(x, ids.prefix + "_silu", kSiluFlops * n, f, f, {use(ids.gate, f), use(ids.silu, f, true)}),
                 x.o->memory_bound.activation));
    ops.push_back(at_share(elementwise(x, ids.prefix + "_gate_mul", n, 2 * f, f,
                                       {use(ids.silu, f), use(ids.up, f), use(ids.act, f, true)}),
                           x.o->memory_bound.activation));
}

void mlp_activation_backward(const Dims& x, const MlpIds& ids, std::vector<Operator>& ops) {
    const double n = static_cast<double>(ids.tokens * x.f_p);
    const double f = n * x.ab;
    const std::uint64_t dact = flagged(ids.act, kGrad);
    if (!x.swiglu) {
        ops.push_back(at_share(elementwise(x, ids.prefix + "_gelu_bwd", 2 * kGeluFlops * n, 2 * f, f,
                                           {use(dact, f), use(ids.up, f), use(flagged(ids.up, kGrad), f, true)}),
                               x.o->memory_bound.activation_bwd));
        return;
    }
    if (x.o->fuse_elementwise) {
        ops.push_back(
            at_share(elementwise(x, ids.prefix + "_swiglu_bwd", 2 * (kSiluFlops + 1) * n, 3 * f, 2 * f,
                                 {use(dact, f), use(ids.gate, f), use(ids.up, f),
                                  use(flagged(ids.gate, kGrad), f, true), use(flagged(ids.up, kGrad), f, true)}),
                     x.o->memory_bound.activation_bwd));
        return;
    }
    ops.push_back(at_share(elementwise(x, ids.prefix + "_gate_mul_bwd", 2 * n, 3 * f, 2 * f,
                                       {use(dact, f), use(ids.silu, f), use(ids.up, f),
                                        use(flagged(ids.silu, kGrad), f, true), use(flagged(ids.up, kGrad), f, true)}),
                           x.o->memory_bound.activation_bwd));
    ops.push_back(at_share(
        elementwise(x, ids.prefix + "_silu_bwd", 2 * kSiluFlops * n, 2 * f, f,
                    {use(flagged(ids.silu, kGrad), f), use(ids.gate, f), use(flagged(ids.gate, kGrad), f, true)}),
        x.o->memory_bound.activation_bwd));
}

// ---- the layer -------------------------------------------------------------------

// Hidden dropout on a residual branch (`branch`, the out-projection or MLP
// output): bytes and FLOPs a fused residual kernel gains, or its own kernel
// when elementwise work is unfused.
struct HiddenDropout {
    double flops = 0, mask_bytes = 0;
};
HiddenDropout hidden_dropout_extra(const Dims& x) {
    if (x.p_hidden <= 0) return {};
    const double elems = x.Ts * static_cast<double>(x.h);
    return {kDropoutFlops * elems, elems};
}

void hidden_dropout_forward(const Dims& x, std::vector<Operator>& ops, const std::string& name, std::uint64_t branch,
                            int mask_slot) {
    const HiddenDropout d = hidden_dropout_extra(x);
    if (d.mask_bytes <= 0 || x.o->fuse_elementwise) return;
    const double xs = shard_act(x);
    ops.push_back(elementwise(x, name + "_dropout", d.flops, xs, xs + d.mask_bytes,
                              {use(branch, xs), use(branch, xs, true), use(x.act(mask_slot), d.mask_bytes, true)}));
}

// The backward of a hidden dropout: the branch gradient is the residual
// stream's gradient times mask / (1 - p).
void hidden_dropout_backward(const Dims& x, std::vector<Operator>& ops, const std::string& name,
                             std::uint64_t dresidual, std::uint64_t dbranch, int mask_slot) {
    const HiddenDropout d = hidden_dropout_extra(x);
    if (d.mask_bytes <= 0) return;
    const double xs = shard_act(x);
    ops.push_back(elementwise(x, name + "_dropout_bwd", d.mask_bytes, xs + d.mask_bytes, xs,
                              {use(dresidual, xs), use(x.act(mask_slot), d.mask_bytes), use(dbranch, xs, true)}));
}

// The attention block of the layer's kind, up to the output projection.
void attention_block_forward(const Dims& x, std::vector<Operator>& ops) {
    if (x.mla != nullptr) {
        mla_block_forward(x, ops);
    } else {
        gqa_block_forward(x, ops);
    }
}

void attention_block_backward(const Dims& x, std::vector<Operator>& ops, Recompute recompute) {
    if (x.mla != nullptr) {
        mla_block_backward(x, ops, recompute);
    } else {
        gqa_block_backward(x, ops, recompute);
    }
}

// The parallel block (GPT-J, PaLM): x + attn(norm(x)) + mlp(norm(x)). Both
// branches read the one norm and keep their own row-parallel reduction
// (parasim does not merge the two into one all-reduce); one kernel adds
// both branches (with their biases and dropouts, when fused) to the stream.
void parallel_forward_ops(const Dims& x, std::vector<Operator>& ops) {
    const double xs = shard_act(x);
    const double nf = x.norm_flops() * x.Ts * static_cast<double>(x.h);
    const double add = x.Ts * static_cast<double>(x.h);
    const double hb_out = x.bias.out ? static_cast<double>(x.h) * x.wb : 0.0;
    const double hb_mlp = x.bias.mlp ? static_cast<double>(x.h) * x.wb : 0.0;
    const bool fuse = x.o->fuse_elementwise;
    const std::uint64_t resid = x.act(aslot::resid), n1 = x.act(aslot::norm1);
    const std::uint64_t proj = x.act(aslot::out_proj), down = x.act(aslot::down),
                        next = x.act(aslot::resid, x.layer + 1);
    ops.push_back(at_share(elementwise(x, "norm1", nf, xs + x.norm_w, xs,
                                       {use(resid, xs), use(x.weight(wslot::norm1), x.norm_w), use(n1, xs, true)}),
                           x.o->memory_bound.norm));
    attention_block_forward(x, ops);
    ops.push_back(linear_forward(x, out_linear(x)));
    mlp_forward(x, dense_mlp_ids(x), ops);
    const HiddenDropout drop = hidden_dropout_extra(x);
    std::vector<TensorUse> uses{use(resid, xs), use(proj, xs), use(down, xs), use(next, xs, true)};
    if (!fuse) {
        if (x.bias.out)
            ops.push_back(
                elementwise(x, "out_proj_bias_add", add, xs + hb_out, xs, {use(proj, xs), use(proj, xs, true)}));
        hidden_dropout_forward(x, ops, "out_proj", proj, aslot::attn_drop_mask);
        if (x.bias.mlp)
            ops.push_back(
                elementwise(x, "mlp_down_bias_add", add, xs + hb_mlp, xs, {use(down, xs), use(down, xs, true)}));
        hidden_dropout_forward(x, ops, "mlp", down, aslot::mlp_drop_mask);
        ops.push_back(elementwise(x, "parallel_residual_add", 2 * add, 3 * xs, xs, std::move(uses)));
        return;
    }
    const double biases = (x.bias.out ? add : 0.0) + (x.bias.mlp ? add : 0.0);
    if (drop.mask_bytes > 0) {
        uses.push_back(use(x.act(aslot::attn_drop_mask), drop.mask_bytes, true));
        uses.push_back(use(x.act(aslot::mlp_drop_mask), drop.mask_bytes, true));
    }
    ops.push_back(elementwise(
        x, std::string(biases > 0 ? "bias_" : "") + (drop.mask_bytes > 0 ? "dropout_" : "") + "parallel_residual_add",
        2 * add + biases + 2 * drop.flops, 3 * xs + hb_out + hb_mlp, xs + 2 * drop.mask_bytes, std::move(uses)));
}

void forward_ops(const Dims& x, std::vector<Operator>& ops) {
    if (x.parallel) {
        parallel_forward_ops(x, ops);
        return;
    }
    const double xs = shard_act(x);
    const double nf = x.norm_flops() * x.Ts * static_cast<double>(x.h);
    const double add = x.Ts * static_cast<double>(x.h);                        // one add per element
    const double hb_out = x.bias.out ? static_cast<double>(x.h) * x.wb : 0.0;  // the row-parallel biases
    const double hb_mlp = x.bias.mlp ? static_cast<double>(x.h) * x.wb : 0.0;
    const bool fuse = x.o->fuse_elementwise;
    const std::uint64_t resid = x.act(aslot::resid), mid = x.act(aslot::resid_mid);
    const std::uint64_t n1 = x.act(aslot::norm1), n2 = x.act(aslot::norm2);

    ops.push_back(at_share(elementwise(x, "norm1", nf, xs + x.norm_w, xs,
                                       {use(resid, xs), use(x.weight(wslot::norm1), x.norm_w), use(n1, xs, true)}),
                           x.o->memory_bound.norm));
    attention_block_forward(x, ops);
    ops.push_back(linear_forward(x, out_linear(x)));
    // Residual (+ the out-projection's bias) and the second norm.
    const std::uint64_t proj = x.act(aslot::out_proj);
    const HiddenDropout drop = hidden_dropout_extra(x);
    const std::string drop_tag = drop.mask_bytes > 0 ? "dropout_" : "";
    if (fuse) {
        std::vector<TensorUse> uses{use(resid, xs), use(proj, xs), use(x.weight(wslot::norm2), x.norm_w),
                                    use(mid, xs, true), use(n2, xs, true)};
        if (drop.mask_bytes > 0) uses.push_back(use(x.act(aslot::attn_drop_mask), drop.mask_bytes, true));
        ops.push_back(at_share(elementwise(x, (x.bias.out ? "bias_" : "") + drop_tag + "residual_add_norm2",
                                           add * (x.bias.out ? 2 : 1) + nf + drop.flops, 2 * xs + hb_out + x.norm_w,
                                           2 * xs + drop.mask_bytes, std::move(uses)),
                               x.o->memory_bound.norm));
    } else {
        if (x.bias.out) {
            ops.push_back(
                elementwise(x, "out_proj_bias_add", add, xs + hb_out, xs, {use(proj, xs), use(proj, xs, true)}));
        }
        hidden_dropout_forward(x, ops, "out_proj", proj, aslot::attn_drop_mask);
        ops.push_back(
            elementwise(x, "residual_add1", add, 2 * xs, xs, {use(resid, xs), use(proj, xs), use(mid, xs, true)}));
        ops.push_back(at_share(elementwise(x, "norm2", nf, xs + x.norm_w, xs,
                                           {use(mid, xs), use(x.weight(wslot::norm2), x.norm_w), use(n2, xs, true)}),
                               x.o->memory_bound.norm));
    }
    if (x.m->is_moe_layer(x.layer)) {
        moe_forward(x, ops);
    } else if (x.o->dp_dense_gather > 1) {
        // Data-parallel attention, SGLang's default dense layout (docs/moe.md
        // section 8b): every DP rank's tokens gathered, the MLP over the engine.
        const Dims g = dp_gathered_dims(x, x.o->dp_dense_gather);
        const std::size_t first = ops.size();
        mlp_forward(g, dense_mlp_ids(g), ops);
        set_engine_syncs(g, ops, first);
    } else {
        mlp_forward(x, dense_mlp_ids(x), ops);
    }
    const std::uint64_t down = x.act(aslot::down), next = x.act(aslot::resid, x.layer + 1);
    const bool bias_here = x.bias.mlp && !x.m->is_moe_layer(x.layer);  // experts carry no shared output bias
    if (!fuse && bias_here) {
        ops.push_back(elementwise(x, "mlp_down_bias_add", add, xs + hb_mlp, xs, {use(down, xs), use(down, xs, true)}));
    }
    const bool fused_bias = fuse && bias_here;
    if (!fuse) hidden_dropout_forward(x, ops, "mlp", down, aslot::mlp_drop_mask);
    const bool fused_drop = fuse && drop.mask_bytes > 0;
    std::vector<TensorUse> uses{use(mid, xs), use(down, xs), use(next, xs, true)};
    if (fused_drop) uses.push_back(use(x.act(aslot::mlp_drop_mask), drop.mask_bytes, true));
    ops.push_back(
        elementwise(x, std::string(fused_bias ? "bias_" : "") + (fused_drop ? "dropout_" : "") + "residual_add2",
                    add * (fused_bias ? 2 : 1) + (fused_drop ? drop.flops : 0.0), 2 * xs + (fused_bias ? hb_mlp : 0.0),
                    xs + (fused_drop ? drop.mask_bytes : 0.0), std::move(uses)));
}

// Backward of a norm, followed by (or fused with) the addition of the
// residual branch's gradient; under the parallel block also the MLP
// branch's share of the norm's output gradient (`dnorm_mlp`, 0: none).
void norm_backward(const Dims& x, std::vector<Operator>& ops, const std::string& name, int weight, std::uint64_t dnorm,
                   std::uint64_t input, std::uint64_t dresidual, std::uint64_t dinput, std::uint64_t dnorm_mlp = 0) {
    const double xs = shard_act(x);
    const double nf = 2 * x.norm_flops() * x.Ts * static_cast<double>(x.h);
    const double add = x.Ts * static_cast<double>(x.h);
    if (x.o->fuse_elementwise) {
        std::vector<TensorUse> uses{use(dnorm, xs), use(input, xs), use(x.weight(weight), x.norm_w), use(dresidual, xs),
                                    use(dinput, xs, true)};
        if (dnorm_mlp != 0) uses.insert(uses.begin() + 1, use(dnorm_mlp, xs));
        ops.push_back(at_share(elementwise(x, name + "_bwd_residual_add", nf + add + (dnorm_mlp != 0 ? add : 0.0),
                                           3 * xs + x.norm_w + (dnorm_mlp != 0 ? xs : 0.0), xs, std::move(uses)),
                               x.o->memory_bound.norm_bwd));
        return;
    }
    if (dnorm_mlp != 0) {
        ops.push_back(elementwise(x, name + "_branch_grad_add", add, 2 * xs, xs,
                                  {use(dnorm, xs), use(dnorm_mlp, xs), use(dnorm, xs, true)}));
    }
    const std::uint64_t tmp = flagged(x.act(aslot::norm_grad), kGrad);
    ops.push_back(
        at_share(elementwise(x, name + "_bwd", nf, 2 * xs + x.norm_w, xs,
                             {use(dnorm, xs), use(input, xs), use(x.weight(weight), x.norm_w), use(tmp, xs, true)}),
                 x.o->memory_bound.norm_bwd));
    ops.push_back(elementwise(x, name + "_residual_grad_add", add, 2 * xs, xs,
                              {use(tmp, xs), use(dresidual, xs), use(dinput, xs, true)}));
}

void backward_ops(const Dims& x, std::vector<Operator>& ops, Recompute recompute) {
    if (recompute == Recompute::full) {
        std::vector<Operator> fwd;
        forward_ops(x, fwd);
        for (auto& op : fwd) {
            op.kernel.name = "recompute_" + op.kernel.name;
            // The kept dispatched tokens and combined output stand in for the exchange (docs/moe.md 3c).
            if (!x.o->moe.recompute_exchange) {
                op.ep_a2a_bytes = Bytes{0};
                op.ep_probs_a2a_bytes = Bytes{0};
                op.ep_count_gather_bytes = Bytes{0};
                op.etp_gather_bytes = Bytes{0};  // the gathered tokens are what is kept
                op.etp_scatter_bytes = Bytes{0};
                op.tpep_meta_gather_bytes = Bytes{0};
                op.tpep_gather_bytes = Bytes{0};
                op.tpep_scatter_bytes = Bytes{0};
            }
            ops.push_back(std::move(op));
        }
    }
    const std::uint64_t dnext = flagged(x.act(aslot::resid, x.layer + 1), kGrad);
    const std::uint64_t dmid = flagged(x.act(aslot::resid_mid), kGrad);
    hidden_dropout_backward(x, ops, "mlp", dnext, flagged(x.act(aslot::down), kGrad), aslot::mlp_drop_mask);
    if (x.m->is_moe_layer(x.layer)) {
        moe_backward(x, ops);
    } else {
        mlp_backward(x, dense_mlp_ids(x), ops);
    }
    // The attention branch's output gradient: after the second norm
    // (sequential) or the layer's own (parallel, no second norm).
    const std::uint64_t dbranch = x.parallel ? dnext : dmid;
    if (!x.parallel)
        norm_backward(x, ops, "norm2", wslot::norm2, flagged(x.act(aslot::norm2), kGrad), x.act(aslot::resid_mid),
                      dnext, dmid);
    hidden_dropout_backward(x, ops, "out_proj", dbranch, flagged(x.act(aslot::out_proj), kGrad), aslot::attn_drop_mask);
    const Linear out = out_linear(x);
    ops.push_back(linear_dgrad(x, out));
    ops.push_back(linear_wgrad(x, out));
    attention_block_backward(x, ops, recompute);
    norm_backward(x, ops, "norm1", wslot::norm1, flagged(x.act(aslot::norm1), kGrad), x.act(aslot::resid), dbranch,
                  flagged(x.act(aslot::resid), kGrad), x.parallel ? flagged(x.act(aslot::norm2), kGrad) : 0);
}

void check_layer(const ModelSpec& m, std::int64_t layer) {
    // The multi-token-prediction modules' layers follow the model's own (mtp_ops.cpp).
    if (layer < 0 || layer >= m.layers + m.mtp_layers) {
        throw InternalError(fmt::format("layer {} is outside model '{}' ({} layers)", layer, m.name, m.layers));
    }
}

}  // namespace

// ---- MLPs the MoE layer shares (op_builders.h; moe_ops.cpp) ---------------------

MlpIds ops::expert_mlp_ids(const Dims& x, std::int64_t e, std::int64_t tokens) {
    const int base = aslot::expert + 8 * static_cast<int>(e);
    MlpIds ids;
    ids.prefix = "expert";
    ids.w_up = wslot::expert + 2 * static_cast<int>(e);
    ids.w_down = ids.w_up + 1;
    ids.tokens = tokens;
    ids.in = x.act(base);
    ids.gate = x.act(base + 1);
    ids.up = x.act(base + 2);
    ids.silu = x.act(base + 3);
    ids.act = x.act(base + 4);
    ids.out = x.act(base + 5);
    ids.dense = false;
    return ids;
}

// The shared experts as one MLP in the expert slot after the local ones;
// they read the (gathered) norm output directly, on every token.
MlpIds ops::shared_mlp_ids(const Dims& x, std::int64_t slot) {
    MlpIds ids = expert_mlp_ids(x, slot, x.T);
    ids.prefix = "shared_expert";
    ids.in = gathered_if_sp(x, x.act(aslot::norm2));
    return ids;
}

// One MLP's kernels: up, activation, down (forward); the down and up GEMM
// pairs around the activation backward (backward). For the dense MLP, each
// routed expert and the shared experts alike.
void ops::mlp_forward(const Dims& x, const MlpIds& ids, std::vector<Operator>& ops) {
    ops.push_back(linear_forward(x, mlp_up_linear(x, ids)));
    mlp_activation_forward(x, ids, ops);
    ops.push_back(linear_forward(x, mlp_down_linear(x, ids)));
}

void ops::mlp_backward(const Dims& x, const MlpIds& ids, std::vector<Operator>& ops) {
    const Linear down = mlp_down_linear(x, ids), up = mlp_up_linear(x, ids);
    ops.push_back(linear_dgrad(x, down));
    ops.push_back(linear_wgrad(x, down));
    mlp_activation_backward(x, ids, ops);
    ops.push_back(linear_dgrad(x, up));
    ops.push_back(linear_wgrad(x, up));
}

// ---- public interface -----------------------------------------------------------

std::uint64_t weight_tensor_id(std::int64_t layer, int which) { return encode(IdKind::weight, layer, which, 0); }
std::uint64_t activation_tensor_id(std::int64_t layer, int which, std::int64_t microbatch) {
    return encode(IdKind::activation, layer, which, microbatch);
}
std::uint64_t kv_tensor_id(std::int64_t layer, std::int64_t microbatch) {
    return encode(IdKind::kv, layer, 0, microbatch);
}

std::int64_t heads_per_shard(const ModelSpec& m, int tp) {
    if (tp < 1 || m.heads % tp != 0) {
        throw ModelError(fmt::format("model '{}': tensor-parallel degree {} does not divide its {} attention heads",
                                     m.name, tp, m.heads));
    }
    return m.heads / tp;
}

std::int64_t kv_heads_per_shard(const ModelSpec& m, int tp) {
    if (tp >= 1 && m.kv_heads % tp == 0) return m.kv_heads / tp;
    if (tp >= 1 && tp % m.kv_heads == 0) return 1;  // each KV head replicated on tp / kv_heads shards
    throw ModelError(fmt::format("model '{}': tensor-parallel degree {} and its {} KV heads do not divide one another",
                                 m.name, tp, m.kv_heads));
}

hw::DType activation_dtype(const Precision& p) {
    switch (p.compute) {
        case DType::fp32:
        case DType::tf32: return DType::fp32;
        case DType::fp16: return DType::fp16;
        case DType::bf16: return DType::bf16;
        case DType::fp8:
        case DType::int8:
        case DType::fp6:
        case DType::nvfp4:
        case DType::mxfp4: return p.weights == DType::fp16 ? DType::fp16 : DType::bf16;
    }
    return DType::bf16;
}

hw::AttentionKernel attention_kernel_of(AttentionImpl a) {
    switch (a) {
        case AttentionImpl::flash3: return hw::AttentionKernel::best;
        case AttentionImpl::cudnn: return hw::AttentionKernel::cudnn;
        case AttentionImpl::triton: return hw::AttentionKernel::triton;
        case AttentionImpl::flash1:
        case AttentionImpl::flash2:
        case AttentionImpl::xformers:
        case AttentionImpl::naive: return hw::AttentionKernel::flash2;
    }
    return hw::AttentionKernel::best;
}

void apply_stack_fp8_gemm(hw::KernelDesc& k, double ceiling, bool grouped_dense) {
    if (k.kind != KernelKind::gemm || k.dtype != DType::fp8) return;
    k.ceiling = ceiling;
    k.grouped_dense_ceiling = grouped_dense;
}

namespace {
// Fused attention kernels run as the options' implementation, and FP8 GEMMs
// at the stack's FP8 ceiling where it has its own, grouped ones as its family's.
std::vector<Operator> with_attention_kernel(std::vector<Operator> ops, const OperatorOptions& opt) {
    for (auto& op : ops) {
        if (op.kernel.kind == KernelKind::attention) op.kernel.attention_kernel = opt.attention_kernel;
        apply_stack_fp8_gemm(op.kernel, opt.fp8_gemm_ceiling, opt.fp8_grouped_gemm_dense);
    }
    return ops;
}

// Low-precision (FP8) training: the activations and their gradients are
// stored in BF16, so each GEMM operand that is an activation or an
// activation gradient is quantized first. Transformer Engine runs a fused
// cast-transpose kernel: it reads the BF16 tensor once and writes two FP8
// copies, row-wise for this GEMM and column-wise (transposed) for the weight
// gradient, because Hopper's FP8 GEMMs take only K-major operands
// (docs/workload-model.md, "FP8 training"). The operand is M x K of a
// forward or input-gradient GEMM; weight-gradient GEMMs read the transposed
// copies already made, and weights are cast once per step (left out).
std::vector<Operator> with_low_precision_casts(std::vector<Operator> ops, const OperatorOptions& opt) {
    if (opt.inference || !hw::is_low_precision(opt.precision.compute)) return ops;
    const double ab = hw::bytes_per_element(activation_dtype(opt.precision));
    const double qb = hw::bytes_per_element(opt.precision.compute);
    std::vector<Operator> out;
    out.reserve(ops.size() * 2);
    for (auto& op : ops) {
        const hw::KernelDesc& k = op.kernel;
        if (k.kind == KernelKind::gemm && k.dtype == opt.precision.compute && !op.is_weight_grad) {
            const double elems = static_cast<double>(k.m) * static_cast<double>(k.k) *
                                 static_cast<double>(std::max<std::int64_t>(1, k.batch));
            if (op.input_quantized) {
                out.push_back(make_op(k.name + "_transpose", KernelKind::elementwise, opt.precision.compute, 0,
                                      elems * qb, elems * qb, {}));
            } else {
                out.push_back(make_op(k.name + "_cast_transpose", KernelKind::elementwise,
                                      activation_dtype(opt.precision), elems, elems * ab, 2 * elems * qb, {}));
            }
        }
        out.push_back(std::move(op));
    }
    return out;
}

// Inference with a stack that quantizes FP8 GEMM inputs in a kernel of their
// own (OperatorOptions::fp8_input_quant_group; docs/moe.md section 7b): vLLM's
// block-FP8 linear layer runs per_token_group_quant_fp8 on its BF16 input
// before every GEMM. One kernel per FP8 GEMM of the layer, on its m x batch
// rows of k; none before a GEMM that reads rows already quantized (the routed
// experts' up GEMM: moe_ops.cpp quantizes the tokens once before the
// dispatch) and none before the router's, whose weight the checkpoint keeps
// in BF16 (vLLM's gate has no quantization).
std::vector<Operator> with_input_quant(std::vector<Operator> ops, const OperatorOptions& opt, std::int64_t layer) {
    if (!opt.inference || opt.fp8_input_quant_group <= 0) return ops;
    const std::uint64_t router = weight_tensor_id(layer, ops::wslot::router);
    const DType act = activation_dtype(opt.precision);
    std::vector<Operator> out;
    out.reserve(ops.size() * 2);
    for (auto& op : ops) {
        const hw::KernelDesc& k = op.kernel;
        const bool reads_router =
            std::any_of(k.tensors.begin(), k.tensors.end(), [router](const TensorUse& u) { return u.id == router; });
        if (k.kind == KernelKind::gemm && k.dtype == DType::fp8 && !op.input_quantized && !reads_router) {
            const double rows = static_cast<double>(k.m) * static_cast<double>(std::max<std::int64_t>(1, k.batch));
            out.push_back(ops::fp8_group_quant(k.name + "_quant", act, rows, k.k, opt.fp8_input_quant_group));
        }
        out.push_back(std::move(op));
    }
    return out;
}
}  // namespace

std::vector<Operator> layer_forward(const ModelSpec& m, std::int64_t layer, std::int64_t microbatch,
                                    const PassShape& shape, const OperatorOptions& opt) {
    check_layer(m, layer);
    const Dims x = make_dims(m, layer, microbatch, shape, opt);
    std::vector<Operator> ops;
    forward_ops(x, ops);
    return with_attention_kernel(with_input_quant(with_low_precision_casts(std::move(ops), opt), opt, layer), opt);
}

std::vector<Operator> layer_backward(const ModelSpec& m, std::int64_t layer, std::int64_t microbatch,
                                     const PassShape& shape, const OperatorOptions& opt, Recompute recompute) {
    check_layer(m, layer);
    const Dims x = make_dims(m, layer, microbatch, shape, opt);
    std::vector<Operator> ops;
    backward_ops(x, ops, recompute);
    return with_attention_kernel(with_low_precision_casts(std::move(ops), opt), opt);
}

TrainingStateBytes training_state_bytes_per_param(const OperatorOptions& opt) {
    TrainingStateBytes s;
    s.weights = hw::bytes_per_element(opt.precision.weights);
    s.gradients = grad_bytes(opt.precision);
    const bool fp32_weights = opt.precision.weights == DType::fp32 || opt.precision.weights == DType::tf32;
    s.optimizer = 8.0 + (fp32_weights ? 0.0 : 4.0);
    return s;
}

Operator optimizer_step(double params, const OperatorOptions& opt, double bytes_per_param) {
    if (bytes_per_param > 0) {
        // The cost model times an elementwise kernel on read + written bytes,
        // so the even split does not change its time.
        const double half = params * bytes_per_param / 2;
        return make_op("adam_step", KernelKind::elementwise, DType::fp32, kAdamFlops * params, half, half, {});
    }
    const TrainingStateBytes s = training_state_bytes_per_param(opt);
    const bool master = s.optimizer > 8.0;
    // Reads the gradient, the FP32 state (master, m, v) and, without a master
    // copy, the weights; writes the state and the working-precision weights.
    return make_op("adam_step", KernelKind::elementwise, DType::fp32, kAdamFlops * params,
                   params * (s.gradients + s.optimizer + (master ? 0.0 : s.weights)),
                   params * (s.optimizer + s.weights), {});
}

Operator gradient_shard_passes(double params, int passes, double grad_bytes, double reduce_bytes) {
    if (passes <= 0) return make_op("grad_shard_passes", KernelKind::elementwise, DType::bf16, 0, 0, 0, {});
    // The cast to a wider (or narrower) reduce dtype is one more pass: it
    // reads the gradient as computed and writes the copy that is reduced.
    const bool cast = reduce_bytes != grad_bytes;
    const double later = (passes - 1) * reduce_bytes;
    const double read = params * (grad_bytes + (cast ? grad_bytes : 0.0) + later);
    const double written = params * (grad_bytes + (cast ? reduce_bytes : 0.0) + later);
    return make_op("grad_shard_passes", KernelKind::elementwise, DType::bf16, (passes + (cast ? 1 : 0)) * params, read,
                   written, {});
}

std::vector<Operator> gradient_bucket_prologue(double params, double reduce_bytes, bool nan_check, bool scale) {
    std::vector<Operator> ops;
    const double bucket = params * reduce_bytes;
    // torch.norm(p=2): a multiply and an add per element, one read.
    if (nan_check)
        ops.push_back(make_op("grad_nan_check", KernelKind::elementwise, DType::fp32, 2 * params, bucket, 0, {}));
    if (scale) ops.push_back(make_op("grad_scale", KernelKind::elementwise, DType::fp32, params, bucket, bucket, {}));
    // `assert not norm.isnan()` reads the norm on the host: what it issues
    // next waits for the norm (with no scale, the wait is put before the
    // norm itself; the GPU idles the same issue time either way).
    if (nan_check) ops.back().kernel.host_sync = true;
    return ops;
}

double total_flops(const std::vector<Operator>& ops) {
    double f = 0;
    for (const auto& op : ops) f += op.kernel.flops.value;
    return f;
}

double training_hardware_flops_per_token(const ModelSpec& m, std::int64_t seq_len, const OperatorOptions& opt,
                                         Recompute recompute) {
    const PassShape shape{1, seq_len, seq_len};
    OperatorOptions o = opt;
    o.inference = false;
    o.tp = 1;  // the whole model's FLOPs: no shard replicates or splits anything
    o.cp = 1;
    o.sequence_parallel = false;
    const double layer =
        total_flops(layer_forward(m, 0, 0, shape, o)) + total_flops(layer_backward(m, 0, 0, shape, o, recompute));
    const double ends = total_flops(embedding_forward(m, 0, shape, o)) +
                        total_flops(embedding_backward(m, 0, shape, o)) +
                        total_flops(head_forward(m, 0, shape, o, true)) + total_flops(head_backward(m, 0, shape, o));
    return (static_cast<double>(m.layers) * layer + ends) / static_cast<double>(seq_len);
}

}  // namespace sim::workload
