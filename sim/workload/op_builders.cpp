// The shared operator builders (see op_builders.h): pass dimensions,
// kernel constructors and the three GEMMs of a weight.
#include "sim/workload/op_builders.h"

#include <algorithm>
#include <utility>

namespace sim::workload::ops {

double grad_bytes(const Precision& p) {
    const double w = hw::bytes_per_element(p.weights);
    return w >= 2 ? w : 2.0;
}

Dims make_dims(const ModelSpec& m, std::int64_t layer, std::int64_t mb, const PassShape& s, const OperatorOptions& o) {
    if (o.tp < 1) throw ModelError(fmt::format("tensor-parallel degree {} must be at least 1", o.tp));
    if (s.batch < 1 || s.new_tokens < 1 || s.context < s.new_tokens) {
        throw ModelError(
            fmt::format("pass shape batch {} new_tokens {} context {}: need batch >= 1, new_tokens >= 1 "
                        "and context >= new_tokens",
                        s.batch, s.new_tokens, s.context));
    }
    if (o.cp < 1) throw ModelError(fmt::format("context-parallel degree {} must be at least 1", o.cp));
    if (o.cp > 1) {
        if (o.inference || s.context != s.new_tokens)
            throw ModelError(fmt::format("context parallelism (cp={}) is modelled for training passes only", o.cp));
        if (s.new_tokens % (2 * o.cp) != 0)
            throw ModelError(
                fmt::format("context parallelism: {} tokens per sequence do not split into 2 x cp = {} chunks",
                            s.new_tokens, 2 * o.cp));
        if (!o.flash_attention)
            throw ModelError(fmt::format("context parallelism (cp={}) needs flash attention (ring attention)", o.cp));
    }
    if (m.is_mla() && !o.flash_attention) {
        // FlashMLA / FlashAttention kernels are how MLA runs; an unfused
        // attention with a value width other than its key width is not modelled.
        throw ModelError(
            fmt::format("model '{}': multi-head latent attention needs a fused attention kernel "
                        "(flash_attention: true)",
                        m.name));
    }
    if (m.block == BlockLayout::parallel && m.experts > 0) {
        throw ModelError(fmt::format("model '{}': the parallel block with experts is not modelled", m.name));
    }
    if (m.experts > kMaxExperts)  // the loaders bound it; a model built in code may not
        throw ModelError(
            fmt::format("model '{}': {} experts; tensor ids hold at most {}", m.name, m.experts, kMaxExperts));
    Dims x;
    x.m = &m;
    x.o = &o;
    x.s = s;
    x.layer = layer;
    x.mb = mb;
    x.p = o.tp;
    x.a_p = heads_per_shard(m, o.tp);
    x.g_p = kv_heads_per_shard(m, o.tp);
    x.d = m.head_dim;
    x.h = m.hidden;
    x.swiglu = m.ffn_kind == FfnKind::swiglu;
    x.f_p = ceil_div(m.ffn, x.p);
    x.fup_p = x.swiglu ? 2 * x.f_p : x.f_p;
    x.cp = o.cp;
    x.T = s.batch * s.new_tokens / x.cp;
    x.sp = o.sequence_parallel && x.p > 1;
    x.Ts = x.sp ? static_cast<double>(x.T) / static_cast<double>(x.p) : static_cast<double>(x.T);
    x.act_dt = activation_dtype(o.precision);
    x.gemm_dt = o.precision.compute;
    const bool low = hw::is_low_precision(o.precision.compute);
    x.attn_dt = low ? x.act_dt : o.precision.compute;
    x.ab = hw::bytes_per_element(x.act_dt);
    x.in_b = std::min(x.ab, hw::bytes_per_element(o.precision.compute));
    x.wb = hw::bytes_per_element(o.precision.weights);
    x.gb = grad_bytes(o.precision);
    x.kv_mode = o.inference || s.context > s.new_tokens;
    x.kb = x.kv_mode ? hw::bytes_per_element(o.precision.kv) : x.ab;
    x.bias = m.bias;
    x.parallel = m.block == BlockLayout::parallel;
    x.norm_w = static_cast<double>(m.norm == NormKind::layernorm ? 2 * m.hidden : m.hidden) * x.wb;
    if (!o.inference && !x.kv_mode) {
        x.p_hidden = o.dropout.hidden;
        x.p_attention = o.dropout.attention;
    }
    set_attention_core(x);
    return x;
}

void set_attention_core(Dims& x) {
    x.mla = x.m->mla();
    if (x.mla == nullptr) {
        x.dq = x.dv = x.dout = x.d;
        x.kv_row = 2 * x.d;
        x.kv_from_cache = x.kv_mode;
        return;
    }
    const MlaAttention& a = *x.mla;
    x.dout = a.v_head_dim;
    // Tokens that attend a cache (decode, chunked prefill) take the absorbed
    // path over the latent: one shared "KV head" whose key is the latent and
    // rope key and whose value is the latent (DeepSeek-V2 section 2.1.3,
    // FlashMLA). A whole prompt (and training) expands per-head keys and
    // values from the latent and runs the core on them.
    x.absorbed = x.s.context > x.s.new_tokens;
    if (x.absorbed) {
        x.g_p = 1;
        x.dq = a.cache_width();
        x.dv = a.kv_lora_rank;
        x.kv_row = a.cache_width();
        x.kv_from_cache = true;
        x.q_slot = aslot::q_absorbed;
        x.o_slot = aslot::o_latent;
    } else {
        x.g_p = x.a_p;
        x.dq = a.qk_head_dim();
        x.dv = a.v_head_dim;
        x.kv_row = x.dq + x.dv;
        x.kv_from_cache = false;
        x.kb = x.ab;  // expanded K and V are activations; the cache gets the latent
    }
}

// ---- operator builders --------------------------------------------------------

TensorUse use(std::uint64_t id, double bytes, bool write) { return TensorUse{id, Bytes::ceil(bytes), write}; }

Operator make_op(std::string name, KernelKind kind, DType dt, double flops, double read, double written,
                 std::vector<TensorUse> tensors) {
    Operator op;
    op.kernel.name = std::move(name);
    op.kernel.kind = kind;
    op.kernel.dtype = dt;
    op.kernel.flops = Flops{flops};
    op.kernel.bytes_read = Bytes::ceil(read);
    op.kernel.bytes_written = Bytes::ceil(written);
    op.kernel.tensors = std::move(tensors);
    return op;
}

Operator elementwise(const Dims& x, std::string name, double flops, double read, double written,
                     std::vector<TensorUse> tensors) {
    return make_op(std::move(name), KernelKind::elementwise, x.act_dt, flops, read, written, std::move(tensors));
}

Operator at_share(Operator op, double share) {
    op.kernel.hbm_share = share;
    return op;
}

Operator gemm(std::string name, DType dt, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
              double read, double written, std::vector<TensorUse> tensors) {
    Operator op = make_op(
        std::move(name), KernelKind::gemm, dt,
        2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch),
        read, written, std::move(tensors));
    op.kernel.m = m;
    op.kernel.n = n;
    op.kernel.k = k;
    op.kernel.batch = batch;
    return op;
}

