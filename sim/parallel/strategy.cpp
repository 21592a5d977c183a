// Strategy resolution, layer splits (even, uneven, cache-aware) and the
// memory of each pipeline stage (see strategy.h).
#include "sim/parallel/strategy.h"

#include "sim/core/checked.h"
#include "sim/core/error.h"

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
    return o;
}

namespace {

// Even split of `n` layers into `parts`; stages after the first take the
// remainder, since the first stage also holds the embedding.
std::vector<LayerRange> uniform_split(int n, int parts) {
    std::vector<LayerRange> out;
    const int base = n / parts, extra = n % parts;
    int first = 0;
    for (int k = 0; k < parts; ++k) {
        const int size = base + ((k >= parts - extra) ? 1 : 0);
        out.emplace_back(first, first + size);
        first += size;
    }
    return out;
}

// Layers of each virtual stage (vs = chunk x pp + stage) when the strategy
// names first_stage_layers / last_stage_layers: those ranks hold the given
// layers, the middle ranks split the rest evenly (later ranks take the
// remainder). Within a rank the layers spread over its chunks; the first
// rank's short chunk comes first (it also runs the embedding), the last
// rank's last (it runs the head), as Megatron-Core's
// account_for_embedding/loss_in_pipeline_split builds them.
std::vector<LayerRange> uneven_split(const config::StrategySpec& spec, int layers, int pp, int v) {
    const int first = spec.first_stage_layers, last = spec.last_stage_layers;
    if (pp < 2) refuse(spec, "first_stage_layers / last_stage_layers need pp >= 2");
    if (spec.partition == PartitionMethod::cache_aware)
        refuse(spec, "first_stage_layers / last_stage_layers set the split by hand; cache-aware partitioning computes it");
    const int fixed = (first > 0) + (last > 0);
    const int middle = pp - fixed;
    const long rest = static_cast<long>(layers) - first - last;
    if (rest < 0 || (middle == 0 && rest != 0) || (middle > 0 && rest < static_cast<long>(middle) * v))
        refuse(spec, fmt::format("first_stage_layers={} + last_stage_layers={} leave {} of the model's {} layers for "
                                 "{} middle ranks x {} virtual stages (each needs at least one)",
                                 first, last, rest, layers, middle, v));
    std::vector<int> rank_layers(static_cast<std::size_t>(pp));
    const auto middle_split = uniform_split(static_cast<int>(rest), std::max(middle, 1));
    for (int s = 0, k = 0; s < pp; ++s) {
        if (s == 0 && first > 0) rank_layers[0] = first;
        else if (s == pp - 1 && last > 0) rank_layers[static_cast<std::size_t>(s)] = last;
        else {
            const auto [a, b] = middle_split[static_cast<std::size_t>(k++)];
            rank_layers[static_cast<std::size_t>(s)] = b - a;
        }
        if (rank_layers[static_cast<std::size_t>(s)] < v)
            refuse(spec, fmt::format("pipeline rank {} holds {} layers, fewer than its {} virtual stages", s,
                                     rank_layers[static_cast<std::size_t>(s)], v));
    }
    std::vector<LayerRange> out;
    int at = 0;
    for (int vs = 0; vs < pp * v; ++vs) {
        const int s = vs % pp, c = vs / pp;
        const int n = rank_layers[static_cast<std::size_t>(s)], base = n / v, extra = n % v;
        // Which chunks take one more layer: the last `extra` on the first rank
        // and the middle ones, the first `extra` on the last rank.
        const bool more = s == pp - 1 && pp > 1 ? c < extra : c >= v - extra;
        const int size = base + (more ? 1 : 0);
        out.emplace_back(at, at + size);
        at += size;
    }
    return out;
}

double ops_time(const std::vector<Operator>& ops, const hw::GpuSpec& gpu, const hw::CostModel& cm) {
    double t = 0;
    for (const auto& op : ops) t += cm.cost(gpu, op.kernel, hw::L2Residency{}).duration.seconds();
    return t;
}

struct Shapes {
    workload::PassShape prefill, decode_mid, train;
};

Shapes shapes_for(const config::ScenarioSpec& sc, std::int64_t mb_size) {
    Shapes s;
    const auto& w = sc.workload;
    if (w.mode == Mode::inference) {
        s.prefill = {mb_size, w.prompt_tokens, w.prompt_tokens};
        s.decode_mid = {mb_size, 1, w.prompt_tokens + std::max<std::int64_t>(1, w.output_tokens / 2)};
    } else {
        s.train = {mb_size, w.seq_len, w.seq_len};
    }
    return s;
}

// Cache-aware partitioning: per-layer time from the cost model, per-layer
// working set, min-max contiguous split fitting L2, else HBM.
void partition_cache_aware(const config::ScenarioSpec& sc, const config::StrategySpec& spec, ResolvedStrategy& rs,
                           const hw::CostModel& cm) {
    const auto& m = sc.model;
    const auto opt = operator_options(sc, rs);
    const auto sh = shapes_for(sc, rs.microbatch_sizes.front());
    const int n = static_cast<int>(m.layers);
    const bool inference = sc.workload.mode == Mode::inference;
    std::vector<double> cost(n), l2_set(n), hbm_set(n);
    const std::int64_t replica_batch =
        std::accumulate(rs.microbatch_sizes.begin(), rs.microbatch_sizes.end(), std::int64_t{0});
    for (int l = 0; l < n; ++l) {
        const double weights = workload::layer_weight_bytes(m, opt);
        if (inference) {
            const double decode = ops_time(workload::layer_forward(m, l, 0, sh.decode_mid, opt), sc.gpu, cm);
            const double prefill = ops_time(workload::layer_forward(m, l, 0, sh.prefill, opt), sc.gpu, cm);
            cost[l] = prefill * rs.microbatches + decode * rs.microbatches * static_cast<double>(sc.workload.output_tokens);
            const double kv_mid = workload::layer_kv_bytes(m, replica_batch, sh.decode_mid.context, opt);
            const double kv_full = workload::layer_kv_bytes(
                m, replica_batch, sc.workload.prompt_tokens + sc.workload.output_tokens, opt);
            l2_set[l] = weights + kv_mid;  // re-read on every decode step
            hbm_set[l] = weights + kv_full;
        } else {
            const double fwd = ops_time(workload::layer_forward(m, l, 0, sh.train, opt), sc.gpu, cm);
            const double bwd =
                ops_time(workload::layer_backward(m, l, 0, sh.train, opt, sc.workload.recompute), sc.gpu, cm);
            cost[l] = (fwd + bwd) * rs.microbatches;
            l2_set[l] = weights;
            const double act = workload::layer_activation_bytes(m, sh.train, opt, sc.workload.recompute);
            hbm_set[l] = weights / hw::bytes_per_element(opt.precision.weights) * 16.0 +
                         act * std::min(rs.microbatches, rs.pp);
        }
    }
    const auto& shape = inference ? sh.prefill : sh.train;
    const double boundary = workload::boundary_activation_bytes(m, inference ? sh.decode_mid : shape, opt);
    const double l2_capacity = spec.capacity == CapacityLevel::bytes ? spec.capacity_bytes.as_double()
                                                                              : sc.gpu.l2_size.as_double();
    const double hbm_capacity = sc.gpu.memory_capacity.as_double();
    std::string level = spec.capacity == CapacityLevel::hbm ? "hbm" : "l2";
    std::optional<std::vector<LayerRange>> parts;
    if (level == "l2") {
        parts = min_max_partition(cost, l2_set, rs.pp, l2_capacity - boundary);
        if (!parts) {
            const double smallest = *std::min_element(l2_set.begin(), l2_set.end()) + boundary;
            rs.partition_note = fmt::format(
                "no split into {} stages fits the {} capacity of {}: one layer's working set alone is {} (weights{} + "
                "boundary activation); falling back to HBM",
                rs.pp, spec.capacity == CapacityLevel::bytes ? "given" : "L2", format_bytes(l2_capacity),
                format_bytes(smallest), inference ? " + KV cache" : "");
            level = "hbm";
        }
    }
    if (!parts) {
        parts = min_max_partition(cost, hbm_set, rs.pp, hbm_capacity - boundary);
        if (!parts) {
            rs.partition_note += (rs.partition_note.empty() ? "" : "; ") +
                                 fmt::format("no split into {} stages fits HBM ({}); balancing time only", rs.pp,
                                             format_bytes(hbm_capacity));
            level = "none";
            parts = min_max_partition(cost, std::vector<double>(n, 0.0), rs.pp, 1.0);
        }
    }
    rs.stage_layers = *parts;
    for (const auto& [a, b] : rs.stage_layers) {
        double ws = boundary;
        for (int l = a; l < b; ++l) ws += (level == "l2" ? l2_set : hbm_set)[l];
        rs.stage_working_set_bytes.push_back(ws);
        rs.stage_fit.push_back(level);
    }
    if (rs.partition_note.empty())
        rs.partition_note = fmt::format("every stage's working set fits {}", level == "l2" ? "L2" : "HBM");
}

}  // namespace

