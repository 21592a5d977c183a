// Strategy resolution, the layer split (through the strategy's partitioner,
// sim/parallel/partition/) and the memory of each pipeline stage (see strategy.h).
#include "sim/parallel/strategy.h"

#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/parallel/index.h"
#include "sim/workload/footprint.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

namespace sim::parallel {

using config::Mode;
using workload::Operator;

[[noreturn]] void refuse(const config::StrategySpec& spec, const std::string& why) {
    throw ConfigError(spec.where, fmt::format("strategy '{}': {}", spec.name, why));
}

workload::OperatorOptions operator_options(const config::ScenarioSpec& sc, const ResolvedStrategy& rs) {
    workload::OperatorOptions o;
    o.precision = sc.workload.precision;
    o.flash_attention = sc.workload.flash_attention;
    if (sc.workload.attention) o.attention_kernel = workload::attention_kernel_of(*sc.workload.attention);
    o.dropout = sc.workload.dropout;
    o.fuse_elementwise = sc.workload.fuse_elementwise;
    o.causal = true;
    o.tp = rs.tp;
    o.sequence_parallel = rs.sp && rs.tp > 1;
    o.inference = sc.workload.mode == Mode::inference;
    o.cp = rs.cp;
    o.ep = rs.ep;
    o.etp = rs.etp;
    o.dp_dense_gather = rs.dp_dense_gather;
    o.dp_head_gather = rs.dp_head_gather;
    // Whole under data-parallel attention (SGLang's, with DeepEP), and under
    // plain TP with expert parallelism when the stack builds them so
    // (SoftwareProfile::moe_shared_experts_whole; docs/moe.md section 8b).
    o.shared_experts_whole = rs.attention_dp || (sc.profile.moe_shared_experts_whole && rs.ep > 1);
    o.moe = sc.workload.moe;
    o.recompute_modules = sc.workload.recompute_modules;
    o.fp8_dispatch = sc.profile.moe_fp8_dispatch && sc.workload.precision.compute == hw::DType::fp8;
    o.fp8_dispatch_decode = sc.profile.moe_fp8_dispatch_decode;
    o.moe_sort_chunks = sc.profile.moe_dispatcher == "alltoall";
    o.moe_alltoall_metadata = sc.profile.moe_dispatcher == "alltoall";
    o.moe_allgather = sc.profile.moe_dispatcher == "allgather";
    o.moe_permute_unfused = sc.profile.moe_permute_unfused;
    o.decode_attention_issue = sc.profile.decode_attention_issue;
    o.cross_entropy_fp32_unfused = sc.profile.cross_entropy_fp32_unfused;
    o.mla_absorbed_weights = sc.profile.mla_absorbed_weights;
    o.mla_qkv_concat = sc.profile.mla_qkv_concat;
    o.mla_prefill_eager = sc.profile.mla_prefill_eager;
    o.mla_rope_unfused = sc.profile.mla_rope_unfused;
    o.fused_moe_chunk_tokens = sc.profile.fused_moe_chunk_tokens;
    o.fp8_gemm_ceiling = sc.profile.fp8_gemm_ceiling;
    o.fp8_grouped_gemm_dense = sc.profile.fp8_grouped_gemm_dense;
    o.fp8_input_quant_group = sc.profile.fp8_input_quant_group;
    o.grouped_topk_kernels = sc.profile.grouped_topk_kernels;
    o.moe_router_kernels = sc.profile.moe_router_kernels;
    o.moe_router_bwd_kernels = sc.profile.moe_router_bwd_kernels;
    o.shared_expert_combine_kernels = sc.profile.shared_expert_combine_kernels;
    o.memory_bound = sc.profile.memory_bound;
    return o;
}

double ops_time(const std::vector<Operator>& ops, const hw::GpuSpec& gpu, const hw::CostModel& cm) {
    double t = 0;
    for (const auto& op : ops) t += cm.cost(gpu, op.kernel, hw::L2Residency{}).duration.seconds();
    return t;
}

std::int64_t prefill_sub_batch(const config::ScenarioSpec& sc, std::int64_t mb_size) {
    const std::int64_t cap = sc.profile.prefill_max_tokens;
    if (cap <= 0) return mb_size;
    // TurboMind's context decoder runs prompt - 1 tokens a sequence (the
    // last one goes to the first decode step) and bounds sequences x that.
    const std::int64_t per = std::max<std::int64_t>(1, sc.workload.prompt_tokens - 1);
    return std::clamp<std::int64_t>(cap / per, 1, mb_size);
}

Time decode_step_host_time(const config::ScenarioSpec& sc, std::int64_t sequences) {
    const auto& p = sc.profile;
    // Each wait ends when the host sees the GPU done; the GPU then waits for
    // the host's next launch (kernel_issue), the host having run ahead of it
    // until then. The output copy crosses PCIe while the host waits for it.
    double t = p.decode_step_host_syncs * (p.decode_step_sync_latency.seconds() + p.kernel_issue.seconds());
    const double pcie = sc.gpu.pcie_bandwidth.bytes_per_s;
    if (p.decode_step_copy_bytes > 0 && pcie > 0) t += static_cast<double>(sequences) * p.decode_step_copy_bytes / pcie;
    return Time::from_seconds_ceil(t);
}

std::vector<Operator> decode_step_kernels(const config::ScenarioSpec& sc, std::int64_t sequences) {
    std::vector<Operator> ops;
    // Token ids, flags and lengths: 4 bytes a sequence in and out, so each
    // costs about its launch (the sampling's own pass over the logits is the
    // head's "sampling" kernel).
    const double bytes = 4.0 * static_cast<double>(sequences);
    Operator op;
    op.kernel.name = "decode_step";
    op.kernel.kind = hw::KernelKind::elementwise;
    op.kernel.dtype = hw::DType::fp32;
    op.kernel.bytes_read = Bytes::ceil(bytes);
    op.kernel.bytes_written = Bytes::ceil(bytes);
    ops.assign(static_cast<std::size_t>(std::max(0, sc.profile.decode_step_kernels)), op);
    return ops;
}

Shapes shapes_for(const config::ScenarioSpec& sc, std::int64_t mb_size) {
    Shapes s;
    const auto& w = sc.workload;
    if (w.mode == Mode::inference) {
        s.prefill = {prefill_sub_batch(sc, mb_size), w.prompt_tokens, w.prompt_tokens};
        s.decode_mid = {mb_size, 1, w.prompt_tokens + std::max<std::int64_t>(1, w.output_tokens / 2)};
    } else {
        s.train = {mb_size, w.seq_len, w.seq_len};
    }
    return s;
}

// Expert parallelism, Megatron-Core's MoE parallel folding: the MoE layers
// fold the tp x dp x cp ranks of a stage into etp x ep x edp (expert tensor,
// expert and expert data parallel), so etp divides tp, etp x ep divides
// tp x dp x cp, and ep divides the experts. etp unset means etp = tp (the
// experts fold onto dp x cp alone). Returns why not, or an empty string; a
// moe block on a dense model is an error of the scenario, not of the strategy.
std::string resolve_ep(const config::ScenarioSpec& sc, const config::StrategySpec& spec, ResolvedStrategy& rs) {
    const auto& m = sc.model;
    if (sc.workload.moe_where.line > 0 && m.experts == 0)
        throw ConfigError(sc.workload.moe_where, fmt::format("workload.moe: model '{}' is dense (no experts)", m.name));
    rs.ep = spec.ep;
    rs.etp = rs.etp > 0 ? rs.etp : spec.etp;  // attention_dp with tp > 1 has set 1
    const int etp = rs.expert_tp();
    if (spec.etp > 0 && m.experts == 0)
        return fmt::format("etp={}: model '{}' is dense (no experts to split)", spec.etp, m.name);
    if (rs.tp % etp != 0) return fmt::format("etp={} does not divide tp={}", etp, rs.tp);
    if (etp != rs.tp && !rs.sp)
        return fmt::format(
            "etp={} < tp={} needs sp: true (each TP rank routes its own sequence-parallel shard; "
            "Megatron-Core refuses MoE with TP but without sequence parallelism)",
            etp, rs.tp);
    // Megatron-Core's MoELayer.forward raises in training with TP > 1 and no
    // sequence parallelism, whatever the dispatcher (moe_layer.py); a
    // profile naming one of its dispatchers runs that code.
    const std::string& dispatcher = sc.profile.moe_dispatcher;
    if (m.experts > 0 && rs.tp > 1 && !rs.sp && sc.workload.mode == Mode::training &&
        (dispatcher == "alltoall" || dispatcher == "allgather"))
        return fmt::format(
            "tp={} without sp: Megatron-Core's MoE layer refuses tensor parallelism without sequence parallelism "
            "in training (moe_dispatcher {}); set sp: true",
            rs.tp, dispatcher);
    if (rs.ep == 1) return {};
    if (m.experts == 0) return fmt::format("ep={}: model '{}' is dense (no experts to split)", rs.ep, m.name);
    if (m.experts % rs.ep != 0) return fmt::format("ep={} does not divide the model's {} experts", rs.ep, m.experts);
    if (etp == rs.tp && (rs.dp * rs.cp) % rs.ep != 0)
        return fmt::format(
            "ep={} does not divide dp x cp = {} x {} (the experts fold onto the data-parallel ranks, as "
            "in Megatron-Core)",
            rs.ep, rs.dp, rs.cp);
    // tp x dp x cp is the GPUs of a stage; etp x ep may pass 2^31 (tp and
    // ep are each read up to 2^20), hence 64 bits.
    if ((std::int64_t{rs.tp} * rs.dp * rs.cp) % (std::int64_t{etp} * rs.ep) != 0)
        return fmt::format(
            "etp x ep = {} x {} does not divide tp x dp x cp = {} x {} x {} (the experts fold onto the ranks of a "
            "pipeline stage, as in Megatron-Core)",
            etp, rs.ep, rs.tp, rs.dp, rs.cp);
    return {};
}

// Data-parallel attention (docs/moe.md sections 8, 8b) is the layout SGLang
// runs with --enable-dp-attention and DeepEP (--tp T --dp D --ep T): D
// attention ranks of T / D GPUs each (parasim's tp: attention TP inside a
// rank, dp: the ranks), the experts over all T = tp x dp GPUs. Pipeline
// stages and an EP group other than the engine are refused, and so are
// SGLang's flags without attention_dp. Returns why not, or "".
std::string check_attention_dp(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                               const ResolvedStrategy& rs) {
    if (!spec.attention_dp) {
        if (spec.moe_dense_tp_size > 0 || spec.enable_dp_lm_head)
            return "moe_dense_tp_size and enable_dp_lm_head choose the dense layers' layout under data-parallel "
                   "attention: they need attention_dp: true";
        return {};
    }
    if (sc.workload.mode == Mode::training)
        return "attention_dp is an inference and serving layout (SGLang --enable-dp-attention), not training's";
    if (sc.model.experts == 0)
        return fmt::format(
            "attention_dp: model '{}' is dense; its dp ranks would never meet (they meet in the MoE "
            "layers' all-to-alls), which is plain data parallelism",
            sc.model.name);
    if (rs.pp != 1) return fmt::format("attention_dp with pp={}: pipeline stages are not modelled with it", rs.pp);
    if (std::int64_t{rs.ep} != std::int64_t{rs.tp} * rs.dp)
        return fmt::format(
            "attention_dp needs ep = tp x dp (the MoE layers run EP over every GPU of the engine, as SGLang's "
            "DeepEP backend does with --ep-size = --tp); ep={}, tp x dp = {} x {}",
            rs.ep, rs.tp, rs.dp);
    const bool dense_layers = sc.model.first_dense_layers > 0;
    if (rs.tp > 1 && spec.moe_dense_tp_size == 1 && dense_layers)
        return fmt::format(
            "attention_dp with tp={} and moe_dense_tp_size 1: SGLang then runs each dense MLP whole on each "
            "attention-TP rank's 1/{} of the tokens, which is not modelled; leave moe_dense_tp_size out",
            rs.tp, rs.tp);
    if (spec.moe_dense_tp_size != 1 && dense_layers && sc.model.ffn % (std::int64_t{rs.tp} * rs.dp) != 0)
        return fmt::format(
            "attention_dp: the dense MLP's {} columns do not split over the engine's tp x dp = {} GPUs (SGLang's "
            "default layout; moe_dense_tp_size: 1 keeps each rank's MLP whole)",
            sc.model.ffn, std::int64_t{rs.tp} * rs.dp);
    return {};
}

// overlap.two_batch (docs/moe.md section 8a) is SGLang's two-batch overlap:
// inference with an expert-parallel all-to-all to hide (SGLang refuses it
// without an all-to-all backend: moe_a2a_backend 'none'). A named stack
// must list it among its overlaps. Pipelines are not modelled with it, nor
// serving engines other than DP attention's. Returns why not, or "".
std::string check_two_batch(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                            const ResolvedStrategy& rs) {
    if (!rs.overlap.two_batch) return {};
    if (sc.workload.mode == Mode::training)
        return "overlap.two_batch is SGLang's inference overlap (--enable-two-batch-overlap); in training the "
               "exchange beside another micro-batch is overlap.moe_a2a";
    // Serving: an engine whose ranks step in lockstep through the MoE
    // layers' all-to-alls, SGLang's DP-attention engine (docs/serving.md,
    // "Two-batch overlap"); a TP replica's experts are not exchanged so.
    if (sc.workload.serving && !spec.attention_dp)
        return "overlap.two_batch in serving is modelled for data-parallel-attention engines (attention_dp: true, "
               "SGLang's --enable-dp-attention with DeepEP) only";
    if (sc.model.experts == 0 || rs.ep < 2)
        return "overlap.two_batch hides the expert-parallel all-to-alls: it needs an MoE model and ep > 1 (SGLang "
               "refuses it with moe_a2a_backend 'none')";
    if (rs.pp != 1) return fmt::format("overlap.two_batch with pp={}: pipeline stages are not modelled with it", rs.pp);
    const auto& can = sc.profile.overlaps;
    if (sc.software.given() && std::find(can.begin(), can.end(), "two_batch") == can.end())
        return fmt::format(
            "overlap.two_batch: software '{}' does not list two_batch among its overlaps (SGLang's "
            "--enable-two-batch-overlap)",
            sc.software.name);
    return {};
}

// Resolves tp/pp/dp and micro-batching; checks divisibility with the numbers
// named. Every refusal returns its message, so `run` (resolve_degrees) and
// the plan search (which skips what cannot be formed) share one set of rules.
Resolution try_resolve_degrees(const config::ScenarioSpec& sc, const config::StrategySpec& spec) {
    const auto refused = [](std::string why) { return Resolution{std::nullopt, std::move(why)}; };
    ResolvedStrategy rs;
    const int gpus = sc.gpus;
    const auto& m = sc.model;
    rs.tp = spec.tp;
    rs.cp = spec.cp;
    rs.sp = spec.sp;
    rs.zero = spec.zero;
    rs.schedule = spec.schedule;
    rs.virtual_stages = spec.schedule->virtual_stages_per_rank(spec.virtual_stages);
    rs.overlap = spec.overlap;
    if (rs.overlap.tp_comm && rs.tp > 1 && !rs.sp)
        return refused("overlap.tp_comm (userbuffers ring exchange) needs sp: true, as Megatron-LM requires");
    if (gpus % rs.tp != 0) return refused(fmt::format("tp={} does not divide the {} GPUs", rs.tp, gpus));
    if (sc.workload.attention == workload::AttentionImpl::flash3 && sc.gpu.architecture != "hopper")
        return refused(fmt::format("attention flash3 (FlashAttention-3) runs on Hopper only, not on {} ({})",
                                   sc.gpu.name, sc.gpu.architecture));
    if (rs.cp > 1) {
        const auto& w = sc.workload;
        if (w.mode == Mode::inference)
            return refused(fmt::format("context parallelism (cp={}) is modelled for training only", rs.cp));
        if (w.seq_len % (2 * rs.cp) != 0)
            return refused(
                fmt::format("cp={}: seq_len={} does not split into 2 x cp = {} equal chunks (load-balanced "
                            "causal split)",
                            rs.cp, w.seq_len, 2 * rs.cp));
        if (!w.flash_attention)
            return refused(fmt::format("cp={}: context parallelism needs flash_attention (ring attention)", rs.cp));
    }
    // The product of the degrees that are fixed, for the messages below.
    const std::string tc_name = rs.cp > 1 ? fmt::format("tp={} x cp={}", rs.tp, rs.cp) : fmt::format("tp={}", rs.tp);
    const auto tc_product = checked_mul(std::int64_t{rs.tp}, rs.cp);
    if (!tc_product || *tc_product > gpus) return refused(fmt::format("{} exceeds the {} GPUs", tc_name, gpus));
    const std::int64_t tc = *tc_product;
    if (m.heads % rs.tp != 0 || (m.kv_heads % rs.tp != 0 && rs.tp % m.kv_heads != 0))
        return refused(
            fmt::format("tp={} does not divide the model's {} heads / {} KV heads", rs.tp, m.heads, m.kv_heads));
    if (m.ffn % rs.tp != 0) return refused(fmt::format("tp={} does not divide the MLP size {}", rs.tp, m.ffn));
    constexpr int unset = config::StrategySpec::kUnset, autov = config::StrategySpec::kAuto;
    int pp = spec.pp, dp = spec.dp;
    if (pp == autov && dp == autov) return refused("pp and dp cannot both be auto");
    if (pp == unset && dp == unset) {
        // Cache-aware partitioning makes one pipeline stage per GPU (group);
        // otherwise no pipeline unless asked, data parallel over the rest.
        if (spec.partition->computes_split()) pp = autov, dp = 1;
        else pp = 1, dp = autov;
    }
    if (pp == autov && dp == unset) dp = 1;
    if (dp == autov && pp == unset) pp = 1;
    if (pp == unset) pp = autov;
    if (dp == unset) dp = autov;
    // The degrees are read up to 2^20 (dp 2^24) each, so their products are
    // checked: a wrapped one divided by zero, or came round to the GPU count.
    const auto divides_gpus = [&](std::optional<std::int64_t> p) { return p && *p <= gpus && gpus % *p == 0; };
    if (pp == autov) {
        const auto other = checked_mul(tc, dp);
        if (!divides_gpus(other))
            return refused(fmt::format("pp=auto: {} GPUs are not a multiple of {} x dp={}", gpus, tc_name, dp));
        pp = static_cast<int>(gpus / *other);
    }
    if (dp == autov) {
        const auto other = checked_mul(tc, pp);
        if (!divides_gpus(other))
            return refused(fmt::format("dp=auto: {} GPUs are not a multiple of {} x pp={}", gpus, tc_name, pp));
        dp = static_cast<int>(gpus / *other);
    }
    if (const auto all = checked_mul(tc, pp, dp); all != gpus)
        return refused(fmt::format("{} x pp={} x dp={} = {}, but the scenario uses {} GPUs", tc_name, pp, dp,
                                   all ? fmt::format("{}", *all) : std::string("more than 2^63"), gpus));
    if (pp * rs.virtual_stages > m.layers)
        return refused(spec.schedule->uses_virtual_stages() || rs.virtual_stages == 1
                           ? fmt::format("pp={} x virtual_stages={} exceeds the model's {} layers", pp,
                                         rs.virtual_stages, m.layers)
                           : fmt::format("{} cuts the model into {} x pp = {} chunks, more than its {} layers",
                                         spec.schedule->name(), rs.virtual_stages, pp * rs.virtual_stages, m.layers));
    rs.pp = pp;
    rs.dp = dp;
    if (spec.attention_dp && rs.tp > 1) {
        // Attention TP inside a DP rank (docs/moe.md section 8b): the MoE
        // layers take each attention-TP rank's share of its rank's tokens
        // (SGLang's SCATTERED mode: a reduce-scatter after the attention,
        // an all-gather before the next), which is sequence parallelism over
        // the attention-TP group with whole experts (etp 1).
        rs.sp = true;
        rs.etp = 1;
    }
    if (auto why = resolve_ep(sc, spec, rs); !why.empty()) return refused(std::move(why));
    if (auto why = check_attention_dp(sc, spec, rs); !why.empty()) return refused(std::move(why));
    if (spec.attention_dp) {
        rs.attention_dp = true;
        rs.dp_dense_gather = spec.moe_dense_tp_size == 1 ? 1 : rs.dp;
        rs.dp_head_gather = spec.enable_dp_lm_head ? 1 : rs.dp;
    }
    // overlap.moe_a2a pairs a micro-batch's backward with another's forward
    // (docs/moe.md section 3e): there must be a backward and an exchange.
    if (rs.overlap.moe_a2a && sc.workload.mode != Mode::training)
        return refused("overlap.moe_a2a pairs a backward with a forward: training only");
    if (rs.overlap.moe_a2a && rs.ep < 2)
        return refused("overlap.moe_a2a hides the expert-parallel all-to-alls: it needs ep > 1");
    // Megatron-Core refuses --overlap-moe-expert-parallel-comm under the
    // allgather dispatcher (transformer_config.py: alltoall or flex only);
    // SGLang's two-batch overlap splits a pass at all-to-alls it has none of.
    if ((rs.overlap.moe_a2a || rs.overlap.two_batch) && sc.profile.moe_dispatcher == "allgather")
        return refused(
            fmt::format("overlap.{} overlaps the expert-parallel all-to-alls, which the allgather "
                        "dispatcher does not run (moe_dispatcher allgather, docs/moe.md section 3l)",
                        rs.overlap.moe_a2a ? "moe_a2a" : "two_batch"));
    // Under plain 1F1B with pp > 1 a pair on stage s needs the forward that
    // stage s - 1 runs in its own pair, which waits for stage s's previous
    // backward: the pairs serialise across stages (measured: slower than no
    // overlap). Megatron-Core runs its combined 1F1B without a pipeline or
    // with the interleaved one only (docs/moe.md section 3e); DualPipe pairs
    // a forward of one direction with a backward of the other, which do not
    // wait on each other (docs/parallelism.md, "DualPipe").
    if (rs.overlap.moe_a2a && rs.pp > 1 && !(rs.schedule->uses_virtual_stages() && rs.virtual_stages >= 2) &&
        !rs.schedule->names_pairs())
        return refused(
            "overlap.moe_a2a with pp > 1 needs schedule: interleaved-1f1b with virtual_stages >= 2 (Megatron-Core's "
            "combined 1F1B), dualpipe or dualpipev; under 1F1B the pairs would serialise across stages");
    if (auto why = check_two_batch(sc, spec, rs); !why.empty()) return refused(std::move(why));
    if (rs.schedule->training_only() && sc.workload.mode != Mode::training)
        return refused(fmt::format("schedule {} orders a training step's forwards and backwards: training only",
                                   rs.schedule->name()));

    const auto& w = sc.workload;
    std::int64_t sequences = 0;  // per DP replica
    if (w.mode == Mode::training) {
        if (w.global_batch % (dp * w.micro_batch) != 0)
            return refused(fmt::format("global_batch={} is not a multiple of dp={} x micro_batch={}", w.global_batch,
                                       dp, w.micro_batch));
        const std::int64_t mbs = w.global_batch / (dp * w.micro_batch);
        if (spec.microbatches != 0 && spec.microbatches != mbs)
            return refused(fmt::format("microbatches={} contradicts global_batch / (dp x micro_batch) = {}",
                                       spec.microbatches, mbs));
        // Each micro-batch costs at least a task per layer and pass, so the
        // plan-tasks bound (builder.cpp, with the simulated GPUs) would refuse
        // it later; refuse it before a table of up to 2^30 sizes (8 GB) is made.
        const double at_least = static_cast<double>(mbs) * static_cast<double>(m.layers) * 2.0;
        if (at_least > static_cast<double>(limits().plan_tasks))
            return refused(
                fmt::format("the simulation plan needs at least {:.3g} tasks ({} micro-batches x {} "
                            "layers x 2 passes) (limit plan-tasks={}; raise it with --limit plan-tasks=N)",
                            at_least, mbs, m.layers, limits().plan_tasks));
        rs.microbatches = static_cast<int>(mbs);
        rs.microbatch_sizes.assign(as_index(rs.microbatches), w.micro_batch);  // mbs <= global_batch < 2^30
        if (rs.schedule->uses_virtual_stages() && mbs % pp != 0)
            return refused(
                fmt::format("{} needs micro-batches ({}) to be a multiple of pp={}", rs.schedule->name(), mbs, pp));
        if (auto why = rs.schedule->refusal(PipelineShape{pp, rs.microbatches, rs.virtual_stages}); !why.empty())
            return refused(std::move(why));
    } else {
        if (w.batch < dp) return refused(fmt::format("batch={} is smaller than dp={}", w.batch, dp));
        sequences = (w.batch + dp - 1) / dp;
        const std::int64_t mbs = spec.microbatches != 0 ? spec.microbatches : std::min<std::int64_t>(sequences, pp);
        if (mbs > sequences)
            return refused(fmt::format("microbatches={} exceeds the {} sequences per replica", mbs, sequences));
        rs.microbatches = static_cast<int>(mbs);
        for (std::int64_t j = 0; j < mbs; ++j)
            rs.microbatch_sizes.push_back(sequences / mbs + (j < sequences % mbs ? 1 : 0));
    }
    const bool uneven = spec.first_stage_layers > 0 || spec.last_stage_layers > 0;
    if (rs.schedule->uses_virtual_stages() && !uneven && m.layers % (pp * rs.virtual_stages) != 0)
        return refused(fmt::format("{} needs layers ({}) divisible by pp x virtual_stages = {}", rs.schedule->name(),
                                   m.layers, pp * rs.virtual_stages));
    return Resolution{std::move(rs), {}};
}

ResolvedStrategy resolve_degrees(const config::ScenarioSpec& sc, const config::StrategySpec& spec) {
    auto r = try_resolve_degrees(sc, spec);
    if (!r.strategy) refuse(spec, r.why_not);
    return std::move(*r.strategy);
}

std::vector<LayerRange> split_layers(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                                     ResolvedStrategy& rs, const hw::CostModel& cm) {
    return spec.partition->split(sc, spec, rs, cm);
}

// Per-GPU memory of pipeline stage `s` (every TP rank of a stage is alike).
hw::MemoryBreakdown stage_memory(const config::ScenarioSpec& sc, const ResolvedStrategy& rs, int s,
                                 const std::vector<LayerRange>& vstages) {
    const auto& m = sc.model;
    const auto opt = operator_options(sc, rs);
    int layers = 0;
    int dense_layers = 0;  // the leading dense layers of an MoE model in this stage
    bool first = false, last = false;
    // The virtual stages this rank holds, as the schedule places them
    // (DualPipe: two, each with its own weights, gradients and optimizer state).
    const PipelineShape pshape{rs.pp, rs.microbatches, rs.virtual_stages};
    const int held = rs.schedule->chunks(pshape);
    for (int c = 0; c < held; ++c) {
        const auto v = as_index(rs.schedule->virtual_stage(pshape, s, c));
        layers += vstages[v].second - vstages[v].first;
        for (int l = vstages[v].first; l < vstages[v].second; ++l) dense_layers += m.experts > 0 && !m.is_moe_layer(l);
        first = first || v == 0;
        last = last || v + 1 == vstages.size();
    }
    // A training step's multi-token-prediction modules live on the last
    // stage: their layers count as the stage's (weights, experts and
    // activations), their projections and norms with the head.
    const bool training = sc.workload.mode == Mode::training;
    if (last && training) layers += static_cast<int>(m.mtp_layers);
    const int moe_layers = layers - dense_layers;
    double weight_bytes = moe_layers * workload::layer_weight_bytes(m, opt).as_double() +
                          dense_layers * workload::layer_weight_bytes(m, opt, 0).as_double();
    // The experts' share: sharded over etp x ep already, replicated over the
    // expert-data-parallel ranks (tp x dp x cp / (etp x ep)), which ZeRO
    // shards over.
    const double wbytes = hw::bytes_per_element(opt.precision.weights);
    const double expert_bytes = moe_layers * workload::layer_expert_params_per_shard(m, opt) * wbytes;
    if (first) weight_bytes += workload::embedding_weight_bytes(m, opt).as_double();
    if (last) {
        weight_bytes += workload::head_weight_bytes(m, opt).as_double();
        const bool mtp = training && m.mtp_layers > 0;
        if (mtp) weight_bytes += workload::mtp_module_weight_bytes(m, opt).as_double();
        // A tied head, or MTP modules (which embed tokens too; Megatron-Core
        // builds the embedding on the last stage for them), on another stage
        // than the embedding keep their own copy of the table.
        if ((m.tied_embeddings || mtp) && !first) weight_bytes += workload::embedding_weight_bytes(m, opt).as_double();
    }
    hw::MemoryBreakdown b;
    const auto sh = shapes_for(sc, rs.microbatch_sizes.front());
    if (sc.workload.mode == Mode::training) {
        const auto state = workload::training_state_bytes_per_param(opt);
        const double params = weight_bytes / state.weights;
        // Weights are replicated over the CP ranks as over the DP replicas:
        // ZeRO shards over dp x cp. Activations are 1/cp (the shape's tokens
        // are divided by cp in the footprint).
        const int shards = rs.dp * rs.cp;
        const int expert_shards = rs.edp();  // dp x cp / ep when etp = tp
        const double dense_bytes = weight_bytes - expert_bytes;
        const double dense_params = dense_bytes / state.weights, expert_params = expert_bytes / state.weights;
        const auto sharded = [&](double dense, double expert, int level, double& expert_part) {
            expert_part = expert / (rs.zero >= level ? expert_shards : 1);
            return dense / (rs.zero >= level ? shards : 1) + expert_part;
        };
        if (rs.folds_experts()) {
            b.weights = sharded(dense_bytes, expert_bytes, 3, b.expert_weights);
            b.gradients =
                sharded(dense_params * state.gradients, expert_params * state.gradients, 2, b.expert_gradients);
            b.optimizer =
                sharded(dense_params * state.optimizer, expert_params * state.optimizer, 1, b.expert_optimizer);
        } else {
            b.weights = weight_bytes / (rs.zero >= 3 ? shards : 1);
            b.gradients = params * state.gradients / (rs.zero >= 2 ? shards : 1);
            b.optimizer = params * state.optimizer / (rs.zero >= 1 ? shards : 1);
            sharded(0, expert_bytes, 3, b.expert_weights);
            sharded(0, expert_params * state.gradients, 2, b.expert_gradients);
            sharded(0, expert_params * state.optimizer, 1, b.expert_optimizer);
        }
        const int layers_per_chunk = std::max(1, layers / held);
        // overlap.moe_a2a starts the forward that follows a backward before
        // that backward ends: one chunk more in flight, as Megatron-Core's
        // combined 1F1B adds a warm-up micro-batch (docs/moe.md section 3e).
        // A schedule that names its pairs counted that forward already.
        const std::int64_t chunks = rs.schedule->chunks_in_flight(pshape, s);
        const auto inflight_chunks = static_cast<double>(
            rs.overlap.moe_a2a && !rs.schedule->names_pairs()
                ? std::min<std::int64_t>(chunks + 1, std::int64_t{rs.microbatches} * rs.virtual_stages)
                : chunks);
        // One layer's activations, or, where the MoE layers' loads differ (a
        // per-layer histogram), the mean over the stage's layers of each
        // one's own (docs/moe.md section 5).
        double layer_act = workload::layer_activation_bytes(m, sh.train, opt, sc.workload.recompute).as_double();
        if (workload::loads_differ_by_layer(opt.moe) && layers > 0) {
            double sum = 0;
            const auto add = [&](std::int64_t l) {
                sum += workload::layer_activation_bytes(m, sh.train, opt, sc.workload.recompute, l).as_double();
            };
            for (int c = 0; c < held; ++c) {
                const auto v = as_index(rs.schedule->virtual_stage(pshape, s, c));
                for (int l = vstages[v].first; l < vstages[v].second; ++l) add(l);
            }
            if (last)
                for (std::int64_t l = m.layers; l < m.layers + m.mtp_layers; ++l) add(l);
            layer_act = sum / layers;
        }
        b.activations = layer_act * layers_per_chunk * inflight_chunks;
        b.workspace = workload::workspace_bytes(m, sh.train, opt, true).as_double();
    } else {
        // The absorbed MLA decode matrices sit beside every attention layer's raw weights.
        b.weights = weight_bytes + layers * workload::mla_absorbed_weight_bytes(m, opt).as_double();
        b.expert_weights = expert_bytes;
        const std::int64_t replica_batch =
            std::accumulate(rs.microbatch_sizes.begin(), rs.microbatch_sizes.end(), std::int64_t{0});
        b.kv_cache = layers * workload::layer_kv_bytes(m, replica_batch,
                                                       sc.workload.prompt_tokens + sc.workload.output_tokens, opt)
                                  .as_double();
        b.workspace = workload::workspace_bytes(m, sh.prefill, opt, false).as_double();
    }
    return b;
}

}  // namespace sim::parallel