Operator fp8_group_quant(std::string name, DType act, double rows, std::int64_t width, std::int64_t group) {
    const double elems = rows * static_cast<double>(width);
    const double scales = rows * static_cast<double>(ceil_div(width, group));
    return make_op(std::move(name), KernelKind::elementwise, act, kQuantFlops * elems,
                   elems * hw::bytes_per_element(act),
                   elems * hw::bytes_per_element(DType::fp8) + scales * kQuantScaleBytes, {});
}

void set_sync(const Dims& x, Operator& op, TpSync sync, double bytes) {
    if (x.p <= 1 || sync == TpSync::none) return;
    op.tp_sync = sync;
    op.tp_sync_bytes = Bytes::ceil(bytes);
}

Dims dp_gathered_dims(const Dims& x, int ranks) {
    Dims g = x;
    g.s.batch = x.s.batch * ranks;
    g.T = x.T * ranks;
    g.p = x.p * ranks;
    g.f_p = ceil_div(x.m->ffn, g.p);
    g.fup_p = g.swiglu ? 2 * g.f_p : g.f_p;
    g.sp = false;
    g.Ts = static_cast<double>(g.T);
    return g;
}

void set_engine_syncs(const Dims& g, std::vector<Operator>& ops, std::size_t first) {
    if (first >= ops.size()) return;
    for (std::size_t k = first; k < ops.size(); ++k) ops[k].tp_sync = TpSync::none;
    const bool sum_len = g.s.new_tokens > 1;
    const Bytes full = Bytes::ceil(full_act(g));
    ops[first].engine_before = sum_len ? EngineSync::all_reduce : EngineSync::all_gather;
    ops[first].engine_before_bytes = full;
    ops.back().engine_after = sum_len ? EngineSync::all_reduce : EngineSync::reduce_scatter;
    ops.back().engine_after_bytes = full;
}

// ---- linears by tensor-parallel layout ---------------------------------------

namespace {
TensorUse as_write(const TensorUse& u) { return TensorUse{u.id, u.size, true}; }
TensorUse as_read(const TensorUse& u) { return TensorUse{u.id, u.size, false}; }
}  // namespace

Linear plain_linear(std::string name, int weight, std::int64_t tokens, std::int64_t in, std::int64_t out,
                    const TensorUse& input, const std::vector<TensorUse>& outputs) {
    Linear l;
    l.name = std::move(name);
    l.weight = weight;
    l.tokens = tokens;
    l.in = in;
    l.out = out;
    l.x_reads = {as_read(input)};
    for (const auto& u : outputs) l.y_writes.push_back(as_write(u));
    l.dy_reads = grads_of(outputs, false);
    l.dx_writes = {TensorUse{flagged(input.id, kGrad), input.size, true}};
    return l;
}