// Resolves tp/pp/dp and micro-batching; checks divisibility with the numbers named.
ResolvedStrategy resolve_degrees(const config::ScenarioSpec& sc, const config::StrategySpec& spec) {
    ResolvedStrategy rs;
    const int gpus = sc.gpus;
    const auto& m = sc.model;
    rs.tp = spec.tp;
    rs.cp = spec.cp;
    rs.sp = spec.sp;
    rs.zero = spec.zero;
    rs.schedule = spec.schedule;
    rs.virtual_stages = spec.schedule->uses_virtual_stages() ? spec.virtual_stages : 1;
    rs.overlap = spec.overlap;
    if (rs.overlap.tp_comm && rs.tp > 1 && !rs.sp)
        refuse(spec, "overlap.tp_comm (userbuffers ring exchange) needs sp: true, as Megatron-LM requires");
    if (gpus % rs.tp != 0) refuse(spec, fmt::format("tp={} does not divide the {} GPUs", rs.tp, gpus));
    if (sc.workload.attention == workload::AttentionImpl::flash3 && sc.gpu.architecture != "hopper")
        refuse(spec, fmt::format("attention flash3 (FlashAttention-3) runs on Hopper only, not on {} ({})", sc.gpu.name,
                                 sc.gpu.architecture));
    if (rs.cp > 1) {
        const auto& w = sc.workload;
        if (w.mode == Mode::inference)
            refuse(spec, fmt::format("context parallelism (cp={}) is modelled for training only", rs.cp));
        if (w.seq_len % (2 * rs.cp) != 0)
            refuse(spec, fmt::format("cp={}: seq_len={} does not split into 2 x cp = {} equal chunks (load-balanced "
                                     "causal split)",
                                     rs.cp, w.seq_len, 2 * rs.cp));
        if (!w.flash_attention)
            refuse(spec, fmt::format("cp={}: context parallelism needs flash_attention (ring attention)", rs.cp));
    }
    // The product of the degrees that are fixed, for the messages below.
    const std::string tc_name = rs.cp > 1 ? fmt::format("tp={} x cp={}", rs.tp, rs.cp) : fmt::format("tp={}", rs.tp);
    const auto tc_product = checked_mul(std::int64_t{rs.tp}, rs.cp);
    if (!tc_product || *tc_product > gpus) refuse(spec, fmt::format("{} exceeds the {} GPUs", tc_name, gpus));
    const std::int64_t tc = *tc_product;
    if (m.heads % rs.tp != 0 || (m.kv_heads % rs.tp != 0 && rs.tp % m.kv_heads != 0))
        refuse(spec, fmt::format("tp={} does not divide the model's {} heads / {} KV heads", rs.tp, m.heads, m.kv_heads));
    if (m.ffn % rs.tp != 0) refuse(spec, fmt::format("tp={} does not divide the MLP size {}", rs.tp, m.ffn));
    constexpr int unset = config::StrategySpec::kUnset, autov = config::StrategySpec::kAuto;
    int pp = spec.pp, dp = spec.dp;
    if (pp == autov && dp == autov) refuse(spec, "pp and dp cannot both be auto");
    if (pp == unset && dp == unset) {
        // Cache-aware partitioning makes one pipeline stage per GPU (group);
        // otherwise no pipeline unless asked, data parallel over the rest.
        if (spec.partition == PartitionMethod::cache_aware) pp = autov, dp = 1;
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
            refuse(spec, fmt::format("pp=auto: {} GPUs are not a multiple of {} x dp={}", gpus, tc_name, dp));
        pp = static_cast<int>(gpus / *other);
    }
    if (dp == autov) {
        const auto other = checked_mul(tc, pp);
        if (!divides_gpus(other))
            refuse(spec, fmt::format("dp=auto: {} GPUs are not a multiple of {} x pp={}", gpus, tc_name, pp));
        dp = static_cast<int>(gpus / *other);
    }
    if (const auto all = checked_mul(tc, pp, dp); all != gpus)
        refuse(spec, fmt::format("{} x pp={} x dp={} = {}, but the scenario uses {} GPUs", tc_name, pp, dp,
                                 all ? fmt::format("{}", *all) : std::string("more than 2^63"), gpus));
    if (pp * rs.virtual_stages > m.layers)
        refuse(spec, fmt::format("pp={} x virtual_stages={} exceeds the model's {} layers", pp, rs.virtual_stages,
                                 m.layers));
    rs.pp = pp;
    rs.dp = dp;

    const auto& w = sc.workload;
    std::int64_t sequences = 0;  // per DP replica
    if (w.mode == Mode::training) {
        if (w.global_batch % (dp * w.micro_batch) != 0)
            refuse(spec, fmt::format("global_batch={} is not a multiple of dp={} x micro_batch={}", w.global_batch, dp,
                                     w.micro_batch));
        const std::int64_t mbs = w.global_batch / (dp * w.micro_batch);
        if (spec.microbatches != 0 && spec.microbatches != mbs)
            refuse(spec, fmt::format("microbatches={} contradicts global_batch / (dp x micro_batch) = {}",
                                     spec.microbatches, mbs));
        rs.microbatches = static_cast<int>(mbs);
        rs.microbatch_sizes.assign(static_cast<std::size_t>(mbs), w.micro_batch);
        if (rs.schedule->uses_virtual_stages() && mbs % pp != 0)
            refuse(spec, fmt::format("{} needs micro-batches ({}) to be a multiple of pp={}", rs.schedule->name(), mbs, pp));
    } else {
        if (w.batch < dp) refuse(spec, fmt::format("batch={} is smaller than dp={}", w.batch, dp));
        sequences = (w.batch + dp - 1) / dp;
        const std::int64_t mbs = spec.microbatches != 0 ? spec.microbatches : std::min<std::int64_t>(sequences, pp);
        if (mbs > sequences)
            refuse(spec, fmt::format("microbatches={} exceeds the {} sequences per replica", mbs, sequences));
        rs.microbatches = static_cast<int>(mbs);
        for (std::int64_t j = 0; j < mbs; ++j) rs.microbatch_sizes.push_back(sequences / mbs + (j < sequences % mbs ? 1 : 0));
    }
    const bool uneven = spec.first_stage_layers > 0 || spec.last_stage_layers > 0;
    if (rs.schedule->uses_virtual_stages() && !uneven && m.layers % (pp * rs.virtual_stages) != 0)
        refuse(spec, fmt::format("{} needs layers ({}) divisible by pp x virtual_stages = {}", rs.schedule->name(),
                                 m.layers, pp * rs.virtual_stages));
    return rs;
}

