// The mixture-of-experts block of a layer (docs/moe.md, docs/workload-model.md
// section 5): router, top-k, token dispatch, the straggler rank's experts
// (one GEMM each or grouped), shared experts, combine, and the backward;
// under expert parallelism the all-to-alls that precede the experts and the
// combine. Token counts come from moe.h.
#include <string>
#include <utility>
#include <vector>

#include "sim/workload/moe_allgather_ops.h"
#include "sim/workload/op_builders.h"

namespace sim::workload::ops {

namespace {

constexpr double kGateBytes = 4.0;   // a routed token's gate weight (FP32) moved with it
constexpr double kScoreBytes = 4.0;  // a routing score (FP32) of one token and expert
constexpr double kCountBytes = 8.0;  // a rank's token count for one expert (int64)
constexpr double kFp32Bytes = 4.0;   // an FP32 element (the router's copies under router_fp32)

// The dimensions of an MLP of `ffn` intermediate size (an expert's moe_ffn,
// or the shared experts' together) split over `split` GPUs: tp for the
// shared experts as for the dense MLP, etp for the routed experts.
Dims expert_dims(const Dims& x, std::int64_t ffn, std::int64_t split) {
    Dims e = x;
    e.f_p = ceil_div(ffn, split);
    e.fup_p = x.swiglu ? 2 * e.f_p : e.f_p;
    return e;
}

// The routed experts' split: etp (= x.p, the layer's tp, when etp = tp).
Dims routed_expert_dims(const Dims& x) { return expert_dims(x, x.m->expert_ffn(), x.o->expert_tp()); }

// Whether each TP rank routes its own tokens (docs/moe.md section 1a): always
// with etp < tp (MoE parallel folding) and under the allgather dispatcher
// (section 3l); with etp = tp > 1 too when Megatron-Core's alltoall
// dispatcher runs it with ep > 1 (MoEAlltoAllTokenDispatcher exchanges the
// rank's tokens over the EP group, then all-gathers them over the
// expert-TP group, here the TP group): its sequence-parallel shard, or,
// without sequence parallelism, all T tokens, which its TP peers hold too,
// so the gather hands each expert shard tp copies of each (MoeShape::etp).
// moe_alltoall_metadata is set exactly for that dispatcher (the profile's
// moe_dispatcher alltoall). Other dispatchers (DeepEP, auto) and ep = 1 keep
// the layer's own TP (docs/moe.md section 3).
bool routes_own_shard(const Dims& x) { return x.o->routes_own_shard(); }

// The dimensions the routed part of an MoE layer runs on: the layer's own
// (the tokens gathered over the TP group before the router, the experts
// split over tp), or, when a rank routes its own tokens, its T / tp under
// sequence parallelism (else T) sent to their experts over an EP group
// that spans TP ranks: no TP all-gather before the router and no
// reduce-scatter or all-reduce after the combine (the expert-TP group's,
// when etp > 1, are the experts' own: MoeShape; the allgather dispatcher's
// are over etp x ep ranks: AllGatherShape).
Dims routed_dims(const Dims& x) {
    if (!routes_own_shard(x)) return x;
    Dims m = x;
    m.T = x.sp ? ceil_div(x.T, x.p) : x.T;
    m.Ts = static_cast<double>(m.T);
    m.p = 1;
    m.sp = false;
    return m;
}

// The shared experts' dimensions: the layer's (its tokens, split over its
// TP group; folded, they gather and reduce-scatter over it themselves), or,
// folded under OperatorOptions::shared_experts_whole, whole (p = 1) on the
// routed part's own tokens x, with no collective (SGLang under DeepEP;
// docs/moe.md section 8b).
Dims shared_dims(const Dims& layer, const Dims& x, bool folded) {
    const std::int64_t ffn = layer.m->shared_experts * layer.m->expert_ffn();
    if (folded && x.o->shared_experts_whole) return expert_dims(x, ffn, 1);
    return expert_dims(layer, ffn, layer.p);
}

// The tokens each local expert of the straggler EP rank computes (all
// experts when ep == 1), and the all-to-all bytes per rank (moe.h).
struct MoeShape {
    std::vector<std::int64_t> local;  // tokens per local expert of the hot rank
    double a2a = 0;                   // combine (and dispatch backward) all-to-all bytes per rank (0 without EP)
    double to_experts = 0;            // dispatch (and combine backward): a2a, or FP8 with its scales
    // Folded expert tensor parallelism etp > 1 (docs/moe.md section 1a): the
    // all-gather over the expert-TP group after the exchange into the
    // experts and the reduce-scatter before the exchange out of them, both
    // of the hot rank's gathered tokens (full size); 0 otherwise.
    double gathered_in = 0;    // tokens x hidden x (dispatch bytes per element)
    double scattered_out = 0;  // tokens x hidden x activation bytes
    std::int64_t etp = 1;      // the expert-TP ranks that share the hot rank's tokens (1 without the gather)
};

// With etp = 1, or the layer's own TP, the EP group of ep ranks routes T
// tokens a rank. Folded with etp > 1 (Megatron-Core's MoEAlltoAllTokenDispatcher) each of the
// etp x ep ranks of an EP group and its expert-TP peers routes its own
// T_r = x.T tokens, and the all-gather over the expert-TP group hands every
// shard of an expert the tokens of all etp x ep of them: the load is the
// EP group's with etp x T_r tokens a rank, of which each rank received
// 1 / etp by its own all-to-all.
// Without sequence parallelism (`sp` false) the etp peers route the same
// T_r = T tokens: the EP group routes ep x T distinct ones, each rank
// receives the hot rank's whole load, and the gather hands every shard etp
// copies of it (`copies`).
MoeShape moe_shape(const Dims& x, bool folded, bool sp) {
    const std::int64_t etp = folded ? x.o->expert_tp() : 1;
    const std::int64_t copies = folded && !sp ? etp : 1;
    ExpertLoad load = expert_load(x.m->experts, x.m->top_k, x.o->ep, (etp / copies) * x.T, x.o->moe, x.layer);
    for (std::int64_t& n : load.hot_local) n *= copies;
    load.hot_tokens *= copies;
    const double to_experts = x.o->fp8_dispatch ? kFp8DispatchBytesPerElement : x.ab;
    ExpertLoad received = load;
    received.hot_tokens = ceil_div(load.hot_tokens, etp);
    MoeShape ms{load.hot_local, all_to_all_bytes(received, x.o->ep, x.h, x.ab),
                all_to_all_bytes(received, x.o->ep, x.h, to_experts)};
    ms.etp = etp;
    if (etp > 1) {
        const double rows = static_cast<double>(load.hot_tokens) * static_cast<double>(x.h);
        ms.gathered_in = rows * to_experts;
        ms.scattered_out = rows * x.ab;
    }
    return ms;
}

// Merges the same kernel of every local expert into one grouped kernel
// (Megatron's grouped GEMM): FLOPs, bytes and tensors summed; a GEMM keeps
// its fixed dimensions and takes the mean of the one that varies (tokens:
// m of a forward or input-gradient GEMM, k of a weight-gradient GEMM) as
// its size, with one batch element per expert (docs/moe.md, "Grouped GEMM").
Operator merge_grouped(const std::vector<const Operator*>& parts) {
    Operator op = *parts.front();
    auto& k = op.kernel;
    k.name = "grouped_" + k.name;
    const bool tokens_in_k = op.is_weight_grad;
    std::int64_t varying = tokens_in_k ? k.k : k.m;
    for (std::size_t i = 1; i < parts.size(); ++i) {
        const auto& q = parts[i]->kernel;
        k.flops = Flops{k.flops.value + q.flops.value};
        k.bytes_read += q.bytes_read;
        k.bytes_written += q.bytes_written;
        k.epilogue_read += q.epilogue_read;
        k.tensors.insert(k.tensors.end(), q.tensors.begin(), q.tensors.end());
        varying += tokens_in_k ? q.k : q.m;
    }
    if (k.kind == KernelKind::gemm) {
        const auto g = static_cast<std::int64_t>(parts.size());
        (tokens_in_k ? k.k : k.m) = ceil_div(varying, g);
        k.batch = g;
        k.grouped = true;
    }
    return op;
}

// The experts' kernels: each expert's in order (sequential experts), or the
// same kernel of every expert merged (grouped GEMM).
void append_experts(const Dims& x, const std::vector<std::vector<Operator>>& per_expert, std::vector<Operator>& ops) {
    if (per_expert.empty()) return;
    if (!x.o->moe.grouped_gemm) {
        for (const auto& e : per_expert) ops.insert(ops.end(), e.begin(), e.end());
        return;
    }
    for (std::size_t j = 0; j < per_expert.front().size(); ++j) {
        std::vector<const Operator*> parts;
        for (const auto& e : per_expert) parts.push_back(&e[j]);
        ops.push_back(merge_grouped(parts));
    }
}

// Marks the all-to-all that must precede `op` (expert parallelism).
void precede_by_all_to_all(Operator& op, double bytes) {
    if (bytes > 0) op.ep_a2a_bytes = Bytes::ceil(bytes);
}

// Megatron-Core's alltoall dispatcher with more than one local expert
// (docs/moe.md section 3f): the received tokens arrive grouped by source
// rank and are re-sorted by local expert (sort_chunks_by_idxs, or with token
// dropping a transpose copy), and the experts' output is sorted back before
// the combine; the backward runs the mirror images. One memory pass over the
// straggler's received tokens (read and written once, with a gate weight
// each in the forward sort), reading the experts' input or output slices.
bool sorts_chunks(const Dims& x, const MoeShape& ms) {
    return x.o->moe_sort_chunks && x.o->ep > 1 && ms.local.size() > 1;
}

// The routing metadata of Megatron-Core's alltoall dispatcher (docs/moe.md
// section 3g; megatron/core/transformer/moe/token_dispatcher.py,
// MoEAlltoAllTokenDispatcher): the permuted gate weights follow the tokens in
// an all-to-all of their own (global_probs), and their gradients come back
// by its backward; without a capacity factor (dropless) the ranks first
// all-gather how many tokens each sends to each expert, to size the
// exchange. Latency-bound collectives: a few bytes a token.
bool sends_metadata(const Dims& x) { return x.o->moe_alltoall_metadata && x.o->ep > 1; }

// Whether the dispatcher moves the gate weights with the tokens (the
// alltoall dispatcher). Megatron-Core 0.9 applies them at the source rank
// after the combine (moe_utils.py unpermute), so only the later
// dispatchers, which apply them at the experts, move them.
bool carries_probs(const Dims& x) { return x.o->moe_alltoall_metadata && !x.o->moe_permute_unfused; }
// ... and exchanges them over the EP group.
bool sends_probs(const Dims& x) { return sends_metadata(x) && carries_probs(x); }

// A rank receives 1 / etp of the hot rank's gathered tokens by its own all-to-all.
Bytes probs_a2a_bytes(const MoeShape& ms) {
    std::int64_t tokens = 0;
    for (const std::int64_t n : ms.local) tokens += n;
    return Bytes::ceil(static_cast<double>(ceil_div(tokens, ms.etp)) * kGateBytes);
}

// The gate weights ride with the tokens through the expert-TP all-gather
// (and their gradients through its backward's reduce-scatter) when the
// dispatcher sends them (Megatron-Core gathers global_probs beside
// global_input_tokens; one collective here, two there).
double gathered_probs_bytes(const Dims& x, const MoeShape& ms) {
    if (ms.etp <= 1 || !carries_probs(x)) return 0;
    double tokens = 0;
    for (const std::int64_t n : ms.local) tokens += static_cast<double>(n);
    return tokens * kGateBytes;
}

// The expert-TP all-gather of a folded etp > 1 after the exchange into the
// experts (zero bytes otherwise: none).
void gather_over_expert_tp(Operator& op, double bytes) {
    if (bytes > 0) op.etp_gather_bytes = Bytes::ceil(bytes);
}
// The exchange out of the experts (combine, or dispatch backward) before
// `op`, with the expert-TP reduce-scatter of a folded etp > 1 (`scatter`
// bytes; zero otherwise) that precedes it
// (Emitter::emit_ops issues the scatter, then the all-to-all, on the
// operator that carries both).
void exchange_back_before(Operator& op, const MoeShape& ms, double scatter) {
    precede_by_all_to_all(op, ms.a2a);
    if (scatter > 0) op.etp_scatter_bytes = Bytes::ceil(scatter);
}

// The all-gather's output: every EP rank's count for every expert.
Bytes count_gather_bytes(const Dims& x) {
    if (x.o->moe.capacity_factor > 0) return Bytes{0};
    return Bytes::ceil(static_cast<double>(x.o->ep) * static_cast<double>(x.m->experts) * kCountBytes);
}

// The routing kernels past the one the model charges each way
// (OperatorOptions::moe_router_kernels, moe_router_bwd_kernels; docs/moe.md
// section 3i): `kernels - 1` passes, each reading and writing the FP32
// scores of every token and expert, an upper bound for the narrower ones
// (a token's k picks, an expert's count) whose time is their launch.
void append_router_kernels(const Dims& x, const std::string& name, int kernels, std::vector<Operator>& ops) {
    const double scores = static_cast<double>(x.T) * static_cast<double>(x.m->experts);
    for (int i = 1; i < kernels; ++i)
        ops.push_back(elementwise(x, name + std::to_string(i), scores, scores * kScoreBytes, scores * kScoreBytes, {}));
}

// `pick` names the tensor of each local expert the pass reads (its input or
// output, or their gradients); `per_token` bytes ride along with each token
// (the FP32 gate weight the forward sort moves with it).
template <class Pick>
Operator sort_chunks(const Dims& x, const Dims& xe, const MoeShape& ms, std::string name, double per_token, Pick pick) {
    double tokens = 0;
    std::vector<TensorUse> uses;
    for (std::size_t e = 0; e < ms.local.size(); ++e) {
        const std::int64_t n = ms.local[e];
        if (n == 0) continue;
        tokens += static_cast<double>(n);
        const MlpIds ids = expert_mlp_ids(xe, static_cast<std::int64_t>(e), n);
        uses.push_back(use(pick(ids), static_cast<double>(n) * static_cast<double>(x.h) * x.ab));
    }
    const double bytes = tokens * (static_cast<double>(x.h) * x.ab + per_token);
    return elementwise(x, std::move(name), 0, bytes, bytes, std::move(uses));
}

// The router: a replicated weight on the gathered norm output, which it
// gathers under SP (the dispatch reads the gathered copy after it). Its
// input gradient accumulates into the one the dispatch backward produced
// (after its TP reduction).
Linear router_linear(const Dims& x) {
    Linear l =
        replicated_linear(x, "router", wslot::router, x.T, x.h, x.m->experts, use(x.act(aslot::norm2), full_act(x)),
                          {use(x.act(aslot::router), static_cast<double>(x.T * x.m->experts) * x.ab)});
    l.fwd_sync = x.sp ? TpSync::before_column_parallel : TpSync::none;
    l.sync_bytes = full_act(x);
    return l;
}

// Bytes per element of the router's logits (and their gradient): FP32 when
// the router runs in FP32, else the activations'.
double logit_bytes(const Dims& x) { return x.o->moe.router_fp32 ? kFp32Bytes : x.ab; }

// Megatron-Core's Router.gating under --moe-router-dtype fp32 (docs/moe.md
// section 3i; megatron/core/transformer/moe/router.py at 64cb6bd7 and
// d98e8a64): `linear(input.to(fp32), weight.to(fp32))`, so two casts (the
// tokens, T x h, and the weight, E x h, into FP32 copies that autograd keeps
// for the backward) and a GEMM on FP32 operands, which cuBLAS runs on TF32
// tensor cores under the NGC containers (TORCH_ALLOW_TF32_CUBLAS_OVERRIDE),
// writing FP32 logits. Under sequence parallelism without own-shard routing
// the cast reads the gathered input, so the all-gather moves before it.
void append_router_fp32_forward(const Dims& x, std::vector<Operator>& ops) {
    const double T = static_cast<double>(x.T), h = static_cast<double>(x.h), E = static_cast<double>(x.m->experts);
    const double in32 = T * h * kFp32Bytes, w32 = E * h * kFp32Bytes, y = T * E * kFp32Bytes;
    Operator cast = elementwise(
        x, "router_input_cast", 0, full_act(x), in32,
        {use(gathered_if_sp(x, x.act(aslot::norm2)), full_act(x)), use(x.act(aslot::router_in32), in32, true)});
    set_sync(x, cast, x.sp ? TpSync::before_column_parallel : TpSync::none, full_act(x));
    ops.push_back(std::move(cast));
    ops.push_back(elementwise(x, "router_weight_cast", 0, E * h * x.wb, w32,
                              {use(x.weight(wslot::router), E * h * x.wb), use(x.act(aslot::router_w32), w32, true)}));
    ops.push_back(gemm("router", DType::tf32, x.T, x.m->experts, x.h, 1, in32 + w32, y,
                       {use(x.act(aslot::router_in32), in32), use(x.act(aslot::router_w32), w32),
                        use(x.act(aslot::router), y, true)}));
}

// Its backward: the input gradient in FP32 from the saved weight copy, cast
// back to the activations' dtype (the cast's autograd) and added to the
// input gradient the dispatch backward produced (autograd's accumulation);
// the weight copy's gradient in FP32 from the saved input copy, cast back
// to the weight gradient's dtype and accumulated into it.
void append_router_fp32_backward(const Dims& x, std::vector<Operator>& ops) {
    const double T = static_cast<double>(x.T), h = static_cast<double>(x.h), E = static_cast<double>(x.m->experts);
    const double in32 = T * h * kFp32Bytes, w32 = E * h * kFp32Bytes, dy = T * E * kFp32Bytes;
    const std::uint64_t dlogits = flagged(x.act(aslot::router), kGrad),
                        dx32 = flagged(x.act(aslot::router_in32), kGrad);
    ops.push_back(gemm("router_dgrad", DType::tf32, x.T, x.h, x.m->experts, 1, dy + w32, in32,
                       {use(dlogits, dy), use(x.act(aslot::router_w32), w32), use(dx32, in32, true)}));
    ops.push_back(elementwise(x, "router_input_grad_cast", 0, in32, full_act(x), {use(dx32, in32)}));
    ops.push_back(elementwise(x, "router_input_grad_add", T * h, 2 * full_act(x), full_act(x),
                              {use(flagged(x.act(aslot::norm2), kGrad), full_act(x), true)}));
    Operator wgrad = gemm("router_wgrad", DType::tf32, x.h, x.m->experts, x.T, 1, in32 + dy, w32,
                          {use(x.act(aslot::router_in32), in32), use(dlogits, dy),
                           use(flagged(x.act(aslot::router_w32), kGrad), w32, true)});
    wgrad.is_weight_grad = true;
    ops.push_back(std::move(wgrad));
    const double g = E * h * x.gb;
    Operator cast = elementwise(x, "router_weight_grad_cast", 0, w32 + g, g,
                                {use(weight_tensor_id(x.layer, wslot::router | kGrad), g, true)});
    cast.is_weight_grad = true;
    ops.push_back(std::move(cast));
}

// The router's backward: the top-k's, the stack's further routing kernels,
// and the router GEMM's input and weight gradients.
void append_router_backward(const Dims& x, std::vector<Operator>& ops) {
    const double T = static_cast<double>(x.T), k = static_cast<double>(x.m->top_k);
    const double e_bytes = T * static_cast<double>(x.m->experts) * logit_bytes(x);
    ops.push_back(elementwise(x, "router_topk_bwd", 2 * kSoftmaxFlops * T * static_cast<double>(x.m->experts),
                              e_bytes + T * k * 4.0, e_bytes,
                              {use(x.act(aslot::router), e_bytes), use(flagged(x.act(aslot::topk), kGrad), T * k * 4.0),
                               use(flagged(x.act(aslot::router), kGrad), e_bytes, true)}));
    append_router_kernels(x, "moe_router_bwd_step_", x.o->moe_router_bwd_kernels, ops);
    if (x.o->moe.router_fp32) {
        append_router_fp32_backward(x, ops);
        return;
    }
    const Linear router = router_linear(x);
    ops.push_back(linear_dgrad(x, router));
    ops.back().kernel.bytes_read += Bytes::ceil(full_act(x));  // beta = 1: reads the gradient it adds to
    ops.push_back(linear_wgrad(x, router));
}

}  // namespace

// Under expert parallelism the permuted tokens go to the EP rank holding
// their expert (dispatch all-to-all) and come back before the combine; the
// experts computed here are the straggler rank's local experts.
void moe_forward(const Dims& layer, std::vector<Operator>& ops) {
    // x: the routed part's dimensions; the shared experts keep the layer's
    // tensor parallelism (Megatron-Core's SharedExpertMLP uses the TP group).
    const Dims x = routed_dims(layer);
    const bool folded = x.p != layer.p;
    const bool ag = x.o->moe_allgather;
    const AllGatherShape g = ag ? allgather_shape(x, layer.sp) : AllGatherShape{};
    MoeShape ms = ag ? MoeShape{} : moe_shape(x, folded, layer.sp);
    if (ag) ms.local = g.local;
    const Dims xe = routed_expert_dims(x);
    const double T = static_cast<double>(x.T), k = static_cast<double>(x.m->top_k);
    const double E = static_cast<double>(x.m->experts), h = static_cast<double>(x.h);
    const bool quantize_once = x.o->fp8_dispatch && !x.o->inference && hw::is_low_precision(x.o->precision.compute);
    if (x.o->moe.router_fp32) {
        append_router_fp32_forward(x, ops);
    } else {
        ops.push_back(linear_forward(x, router_linear(x)));
    }
    const double idx = T * k * 8.0;  // expert index (int32) and gate weight (fp32) per routed token
    const double logits = T * E * logit_bytes(x);
    ops.push_back(elementwise(x, "router_topk", kSoftmaxFlops * T * E, logits, idx,
                              {use(x.act(aslot::router), logits), use(x.act(aslot::topk), idx, true)}));
    // Group-limited top-k (expert groups) as a stack runs it in several
    // kernels (OperatorOptions::grouped_topk_kernels; docs/moe.md section 7b):
    // each further kernel charged a pass over FP32 scores of every expert, an
    // upper bound for the narrower ones (group scores, the k picked).
    if (x.m->expert_groups > 1)
        for (int i = 1; i < x.o->grouped_topk_kernels; ++i)
            ops.push_back(elementwise(x, "router_topk_" + std::to_string(i), T * E, T * E * kScoreBytes,
                                      T * E * kScoreBytes, {}));
    // vLLM's fused MoE quantizes the tokens once for its up GEMM, which
    // gathers each routed copy's FP8 row (OperatorOptions::fp8_input_quant_group).
    const bool quant_tokens = x.o->inference && x.o->fp8_input_quant_group > 0 && x.gemm_dt == hw::DType::fp8;
    append_router_kernels(x, "moe_router_step_", x.o->moe_router_kernels, ops);
    if (quant_tokens) ops.push_back(fp8_group_quant("moe_input_quant", x.act_dt, T, x.h, x.o->fp8_input_quant_group));
    const auto slice = [&](std::int64_t tokens) { return static_cast<double>(tokens) * h * x.ab; };
    std::vector<TensorUse> dispatch{use(gathered_if_sp(x, x.act(aslot::norm2)), full_act(x)),
                                    use(x.act(aslot::topk), idx)};
    std::vector<std::vector<Operator>> experts;
    std::vector<TensorUse> combine{use(x.act(aslot::topk), idx)};
    for (std::size_t e = 0; e < ms.local.size(); ++e) {
        const std::int64_t n = ms.local[e];
        if (n == 0) continue;
        const MlpIds ids = expert_mlp_ids(xe, static_cast<std::int64_t>(e), n);
        dispatch.push_back(use(ids.in, slice(n), true));
        std::vector<Operator> eo;
        mlp_forward(xe, ids, eo);
        eo.front().input_quantized = quantize_once || quant_tokens;  // the up projection reads the dispatched FP8 rows
        experts.push_back(std::move(eo));
        combine.push_back(use(ids.out, slice(n)));
    }
    if (quantize_once) {
        // FP8 dispatch in training (docs/moe.md 3b): each token is quantized
        // once, before the exchange (1 byte an element and a scale per 128),
        // not once per routed copy at its expert.
        const double q = T * h * kFp8DispatchBytesPerElement;
        ops.push_back(elementwise(x, "moe_dispatch_quant", T * h, full_act(x), q,
                                  {use(gathered_if_sp(x, x.act(aslot::norm2)), full_act(x))}));
    }
    if (ag) {
        // Gathered over the etp x ep ranks before the selection: the routing
        // map and gate weights of every expert (one collective here, two in
        // the code), then the tokens.
        dispatch.erase(dispatch.begin(), dispatch.begin() + 2);  // reads the gathered rows, not the own tokens
        ops.push_back(allgather_permute(x, g, std::move(dispatch)));
        if (g.group > 1) {
            const double rows = static_cast<double>(g.rows);
            ops.back().tpep_meta_gather_bytes = Bytes::ceil(rows * E * (1.0 + x.ab));
            ops.back().tpep_gather_bytes = Bytes::ceil(rows * h * x.ab);
        }
    } else {
        ops.push_back(elementwise(x, "moe_dispatch", 0, full_act(x) + idx, T * k * h * x.ab, std::move(dispatch)));
    }
    if (sends_metadata(x)) {
        ops.back().ep_count_gather_bytes = count_gather_bytes(x);
        // Dropless, the dispatcher copies the counts to the host and waits
        // for them before it sizes the exchange (docs/moe.md section 3i).
        ops.back().kernel.host_sync = ops.back().ep_count_gather_bytes > Bytes{0};
    }
    // Shared experts: every token, on this GPU, before the exchange (no
    // overlap with it is modelled); their output joins the combine. Folded,
    // they gather the layer's tokens over TP and reduce-scatter their output
    // themselves, unless they are whole (p = 1, shared_dims): then none.
    if (x.m->shared_experts > 0) {
        const Dims xs = shared_dims(layer, x, folded);
        const MlpIds ids = shared_mlp_ids(xs, static_cast<std::int64_t>(ms.local.size()));
        const std::size_t first = ops.size();
        mlp_forward(xs, ids, ops);
        if (folded && xs.p > 1) {
            if (layer.sp) set_sync(layer, ops[first], TpSync::before_column_parallel, full_act(layer));
            set_sync(layer, ops.back(), TpSync::after_row_parallel, full_act(layer));
        }
        combine.push_back(use(ids.out, full_act(x)));
    }
    const bool sorts = sorts_chunks(x, ms);
    const std::size_t first_expert = ops.size();
    if (sorts)
        ops.push_back(sort_chunks(x, xe, ms, "moe_sort_chunks", kGateBytes, [](const MlpIds& i) { return i.in; }));
    append_experts(xe, experts, ops);
    if (ops.size() > first_expert) {
        precede_by_all_to_all(ops[first_expert], ms.to_experts);
        if (sends_probs(x)) ops[first_expert].ep_probs_a2a_bytes = probs_a2a_bytes(ms);
        gather_over_expert_tp(ops[first_expert], ms.gathered_in + gathered_probs_bytes(x, ms));
    }
    if (sorts) ops.push_back(sort_chunks(x, xe, ms, "moe_unsort_chunks", 0, [](const MlpIds& i) { return i.out; }));
    if (ag) {
        // Every gathered row's output, reduce-scattered back to its owner
        // over the etp x ep ranks (summing the expert-TP partial sums and a
        // token's experts on other EP ranks); the shared experts' output is
        // added after.
        combine.push_back(use(x.act(aslot::down), static_cast<double>(g.rows) * h * x.ab, true));
        ops.push_back(allgather_unpermute(x, g, std::move(combine)));
        if (g.group > 1) ops.back().tpep_scatter_bytes = Bytes::ceil(static_cast<double>(g.rows) * h * x.ab);
        if (x.m->shared_experts > 0) ops.push_back(allgather_add_shared(x, "moe_ag_add_shared"));
        return;
    }
    const double routed = T * k * h * x.ab;  // every routed copy of a token, tokens x k x hidden
    const bool unfused = x.o->moe_permute_unfused;
    std::vector<TensorUse> sum_uses{use(partial_if_tp(x, x.act(aslot::down)), full_act(x), true)};
    if (unfused) {
        // Megatron-Core 0.9's unpermute (moe_utils.py, moe_scatter and
        // unpermute) after the exchange back: a zero-filled buffer of the
        // routed copies, the scatter-add of the received copies into it (read,
        // and the buffer read and written), their product with the gate
        // weights; moe_combine below is the sum over each token's k copies.
        Operator zero = elementwise(x, "moe_unpermute_zero", 0, 0, routed, {});
        exchange_back_before(zero, ms, ms.scattered_out);
        ops.push_back(std::move(zero));
        ops.push_back(elementwise(x, "moe_unpermute_scatter", T * k * h, 2 * routed + idx, routed, std::move(combine)));
        ops.push_back(elementwise(x, "moe_unpermute_weight", T * k * h, routed + T * k * x.ab, routed, {}));
    } else {
        sum_uses.insert(sum_uses.begin(), combine.begin(), combine.end());
    }
    Operator op = elementwise(x, "moe_combine", (unfused ? 1 : 2) * T * k * h, routed + (unfused ? 0 : idx),
                              full_act(x), std::move(sum_uses));
    if (!unfused) exchange_back_before(op, ms, ms.scattered_out);
    ops.push_back(std::move(op));
    // A stack that scales the routed output and adds the shared experts' in
    // kernels of their own (OperatorOptions::shared_expert_combine_kernels;
    // docs/moe.md section 7b): the first reads the combined output, each
    // further one it and the shared output; each writes tokens x hidden.
    if (x.m->shared_experts > 0)
        for (int i = 0; i < x.o->shared_expert_combine_kernels; ++i)
            ops.push_back(elementwise(x, "moe_shared_combine_" + std::to_string(i), T * h,
                                      (i == 0 ? 1.0 : 2.0) * full_act(x), full_act(x), {}));
    set_sync(x, ops.back(), TpSync::after_row_parallel, full_act(x));
}

void moe_backward(const Dims& layer, std::vector<Operator>& ops) {
    const Dims x = routed_dims(layer);  // as in moe_forward
    const bool folded = x.p != layer.p;
    const bool ag = x.o->moe_allgather;
    const AllGatherShape g = ag ? allgather_shape(x, layer.sp) : AllGatherShape{};
    MoeShape ms = ag ? MoeShape{} : moe_shape(x, folded, layer.sp);
    if (ag) ms.local = g.local;
    const Dims xe = routed_expert_dims(x);
    const double T = static_cast<double>(x.T), k = static_cast<double>(x.m->top_k);
    const double E = static_cast<double>(x.m->experts), h = static_cast<double>(x.h);
    const double idx = T * k * 8.0;
    const auto slice = [&](std::int64_t tokens) { return static_cast<double>(tokens) * h * x.ab; };
    const std::uint64_t dy = gathered_if_sp(x, flagged(x.act(aslot::resid, x.layer + 1), kGrad));
    // Combine backward: each expert's output gradient, and the gate-weight gradient.
    std::vector<TensorUse> cb{use(dy, full_act(x)), use(x.act(aslot::topk), idx)};
    for (std::size_t i = 0; i < ms.local.size(); ++i) {
        if (ms.local[i] == 0) continue;
        const MlpIds ids = expert_mlp_ids(xe, static_cast<std::int64_t>(i), ms.local[i]);
        cb.push_back(use(ids.out, slice(ms.local[i])));
        cb.push_back(use(flagged(ids.out, kGrad), slice(ms.local[i]), true));
    }
    std::vector<TensorUse> db;
    std::vector<std::vector<Operator>> experts;
    for (std::size_t i = ms.local.size(); i-- > 0;) {
        const std::int64_t n = ms.local[i];
        if (n == 0) continue;
        const MlpIds ids = expert_mlp_ids(xe, static_cast<std::int64_t>(i), n);
        std::vector<Operator> eo;
        mlp_backward(xe, ids, eo);
        experts.push_back(std::move(eo));
        db.push_back(use(flagged(ids.in, kGrad), slice(n)));
    }
    cb.push_back(use(flagged(x.act(aslot::topk), kGrad), T * k * 4.0, true));
    const double routed = T * k * h * x.ab;  // as in moe_forward
    const bool unfused = x.o->moe_permute_unfused;
    if (ag) {
        // The output gradient of every gathered row, all-gathered over the
        // etp x ep ranks (the reduce-scatter's backward), then the selected rows'.
        cb.erase(cb.begin() + 1);  // no routing indices: the map is the gathered one
        ops.push_back(allgather_unpermute_bwd(x, g, std::move(cb)));
        if (g.group > 1) ops.back().tpep_gather_bytes = Bytes::ceil(static_cast<double>(g.rows) * h * x.ab);
    } else if (unfused) {
        // Megatron-Core 0.9's unpermute backward (autograd of the forward's
        // product, sum and moe_scatter): the gradient broadcast over the k
        // copies times the gate weights, the same times the saved weighted
        // copies and its sum over hidden (the gate weights' gradient), then
        // the scatter's backward, a gather (moe_combine_bwd below), whose
        // output goes back over the exchange. The tensors' uses are all
        // charged to the gather.
        Operator tokens = elementwise(x, "moe_unpermute_bwd_tokens", T * k * h, full_act(x) + T * k * x.ab, routed, {});
        if (x.sp) set_sync(x, tokens, TpSync::before_column_parallel, full_act(x));
        ops.push_back(std::move(tokens));
        ops.push_back(elementwise(x, "moe_unpermute_bwd_probs", T * k * h, full_act(x) + routed, routed, {}));
        ops.push_back(elementwise(x, "moe_unpermute_bwd_probs_sum", T * k * h, routed, T * k * x.ab, {}));
        ops.push_back(elementwise(x, "moe_combine_bwd", 0, routed + idx, routed, std::move(cb)));
    } else {
        Operator combine_bwd = elementwise(x, "moe_combine_bwd", 3 * T * k * h, full_act(x) + 2 * routed + idx,
                                           routed + T * k * 4.0, std::move(cb));
        if (x.sp) set_sync(x, combine_bwd, TpSync::before_column_parallel, full_act(x));
        ops.push_back(std::move(combine_bwd));
    }
    if (x.m->shared_experts > 0) {
        const Dims xs = shared_dims(layer, x, folded);
        const MlpIds ids = shared_mlp_ids(xs, static_cast<std::int64_t>(ms.local.size()));
        const std::size_t first = ops.size();
        mlp_backward(xs, ids, ops);
        if (folded && xs.p > 1) {
            // Gather the output gradient over TP; reduce-scatter the input
            // gradient (the up projection's dgrad, before its wgrad).
            if (layer.sp) set_sync(layer, ops[first], TpSync::before_column_parallel, full_act(layer));
            set_sync(layer, ops[ops.size() - 2], TpSync::after_column_input_grad, full_act(layer));
        }
        db.push_back(use(flagged(ids.in, kGrad), full_act(x)));
    }
    const bool sorts = sorts_chunks(x, ms);
    const std::size_t first_expert = ops.size();
    if (sorts)
        ops.push_back(
            sort_chunks(x, xe, ms, "moe_unsort_chunks_bwd", 0, [](const MlpIds& i) { return flagged(i.out, kGrad); }));
    append_experts(xe, experts, ops);
    if (ops.size() > first_expert) {
        precede_by_all_to_all(ops[first_expert], ms.to_experts);
        gather_over_expert_tp(ops[first_expert], ms.gathered_in);
    }
    if (ag) {
        // The gradients of the gathered rows and gate weights, reduce-scattered
        // over the etp x ep ranks (the gathers' backward: one collective here,
        // two in the code), then the shared experts' input gradient added.
        db.push_back(use(flagged(x.act(aslot::norm2), kGrad), full_act(x), true));
        ops.push_back(allgather_permute_bwd(x, g, std::move(db)));
        if (g.group > 1) ops.back().tpep_scatter_bytes = Bytes::ceil(static_cast<double>(g.rows) * (h + E) * x.ab);
        if (x.m->shared_experts > 0) ops.push_back(allgather_add_shared(x, "moe_ag_add_shared_bwd"));
        append_router_backward(x, ops);
        return;
    }
    if (sorts)
        ops.push_back(sort_chunks(x, xe, ms, "moe_sort_chunks_bwd", kGateBytes,
                                  [](const MlpIds& i) { return flagged(i.in, kGrad); }));
    // Dispatch backward: sum each token's expert input gradients; the TP
    // reduction of the column-parallel experts' input gradient follows.
    db.push_back(use(partial_if_tp(x, flagged(x.act(aslot::norm2), kGrad)), full_act(x), true));
    if (unfused) {
        // moe_gather's backward (Megatron-Core 0.9): a zero-filled input
        // gradient, then the scatter-add of the copies' gradients into it,
        // which reads it as well.
        Operator zero = elementwise(x, "moe_dispatch_bwd_zero", 0, 0, full_act(x), {});
        exchange_back_before(zero, ms, ms.scattered_out + gathered_probs_bytes(x, ms));
        ops.push_back(std::move(zero));
    }
    Operator dispatch_bwd = elementwise(x, "moe_dispatch_bwd", T * k * h, routed + idx + (unfused ? full_act(x) : 0),
                                        full_act(x), std::move(db));
    if (!unfused) exchange_back_before(dispatch_bwd, ms, ms.scattered_out + gathered_probs_bytes(x, ms));
    if (sends_probs(x)) dispatch_bwd.ep_probs_a2a_bytes = probs_a2a_bytes(ms);
    set_sync(x, dispatch_bwd, TpSync::after_column_input_grad, full_act(x));
    ops.push_back(std::move(dispatch_bwd));
    append_router_backward(x, ops);
}

}  // namespace sim::workload::ops

namespace sim::workload {

bool OperatorOptions::routes_own_shard() const {
    const int e = expert_tp();
    if (e != tp || moe_allgather) return true;
    return e > 1 && ep > 1 && moe_alltoall_metadata;
}

}  // namespace sim::workload