Linear replicated_linear(const Dims& x, std::string name, int weight, std::int64_t tokens, std::int64_t in,
                         std::int64_t out, const TensorUse& input, const std::vector<TensorUse>& outputs) {
    Linear l = plain_linear(std::move(name), weight, tokens, in, out, input, outputs);
    l.x_reads = {TensorUse{gathered_if_sp(x, input.id), input.size, false}};
    return l;
}

Linear column_parallel_linear(const Dims& x, std::string name, int weight, std::int64_t tokens, std::int64_t in,
                              std::int64_t out, const TensorUse& input, const std::vector<TensorUse>& outputs) {
    Linear l = replicated_linear(x, std::move(name), weight, tokens, in, out, input, outputs);
    l.dx_writes = {TensorUse{partial_if_tp(x, flagged(input.id, kGrad)), input.size, true}};
    l.fwd_sync = x.sp ? TpSync::before_column_parallel : TpSync::none;
    l.dgrad_sync = TpSync::after_column_input_grad;
    l.wgrad_sync = x.sp ? TpSync::before_column_parallel : TpSync::none;
    l.sync_bytes = input.size.as_double();
    return l;
}

Linear row_parallel_linear(const Dims& x, std::string name, int weight, std::int64_t tokens, std::int64_t in,
                           std::int64_t out, const TensorUse& input, const TensorUse& output, std::uint64_t residual) {
    Linear l = plain_linear(std::move(name), weight, tokens, in, out, input, {});
    l.y_writes = {TensorUse{partial_if_tp(x, output.id), output.size, true}};
    l.dy_reads = {TensorUse{gathered_if_sp(x, flagged(residual, kGrad)), output.size, false}};
    l.fwd_sync = TpSync::after_row_parallel;
    l.dgrad_sync = x.sp ? TpSync::before_column_parallel : TpSync::none;
    l.sync_bytes = output.size.as_double();
    return l;
}

double weight_bytes(const Dims& x, const Linear& l) {
    return static_cast<double>(l.in) * static_cast<double>(l.out) * x.wb;
}

Operator linear_forward(const Dims& x, const Linear& l) {
    const double t = static_cast<double>(l.tokens);
    const double bias = l.bias_in_gemm ? static_cast<double>(l.out) * x.wb : 0.0;
    std::vector<TensorUse> uses = l.x_reads;
    uses.push_back(use(x.weight(l.weight), weight_bytes(x, l)));
    uses.insert(uses.end(), l.y_writes.begin(), l.y_writes.end());
    const double y = l.y_bytes >= 0 ? l.y_bytes : t * static_cast<double>(l.out) * x.ab;
    Operator op = gemm(l.name, x.gemm_dt, l.tokens, l.out, l.in, 1,
                       t * static_cast<double>(l.in) * x.in_b + weight_bytes(x, l) + bias, y, std::move(uses));
    op.kernel.epilogue_read = Bytes::ceil(bias);
    set_sync(x, op, l.fwd_sync, l.sync_bytes);
    return op;
}

Operator linear_dgrad(const Dims& x, const Linear& l) {
    const double t = static_cast<double>(l.tokens);
    std::vector<TensorUse> uses = l.dy_reads;
    uses.push_back(use(x.weight(l.weight), weight_bytes(x, l)));
    uses.insert(uses.end(), l.dx_writes.begin(), l.dx_writes.end());
    Operator op = gemm(l.name + "_dgrad", x.gemm_dt, l.tokens, l.in, l.out, 1,
                       t * static_cast<double>(l.out) * x.in_b + weight_bytes(x, l),
                       t * static_cast<double>(l.in) * x.ab, std::move(uses));
    set_sync(x, op, l.dgrad_sync, l.sync_bytes);
    return op;
}

Operator linear_wgrad(const Dims& x, const Linear& l) {
    const double t = static_cast<double>(l.tokens);
    const double g = static_cast<double>(l.in) * static_cast<double>(l.out) * x.gb;
    const double bias_g = l.has_bias ? static_cast<double>(l.out) * x.gb : 0.0;
    std::vector<TensorUse> uses = l.x_reads;
    uses.insert(uses.end(), l.dy_reads.begin(), l.dy_reads.end());
    uses.push_back(use(weight_tensor_id(x.layer, l.weight | kGrad), g, true));
    Operator op = gemm(l.name + "_wgrad", x.gemm_dt, l.in, l.out, l.tokens, 1,
                       t * static_cast<double>(l.in + l.out) * x.in_b + g + bias_g, g + bias_g, std::move(uses));
    op.kernel.epilogue_read = Bytes::ceil(g + bias_g);  // dW (and db) accumulated: read once, not per tile
    op.is_weight_grad = true;
    set_sync(x, op, l.wgrad_sync, l.sync_bytes);
    return op;
}

std::vector<TensorUse> grads_of(const std::vector<TensorUse>& uses, bool write) {
    std::vector<TensorUse> out;
    for (const auto& u : uses) out.push_back(TensorUse{flagged(u.id, kGrad), u.size, write});
    return out;
}

}  // namespace sim::workload::ops