std::vector<LayerRange> split_layers(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                                     ResolvedStrategy& rs, const hw::CostModel& cm) {
    const int nv = rs.pp * rs.virtual_stages;
    std::vector<LayerRange> vstages;
    if (spec.partition == PartitionMethod::cache_aware) {
        if (rs.virtual_stages > 1) refuse(spec, "cache-aware partitioning produces one stage per GPU; use schedule 1f1b or gpipe");
        partition_cache_aware(sc, spec, rs, cm);
        vstages = rs.stage_layers;
    } else {
        const int layers = static_cast<int>(sc.model.layers);
        vstages = spec.first_stage_layers > 0 || spec.last_stage_layers > 0
                      ? uneven_split(spec, layers, rs.pp, rs.virtual_stages)
                      : uniform_split(layers, nv);
        for (int s = 0; s < rs.pp; ++s) {
            int first = static_cast<int>(sc.model.layers), last = 0;
            for (int c = 0; c < rs.virtual_stages; ++c) {
                first = std::min(first, vstages[static_cast<std::size_t>(c * rs.pp + s)].first);
                last = std::max(last, vstages[static_cast<std::size_t>(c * rs.pp + s)].second);
            }
            rs.stage_layers.emplace_back(first, last);
        }
    }
    return vstages;
}

// Per-GPU memory of pipeline stage `s` (every TP rank of a stage is alike).
hw::MemoryBreakdown stage_memory(const config::ScenarioSpec& sc, const ResolvedStrategy& rs, int s,
                                 const std::vector<LayerRange>& vstages) {
    const auto& m = sc.model;
    const auto opt = operator_options(sc, rs);
    int layers = 0;
    bool first = false, last = false;
    for (std::size_t v = 0; v < vstages.size(); ++v) {
        if (static_cast<int>(v) % rs.pp != s) continue;
        layers += vstages[v].second - vstages[v].first;
        first = first || v == 0;
        last = last || v + 1 == vstages.size();
    }
    double weight_bytes = layers * workload::layer_weight_bytes(m, opt);
    if (first) weight_bytes += workload::embedding_weight_bytes(m, opt);
    if (last) {
        weight_bytes += workload::head_weight_bytes(m, opt);
        // A tied head on another stage than the embedding keeps its own copy.
        if (m.tied_embeddings && !first) weight_bytes += workload::embedding_weight_bytes(m, opt);
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
        b.weights = weight_bytes / (rs.zero >= 3 ? shards : 1);
        b.gradients = params * state.gradients / (rs.zero >= 2 ? shards : 1);
        b.optimizer = params * state.optimizer / (rs.zero >= 1 ? shards : 1);
        const int layers_per_chunk = std::max(1, layers / rs.virtual_stages);
        const auto inflight_chunks = static_cast<double>(
            rs.schedule->chunks_in_flight(PipelineShape{rs.pp, rs.microbatches, rs.virtual_stages}, s));
        b.activations = workload::layer_activation_bytes(m, sh.train, opt, sc.workload.recompute) *
                        layers_per_chunk * inflight_chunks;
        b.workspace = workload::workspace_bytes(m, sh.train, opt, true);
    } else {
        b.weights = weight_bytes;
        const std::int64_t replica_batch =
            std::accumulate(rs.microbatch_sizes.begin(), rs.microbatch_sizes.end(), std::int64_t{0});
        b.kv_cache = layers * workload::layer_kv_bytes(m, replica_batch,
                                                        sc.workload.prompt_tokens + sc.workload.output_tokens, opt);
        b.workspace = workload::workspace_bytes(m, sh.prefill, opt, false);
    }
    return b;
}

}  // namespace sim::parallel
