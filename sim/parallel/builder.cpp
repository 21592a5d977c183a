// Strategy resolution, stage partitioning, memory accounting and task
// emission for training and inference.
#include "sim/parallel/builder.h"

#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/workload/operators.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>

namespace sim::parallel {

namespace {

using config::Mode;
using config::PipelineSchedule;
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
    if (spec.partition == config::PartitionMethod::cache_aware)
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
    rs.virtual_stages = spec.schedule == PipelineSchedule::interleaved_one_f_one_b ? spec.virtual_stages : 1;
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
        if (spec.partition == config::PartitionMethod::cache_aware) pp = autov, dp = 1;
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
        if (rs.schedule == PipelineSchedule::interleaved_one_f_one_b && mbs % pp != 0)
            refuse(spec, fmt::format("interleaved-1f1b needs micro-batches ({}) to be a multiple of pp={}", mbs, pp));
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
    if (rs.schedule == PipelineSchedule::interleaved_one_f_one_b && !uneven && m.layers % (pp * rs.virtual_stages) != 0)
        refuse(spec, fmt::format("interleaved-1f1b needs layers ({}) divisible by pp x virtual_stages = {}", m.layers,
                                 pp * rs.virtual_stages));
    return rs;
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
    const double l2_capacity = spec.capacity == config::CapacityLevel::bytes ? spec.capacity_bytes.as_double()
                                                                              : sc.gpu.l2_size.as_double();
    const double hbm_capacity = sc.gpu.memory_capacity.as_double();
    std::string level = spec.capacity == config::CapacityLevel::hbm ? "hbm" : "l2";
    std::optional<std::vector<LayerRange>> parts;
    if (level == "l2") {
        parts = min_max_partition(cost, l2_set, rs.pp, l2_capacity - boundary);
        if (!parts) {
            const double smallest = *std::min_element(l2_set.begin(), l2_set.end()) + boundary;
            rs.partition_note = fmt::format(
                "no split into {} stages fits the {} capacity of {}: one layer's working set alone is {} (weights{} + "
                "boundary activation); falling back to HBM",
                rs.pp, spec.capacity == config::CapacityLevel::bytes ? "given" : "L2", format_bytes(l2_capacity),
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
        double inflight_chunks = 0;
        switch (rs.schedule) {
            case PipelineSchedule::gpipe: inflight_chunks = rs.microbatches; break;
            case PipelineSchedule::one_f_one_b: inflight_chunks = std::min(rs.microbatches, rs.pp - s); break;
            case PipelineSchedule::interleaved_one_f_one_b:
                // Up to 2^30 micro-batches x 1024 virtual stages: past an int.
                inflight_chunks = static_cast<double>(std::min<std::int64_t>(
                    checked_mul(std::int64_t{rs.microbatches}, rs.virtual_stages).value_or(INT64_MAX),
                    (rs.pp - s - 1) * 2 + (rs.virtual_stages - 1) * rs.pp + 1));
                break;
        }
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

// ---------------------------------------------------------------------------
// Task emission.

struct Emitter {
    const config::ScenarioSpec& sc;
    const ResolvedStrategy& rs;
    const BuildOptions& options;
    workload::OperatorOptions opt;
    Plan& plan;
    std::vector<LayerRange> vstages;  // layer range of each virtual stage
    // members[s] = simulated GPUs of stage s as (dp replica, cp rank, tp rank, local id)
    struct Member {
        int d, c, r;
        std::uint32_t local;
    };
    std::vector<std::vector<Member>> members;
    std::map<std::tuple<int, int, int>, std::uint32_t> group_cache;  // (kind, stage, index) -> group
    std::string collective_algorithm = "auto";

    config::StrategySpec::Placement placement = config::StrategySpec::Placement::tp_first;
    std::vector<std::vector<std::size_t>> cp_next;  // cp_next[s][i]: member index of i's successor on the CP ring

    // GPU id of DP replica d, stage s, CP rank c, TP rank r. tp-first: TP
    // ranks, then CP ranks, are consecutive (a cp group stays in a node when
    // tp x cp divides gpus_per_node); pp-first: stages are consecutive.
    int real(int d, int s, int c, int r) const {
        const int replica = d * rs.pp * rs.cp * rs.tp;
        return placement == config::StrategySpec::Placement::tp_first ? replica + s * rs.cp * rs.tp + c * rs.tp + r
                                                                      : replica + (c * rs.tp + r) * rs.pp + s;
    }

    void setup() {
        members.assign(static_cast<std::size_t>(rs.pp), {});
        const int dps = options.collapse ? 1 : rs.dp;
        const int tps = options.collapse ? 1 : rs.tp;
        // CP ranks exchange K/V every layer, so all of them are simulated
        // (their ring transfers are the dependencies of each other's attention).
        for (int d = 0; d < dps; ++d)
            for (int s = 0; s < rs.pp; ++s)
                for (int c = 0; c < rs.cp; ++c)
                    for (int r = 0; r < tps; ++r) {
                        const auto local = static_cast<std::uint32_t>(plan.simulated_gpus.size());
                        plan.simulated_gpus.push_back(real(d, s, c, r));
                        members[static_cast<std::size_t>(s)].push_back(Member{d, c, r, local});
                    }
        // Ring neighbour: the member of the same stage, replica and TP rank on the next CP rank.
        cp_next.assign(members.size(), {});
        for (std::size_t s = 0; s < members.size(); ++s) {
            const auto& mem = members[s];
            std::map<std::tuple<int, int, int>, std::size_t> index;  // (d, c, r) -> member
            for (std::size_t i = 0; i < mem.size(); ++i) index.emplace(std::make_tuple(mem[i].d, mem[i].c, mem[i].r), i);
            cp_next[s].resize(mem.size());
            for (std::size_t i = 0; i < mem.size(); ++i)
                cp_next[s][i] = index.at(std::make_tuple(mem[i].d, (mem[i].c + 1) % rs.cp, mem[i].r));
        }
        plan.streams.resize(plan.simulated_gpus.size());
        plan.gpus_represented = sc.gpus;
    }

    // TP group of replica d, CP rank c at stage s; DP group of TP rank r at
    // stage s. Weights are replicated over the CP ranks, so gradients are
    // reduced over dp x cp GPUs (rank order: replica, then CP rank).
    std::uint32_t tp_group(int s, int d, int c) { return group(0, s, d * rs.cp + c); }
    std::uint32_t dp_group(int s, int r) { return group(1, s, r); }
    std::uint32_t group(int kind, int s, int idx) {
        const auto key = std::make_tuple(kind, s, idx);
        if (auto it = group_cache.find(key); it != group_cache.end()) return it->second;
        Group g;
        g.algorithm = collective_algorithm;
        if (kind == 0) {
            for (int i = 0; i < rs.tp; ++i) g.gpus.push_back(real(idx / rs.cp, s, idx % rs.cp, i));
        } else {
            for (int d = 0; d < rs.dp; ++d)
                for (int c = 0; c < rs.cp; ++c) g.gpus.push_back(real(d, s, c, idx));
        }
        for (const auto& mem : members[static_cast<std::size_t>(s)])
            if ((kind == 0 && mem.d * rs.cp + mem.c == idx) || (kind == 1 && mem.r == idx))
                g.members.push_back(mem.local);
        const auto id = plan.add_group(std::move(g));
        group_cache.emplace(key, id);
        return id;
    }

    // Bytes each TP rank sends across a pipeline boundary: Megatron's
    // scatter/gather sends 1/tp of the activation per rank (under sequence
    // parallelism the activation is already sharded that way).
    double boundary_per_rank(const workload::PassShape& shape) const {
        const double b = workload::boundary_activation_bytes(sc.model, shape, opt);
        return opt.sequence_parallel ? b : b / rs.tp;
    }

    Task base(Phase ph, int mb, int layer, int step) const {
        Task t;
        t.phase = ph;
        t.microbatch = mb;
        t.layer = layer;
        t.step = step;
        return t;
    }

    // Emits `ops` on every simulated GPU of stage s in lockstep. `pending`
    // holds, per member, the cross-stream tasks the next kernel must wait
    // for; on return it holds the last task of each member's chain.
    void emit_ops(int s, const std::vector<Operator>& ops, Phase ph, int mb, int step,
                  std::vector<std::vector<std::uint32_t>>& pending, std::vector<std::uint32_t>& last) {
        const auto& mem = members[static_cast<std::size_t>(s)];
        const bool tp_on = rs.tp > 1;
        std::vector<std::uint32_t> ring_in(mem.size(), kNone);  // the task that made the chunk a member forwards next
        for (const auto& op : ops) {
            if (tp_on && rs.overlap.tp_comm && overlappable(op)) {
                emit_overlapped(s, op, ph, mb, step, pending, last);
                continue;
            }
            if (tp_on && op.tp_sync == workload::TpSync::before_column_parallel)
                tp_collective(s, net::CollectiveOp::all_gather, op.tp_sync_bytes, ph, mb, step, pending, last);
            if (op.cp_step == 0) ring_in = last;  // K and V (and dO) are ready once the preceding task is
            if (op.cp_step > 0) ring_step(s, op.cp_ring_bytes, ph, mb, step, ring_in, pending);
            for (std::size_t i = 0; i < mem.size(); ++i) {
                Task t = base(ph, mb, -1, step);
                t.kind = TaskKind::kernel;
                t.stream = StreamKind::compute;
                t.gpu = mem[i].local;
                t.kernel = plan.add_kernel(op.kernel);
                last[i] = plan.add(t, pending[i]);
                pending[i].clear();
            }
            if (tp_on && (op.tp_sync == workload::TpSync::after_row_parallel ||
                          op.tp_sync == workload::TpSync::after_column_input_grad)) {
                const auto cop = opt.sequence_parallel ? net::CollectiveOp::reduce_scatter : net::CollectiveOp::all_reduce;
                tp_collective(s, cop, op.tp_sync_bytes, ph, mb, step, pending, last);
            }
        }
    }

    // One step of the context-parallel ring: every CP rank sends the chunk it
    // holds (its own K/V at the first step, then the one it last received) to
    // the next rank on the p2p stream; the receiver's next attention step
    // waits for it, while the current step computes on the chunk already
    // present, so the overlap comes out of the simulation.
    void ring_step(int s, Bytes bytes, Phase ph, int mb, int step, std::vector<std::uint32_t>& ring_in,
                   std::vector<std::vector<std::uint32_t>>& pending) {
        const auto& mem = members[static_cast<std::size_t>(s)];
        const auto& next = cp_next[static_cast<std::size_t>(s)];
        std::vector<std::uint32_t> sent(mem.size());
        for (std::size_t i = 0; i < mem.size(); ++i) {
            Task t = base(ph, mb, -1, step);
            t.kind = TaskKind::transfer;
            t.stream = StreamKind::p2p;
            t.gpu = mem[i].local;
            t.peer = static_cast<std::uint32_t>(plan.simulated_gpus[mem[next[i]].local]);
            t.bytes = bytes;
            std::vector<std::uint32_t> deps;
            if (ring_in[i] != kNone) deps.push_back(ring_in[i]);
            sent[i] = plan.add(t, deps);
        }
        for (std::size_t i = 0; i < mem.size(); ++i) {
            pending[next[i]].push_back(sent[i]);
            ring_in[next[i]] = sent[i];
        }
    }

    void tp_collective(int s, net::CollectiveOp cop, Bytes bytes, Phase ph, int mb, int step,
                       std::vector<std::vector<std::uint32_t>>& pending, std::vector<std::uint32_t>& last) {
        const auto& mem = members[static_cast<std::size_t>(s)];
        const int dps = options.collapse ? 1 : rs.dp;
        for (int d = 0; d < dps; ++d)
            for (int c = 0; c < rs.cp; ++c) {
                Task t = base(ph, mb, -1, step);
                t.kind = TaskKind::collective;
                t.stream = StreamKind::tp_comm;
                t.group = tp_group(s, d, c);
                t.op = cop;
                t.bytes = bytes;
                std::vector<std::uint32_t> deps;
                for (std::size_t i = 0; i < mem.size(); ++i)
                    if (mem[i].d == d && mem[i].c == c) {
                        deps.push_back(last[i]);
                        deps.insert(deps.end(), pending[i].begin(), pending[i].end());
                    }
                t.gpu = plan.groups[t.group].members.front();
                const auto id = plan.add(t, deps);
                for (std::size_t i = 0; i < mem.size(); ++i)
                    if (mem[i].d == d && mem[i].c == c) {
                        pending[i] = {id};
                        last[i] = id;
                    }
            }
    }

    // --tp-comm-overlap (Transformer Engine userbuffers, sequence parallel):
    // the all-gather before a GEMM and the reduce-scatter after it become a
    // ring exchange of tp chunks over point-to-point copies between the TP
    // neighbours, pipelined with the GEMM split into tp chunks of its tokens.
    // All-gather: chunk 0 computes on the local shard while it is sent on;
    // chunk j waits for the shard received at step j - 1, which is forwarded
    // at step j. Reduce-scatter: chunk j computes a partial output block and
    // sends it, added to the partial received, at step j; the result is
    // complete with the last chunk and the last partial received. A rank
    // receives at step j when its own send of step j completes (all ranks run
    // alike), so one simulated TP rank suffices. Copies and GEMM chunks
    // compete for SMs and HBM in the executor. Weight-gradient GEMMs
    // (tokens are their k) keep the plain order.
    static bool overlappable(const Operator& op) {
        return (op.tp_sync == workload::TpSync::before_column_parallel ||
                op.tp_sync == workload::TpSync::after_row_parallel ||
                op.tp_sync == workload::TpSync::after_column_input_grad) &&
               op.kernel.kind == hw::KernelKind::gemm && !op.is_weight_grad && op.cp_step < 0 && op.kernel.m >= 2;
    }

    void emit_overlapped(int s, const Operator& op, Phase ph, int mb, int step,
                         std::vector<std::vector<std::uint32_t>>& pending, std::vector<std::uint32_t>& last) {
        const auto& mem = members[static_cast<std::size_t>(s)];
        const int chunks = static_cast<int>(std::min<std::int64_t>(rs.tp, op.kernel.m));
        const std::uint32_t kernel_id = plan.add_kernel(kernel_chunk(op.kernel, chunks));
        // Bytes of one ring step: one rank's shard of the activation.
        const auto n = static_cast<std::uint64_t>(rs.tp);
        const Bytes shard{(op.tp_sync_bytes.value + n - 1) / n};
        const bool gather_first = op.tp_sync == workload::TpSync::before_column_parallel;
        std::vector<std::uint32_t> sent(mem.size(), kNone);  // each member's latest ring copy
        auto copy = [&](std::size_t i, std::vector<std::uint32_t> deps) {
            Task t = base(ph, mb, -1, step);
            t.kind = TaskKind::transfer;
            t.stream = StreamKind::p2p;
            t.gpu = mem[i].local;
            t.peer = static_cast<std::uint32_t>(real(mem[i].d, s, mem[i].c, (mem[i].r + 1) % rs.tp));
            t.bytes = shard;
            if (sent[i] != kNone) deps.push_back(sent[i]);
            sent[i] = plan.add(t, deps);
        };
        for (int j = 0; j < chunks; ++j) {
            for (std::size_t i = 0; i < mem.size(); ++i) {
                std::vector<std::uint32_t> input = pending[i];
                if (last[i] != kNone) input.push_back(last[i]);
                std::vector<std::uint32_t> deps = j == 0 ? input : std::vector<std::uint32_t>{};
                if (gather_first && j > 0) deps.push_back(sent[i]);  // the shard received at step j - 1
                if (gather_first && j + 1 < chunks) copy(i, j == 0 ? input : std::vector<std::uint32_t>{});
                Task t = base(ph, mb, -1, step);
                t.kind = TaskKind::kernel;
                t.stream = StreamKind::compute;
                t.gpu = mem[i].local;
                t.kernel = kernel_id;
                last[i] = plan.add(t, deps);
                pending[i].clear();
                if (!gather_first && j + 1 < chunks) copy(i, {last[i]});
            }
        }
        if (!gather_first)
            for (std::size_t i = 0; i < mem.size(); ++i)
                if (sent[i] != kNone) pending[i] = {sent[i]};  // the last partial received
    }

    // One of `chunks` equal token slices of a GEMM (m is the token dimension):
    // FLOPs, bytes and tensors scale by 1 / chunks (the weight is re-read by
    // every slice but stays in L2 between them, so its HBM traffic is not repeated).
    static hw::KernelDesc kernel_chunk(const hw::KernelDesc& k, int chunks) {
        hw::KernelDesc c = k;
        const auto n = static_cast<std::uint64_t>(chunks);
        const auto part = [n](Bytes b) { return Bytes{(b.value + n - 1) / n}; };
        c.name = k.name + "_chunk";
        c.m = (k.m + chunks - 1) / chunks;
        c.flops = Flops{k.flops.value / static_cast<double>(chunks)};
        c.bytes_read = part(k.bytes_read);
        c.bytes_written = part(k.bytes_written);
        c.epilogue_read = part(k.epilogue_read);
        for (auto& u : c.tensors) u.size = part(u.size);
        return c;
    }

    // Point-to-point sends from every member of stage `from` to its
    // counterpart on stage `to`; returns, per member of `to`, the transfer it waits for.
    std::vector<std::vector<std::uint32_t>> send(int from, int to, Bytes bytes, Phase ph, int mb, int step,
                                                 const std::vector<std::uint32_t>& last) {
        const auto& src = members[static_cast<std::size_t>(from)];
        const auto& dst = members[static_cast<std::size_t>(to)];
        std::vector<std::vector<std::uint32_t>> out(dst.size());
        for (std::size_t i = 0; i < src.size(); ++i) {
            if (from == to) {
                out[i].push_back(last[i]);
                continue;
            }
            Task t = base(ph, mb, -1, step);
            t.kind = TaskKind::transfer;
            t.stream = StreamKind::p2p;
            t.gpu = src[i].local;
            t.peer = static_cast<std::uint32_t>(real(src[i].d, to, src[i].c, src[i].r));
            t.bytes = bytes;
            const auto id = plan.add(t, {last[i]});
            out[i].push_back(id);  // members are laid out alike on every stage
        }
        return out;
    }

    std::vector<Operator> forward_ops(int vs, int mb, const workload::PassShape& shape, bool training) const {
        std::vector<Operator> ops;
        const auto& m = sc.model;
        if (vs == 0) {
            auto e = workload::embedding_forward(m, mb, shape, opt);
            ops.insert(ops.end(), e.begin(), e.end());
        }
        for (int l = vstages[static_cast<std::size_t>(vs)].first; l < vstages[static_cast<std::size_t>(vs)].second; ++l) {
            auto f = workload::layer_forward(m, l, mb, shape, opt);
            ops.insert(ops.end(), f.begin(), f.end());
        }
        if (vs + 1 == static_cast<int>(vstages.size())) {
            auto h = workload::head_forward(m, mb, shape, opt, training);
            ops.insert(ops.end(), h.begin(), h.end());
        }
        return ops;
    }
};

void emit_inference(Emitter& em, PlanBuild& out) {
    const auto& sc = em.sc;
    const auto& rs = em.rs;
    const int pp = rs.pp, m = rs.microbatches;
    const auto& w = sc.workload;
    const int steps = static_cast<int>(std::min<std::int64_t>(w.decode_steps_simulated, w.output_tokens));
    out.decode_steps = steps;
    const std::int64_t mid = std::max<std::int64_t>(1, w.output_tokens / 2);
    out.decode_context_first = w.prompt_tokens + std::max<std::int64_t>(1, mid - steps / 2);
    std::vector<std::uint32_t> prefill_end(static_cast<std::size_t>(m)), step_end(static_cast<std::size_t>(m));
    const std::size_t width = em.members.front().size();

    // A pass walks every virtual stage in order (virtual stage vs runs on
    // stage vs mod pp); inference has no backward to interleave with, so the
    // schedule only decides where the layers live.
    const int nv = static_cast<int>(em.vstages.size());
    auto run_pass = [&](Phase ph, int j, const workload::PassShape& shape, int step,
                        std::vector<std::vector<std::uint32_t>> entry) {
        std::vector<std::uint32_t> last(width, kNone);
        for (int vs = 0; vs < nv; ++vs) {
            const int s = vs % pp;
            em.emit_ops(s, em.forward_ops(vs, j, shape, false), ph, j, step, entry, last);
            if (vs + 1 < nv) entry = em.send(s, (vs + 1) % pp, Bytes::ceil(em.boundary_per_rank(shape)), ph, j, step, last);
        }
        return last.front();
    };

    for (int j = 0; j < m; ++j) {
        const workload::PassShape shape{rs.microbatch_sizes[static_cast<std::size_t>(j)], w.prompt_tokens, w.prompt_tokens};
        prefill_end[static_cast<std::size_t>(j)] =
            run_pass(Phase::prefill, j, shape, -1, std::vector<std::vector<std::uint32_t>>(width));
        out.plan.markers.push_back(prefill_end[static_cast<std::size_t>(j)]);
    }
    for (int k = 0; k < steps; ++k) {
        for (int j = 0; j < m; ++j) {
            const std::int64_t ctx = out.decode_context_first + k;
            const workload::PassShape shape{rs.microbatch_sizes[static_cast<std::size_t>(j)], 1, ctx};
            // The sampled token of the previous pass returns to the first
            // stage (token ids, 4 bytes per sequence).
            const std::uint32_t prev = k == 0 ? prefill_end[static_cast<std::size_t>(j)] : step_end[static_cast<std::size_t>(j)];
            std::vector<std::vector<std::uint32_t>> entry(width);
            if (pp > 1) {
                std::vector<std::uint32_t> lasts(width, prev);
                entry = em.send(pp - 1, 0, Bytes{static_cast<std::uint64_t>(4 * shape.batch)}, Phase::decode, j, k, lasts);
            } else {
                for (auto& e : entry) e.push_back(prev);
            }
            step_end[static_cast<std::size_t>(j)] = run_pass(Phase::decode, j, shape, k, entry);
            out.plan.markers.push_back(step_end[static_cast<std::size_t>(j)]);
        }
    }
}

// One pipeline schedule entry: forward or backward of micro-batch `mb` on model chunk `chunk`.
struct Item {
    bool forward;
    int mb;
    int chunk;
};

std::vector<std::vector<Item>> schedule_items(const ResolvedStrategy& rs) {
    const int p = rs.pp, m = rs.microbatches, v = rs.virtual_stages;
    std::vector<std::vector<Item>> out(static_cast<std::size_t>(p));
    for (int s = 0; s < p; ++s) {
        auto& items = out[static_cast<std::size_t>(s)];
        if (rs.schedule == PipelineSchedule::gpipe) {
            for (int j = 0; j < m; ++j) items.push_back({true, j, 0});
            for (int j = 0; j < m; ++j) items.push_back({false, j, 0});
        } else if (rs.schedule == PipelineSchedule::one_f_one_b) {
            const int warmup = std::min(p - s - 1, m);
            int f = 0, b = 0;
            for (; f < warmup; ++f) items.push_back({true, f, 0});
            while (f < m) {
                items.push_back({true, f++, 0});
                items.push_back({false, b++, 0});
            }
            while (b < m) items.push_back({false, b++, 0});
        } else {
            // Megatron-LM's interleaved schedule: the k-th forward on a device
            // runs chunk (k / p) % v of micro-batch (k / (p v)) p + k % p;
            // backwards mirror it with chunks in reverse.
            const int total = m * v;
            const int warmup = std::min(total, (p - s - 1) * 2 + (v - 1) * p);
            auto fwd = [&](int k) { return Item{true, (k / (p * v)) * p + k % p, (k / p) % v}; };
            auto bwd = [&](int k) { return Item{false, (k / (p * v)) * p + k % p, v - 1 - (k / p) % v}; };
            int f = 0, b = 0;
            for (; f < warmup; ++f) items.push_back(fwd(f));
            while (f < total) {
                items.push_back(fwd(f++));
                items.push_back(bwd(b++));
            }
            while (b < total) items.push_back(bwd(b++));
        }
    }
    return out;
}

void emit_training(Emitter& em, PlanBuild& out) {
    const auto& sc = em.sc;
    const auto& rs = em.rs;
    const auto& m = sc.model;
    const auto& w = sc.workload;
    const int p = rs.pp, v = rs.virtual_stages, mbs = rs.microbatches;
    const int nv = p * v;
    const workload::PassShape shape{w.micro_batch, w.seq_len, w.seq_len};
    const auto items = schedule_items(rs);
    const std::size_t width = em.members.front().size();
    const auto params = workload::count_parameters(m);
    const double wbytes = hw::bytes_per_element(em.opt.precision.weights);
    const double grad_bytes = wbytes >= 4 ? 4 : 2;
    const double boundary = em.boundary_per_rank(shape);

    // fwd_done[vs][mb] / bwd_done[vs][mb]: per member, the task the next stage waits for.
    std::vector<std::vector<std::vector<std::vector<std::uint32_t>>>> fwd_out(
        static_cast<std::size_t>(nv), std::vector<std::vector<std::vector<std::uint32_t>>>(static_cast<std::size_t>(mbs)));
    auto bwd_out = fwd_out;
    std::vector<std::vector<int>> bwd_count(static_cast<std::size_t>(p), std::vector<int>(static_cast<std::size_t>(v), 0));
    std::vector<std::vector<std::uint32_t>> host_task(static_cast<std::size_t>(mbs));
    std::vector<std::vector<std::uint32_t>> last_dp(static_cast<std::size_t>(p), std::vector<std::uint32_t>(width, kNone));

    auto dp_collective = [&](int s, net::CollectiveOp op, double bytes, Phase ph, int mb, int layer,
                             const std::vector<std::uint32_t>& after) {
        if (rs.dp * rs.cp <= 1) return;  // gradients are reduced over dp x cp
        const auto& mem = em.members[static_cast<std::size_t>(s)];
        const int tps = em.options.collapse ? 1 : rs.tp;
        for (int r = 0; r < tps; ++r) {
            Task t = em.base(ph, mb, layer, -1);
            t.kind = TaskKind::collective;
            t.stream = StreamKind::dp_comm;
            t.group = em.dp_group(s, r);
            t.op = op;
            t.bytes = Bytes::ceil(bytes);
            t.gpu = em.plan.groups[t.group].members.front();
            std::vector<std::uint32_t> deps;
            for (std::size_t i = 0; i < mem.size(); ++i)
                if (mem[i].r == r && !after.empty()) deps.push_back(after[i]);
            const auto id = em.plan.add(t, deps);
            for (std::size_t i = 0; i < mem.size(); ++i)
                if (mem[i].r == r) last_dp[static_cast<std::size_t>(s)][i] = id;
        }
    };

    // Gradient buckets of a stage: reduced as each layer's last micro-batch
    // completes (overlap.grad_reduce), or all after the stage's backward ends.
    struct Bucket {
        double bytes;
        int layer, mb;
    };
    std::vector<std::vector<Bucket>> deferred(static_cast<std::size_t>(p));
    std::vector<std::vector<std::uint32_t>> stage_end(static_cast<std::size_t>(p), std::vector<std::uint32_t>(width, kNone));
    const auto reduce_op = rs.zero >= 1 ? net::CollectiveOp::reduce_scatter : net::CollectiveOp::all_reduce;
    auto grad_bucket = [&](int s, double bytes, int mb, int layer, const std::vector<std::uint32_t>& after) {
        if (rs.overlap.grad_reduce) dp_collective(s, reduce_op, bytes, Phase::backward, mb, layer, after);
        else deferred[static_cast<std::size_t>(s)].push_back({bytes, layer, mb});
    };

    // overlap.param_gather (ZeRO >= 1): the distributed optimizer's
    // parameter all-gather of the previous step runs bucket by bucket during
    // this forward (steady state), each layer's first forward waiting for its
    // bucket, instead of after the optimizer.
    const bool gather_in_forward = rs.overlap.param_gather && rs.zero >= 1 && rs.dp * rs.cp > 1;
    std::map<int, std::vector<std::uint32_t>> gathered;  // layer (-1 embedding, -2 head) -> per member
    if (gather_in_forward) {
        for (int s = 0; s < p; ++s)
            for (int c = 0; c < v; ++c) {
                const int vs = c * p + s;
                const auto [a, b] = em.vstages[static_cast<std::size_t>(vs)];
                auto bucket = [&](int layer, double count) {
                    dp_collective(s, net::CollectiveOp::all_gather, count / rs.tp * wbytes, Phase::forward, -1, layer, {});
                    gathered[layer] = last_dp[static_cast<std::size_t>(s)];
                };
                if (vs == 0) bucket(workload::kEmbeddingLayer, params.embedding);
                for (int l = a; l < b; ++l) bucket(l, params.per_layer);
                if (vs + 1 == nv) bucket(workload::kHeadLayer, params.lm_head + params.final_norm);
            }
    }
    auto wait_gather = [&](int layer, std::vector<std::vector<std::uint32_t>>& pending) {
        if (!gather_in_forward) return;
        const auto& ids = gathered.at(layer);
        for (std::size_t i = 0; i < width; ++i) pending[i].push_back(ids[i]);
    };

    auto emit_item = [&](int s, const Item& it) {
        const int vs = it.chunk * p + s;
        const auto [first_layer, end_layer] = em.vstages[static_cast<std::size_t>(vs)];
        std::vector<std::uint32_t> last(width, kNone);
        std::vector<std::vector<std::uint32_t>> pending(width);
        if (it.forward) {
            if (vs > 0) pending = fwd_out[static_cast<std::size_t>(vs - 1)][static_cast<std::size_t>(it.mb)];
            if (vs == 0 && w.host_time_per_batch > Time{}) {
                for (std::size_t i = 0; i < width; ++i) pending[i].push_back(host_task[static_cast<std::size_t>(it.mb)][i]);
            }
            std::vector<Operator> ops;
            if (vs == 0) {
                ops = workload::embedding_forward(m, it.mb, shape, em.opt);
                wait_gather(workload::kEmbeddingLayer, pending);
            }
            em.emit_ops(s, ops, Phase::forward, it.mb, -1, pending, last);
            for (int l = first_layer; l < end_layer; ++l) {
                wait_gather(l, pending);
                if (rs.zero >= 3) {
                    dp_collective(s, net::CollectiveOp::all_gather, params.per_layer / rs.tp * wbytes, Phase::forward,
                                  it.mb, l, {});
                    for (std::size_t i = 0; i < width; ++i) pending[i].push_back(last_dp[static_cast<std::size_t>(s)][i]);
                }
                em.emit_ops(s, workload::layer_forward(m, l, it.mb, shape, em.opt), Phase::forward, it.mb, -1, pending,
                            last);
            }
            if (vs + 1 == nv) {
                wait_gather(workload::kHeadLayer, pending);
                em.emit_ops(s, workload::head_forward(m, it.mb, shape, em.opt, true), Phase::forward, it.mb, -1, pending, last);
            }
            auto& slot = fwd_out[static_cast<std::size_t>(vs)][static_cast<std::size_t>(it.mb)];
            if (vs + 1 < nv) slot = em.send(s, (s + 1) % p, Bytes::ceil(boundary), Phase::forward, it.mb, -1, last);
            else slot = std::vector<std::vector<std::uint32_t>>(width);
            for (std::size_t i = 0; i < width; ++i)
                if (vs + 1 == nv) slot[i] = {last[i]};
        } else {
            if (vs + 1 < nv) pending = bwd_out[static_cast<std::size_t>(vs + 1)][static_cast<std::size_t>(it.mb)];
            const bool last_mb = ++bwd_count[static_cast<std::size_t>(s)][static_cast<std::size_t>(it.chunk)] == mbs;
            if (vs + 1 == nv)
                em.emit_ops(s, workload::head_backward(m, it.mb, shape, em.opt), Phase::backward, it.mb, -1, pending, last);
            for (int l = end_layer - 1; l >= first_layer; --l) {
                if (rs.zero >= 3) {
                    dp_collective(s, net::CollectiveOp::all_gather, params.per_layer / rs.tp * wbytes, Phase::backward,
                                  it.mb, l, {});
                    for (std::size_t i = 0; i < width; ++i) pending[i].push_back(last_dp[static_cast<std::size_t>(s)][i]);
                }
                em.emit_ops(s, workload::layer_backward(m, l, it.mb, shape, em.opt, w.recompute), Phase::backward,
                            it.mb, -1, pending, last);
                // Bucketed gradient synchronisation: one bucket per layer,
                // issued once the last micro-batch's gradients are complete,
                // overlapping the backward of earlier layers.
                if (last_mb) grad_bucket(s, params.per_layer / rs.tp * grad_bytes, it.mb, l, last);
            }
            if (vs == 0)
                em.emit_ops(s, workload::embedding_backward(m, it.mb, shape, em.opt), Phase::backward, it.mb, -1,
                            pending, last);
            if (last_mb && vs == 0) grad_bucket(s, params.embedding / rs.tp * grad_bytes, it.mb, -1, last);
            if (last_mb && vs + 1 == nv && params.lm_head > 0)
                grad_bucket(s, params.lm_head / rs.tp * grad_bytes, it.mb, -1, last);
            stage_end[static_cast<std::size_t>(s)] = last;
            auto& slot = bwd_out[static_cast<std::size_t>(vs)][static_cast<std::size_t>(it.mb)];
            if (vs > 0) slot = em.send(s, (s + p - 1) % p, Bytes::ceil(boundary), Phase::backward, it.mb, -1, last);
        }
    };

    // Input pipeline: the host prepares micro-batches in order, one after another.
    if (w.host_time_per_batch > Time{}) {
        for (int j = 0; j < mbs; ++j) {
            for (const auto& mem : em.members.front()) {
                Task t = em.base(Phase::input, j, -1, -1);
                t.kind = TaskKind::host;
                t.stream = StreamKind::host;
                t.gpu = mem.local;
                t.host_time = w.host_time_per_batch;
                host_task[static_cast<std::size_t>(j)].push_back(em.plan.add(t, {}));
            }
        }
    }

    // Emit the per-stage schedules in an order that respects cross-stage
    // dependencies (a schedule is deadlock-free, so this always progresses).
    std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
    std::vector<std::vector<char>> fwd_emitted(static_cast<std::size_t>(nv), std::vector<char>(static_cast<std::size_t>(mbs), 0));
    auto bwd_emitted = fwd_emitted;
    std::size_t remaining = 0;
    for (const auto& v_items : items) remaining += v_items.size();
    while (remaining > 0) {
        bool progress = false;
        for (int s = 0; s < p; ++s) {
            auto& idx = next[static_cast<std::size_t>(s)];
            while (idx < items[static_cast<std::size_t>(s)].size()) {
                const Item it = items[static_cast<std::size_t>(s)][idx];
                const int vs = it.chunk * p + s;
                const bool ready = it.forward ? (vs == 0 || fwd_emitted[static_cast<std::size_t>(vs - 1)][static_cast<std::size_t>(it.mb)])
                                              : (vs + 1 == nv ? fwd_emitted[static_cast<std::size_t>(vs)][static_cast<std::size_t>(it.mb)]
                                                              : bwd_emitted[static_cast<std::size_t>(vs + 1)][static_cast<std::size_t>(it.mb)]);
                if (!ready) break;
                emit_item(s, it);
                (it.forward ? fwd_emitted : bwd_emitted)[static_cast<std::size_t>(vs)][static_cast<std::size_t>(it.mb)] = 1;
                ++idx;
                --remaining;
                progress = true;
            }
        }
        if (!progress) throw InternalError("pipeline schedule deadlocked while emitting the plan");
    }

    // Without overlap.grad_reduce, the buckets go once the stage's backward is done.
    for (int s = 0; s < p; ++s)
        for (const auto& b : deferred[static_cast<std::size_t>(s)])
            dp_collective(s, reduce_op, b.bytes, Phase::backward, b.mb, b.layer, stage_end[static_cast<std::size_t>(s)]);

    // Optimizer step after the gradient collectives, then (ZeRO >= 1, unless
    // it runs during the forward) the parameter all-gather.
    for (int s = 0; s < p; ++s) {
        const auto& mem = em.members[static_cast<std::size_t>(s)];
        double stage_params = 0;
        for (int c = 0; c < v; ++c) {
            const auto [a, b] = em.vstages[static_cast<std::size_t>(c * p + s)];
            stage_params += (b - a) * params.per_layer;
            if (c * p + s == 0) stage_params += params.embedding;
            if (c * p + s == nv - 1) stage_params += params.lm_head + params.final_norm;
        }
        stage_params /= rs.tp;
        const double local_params = stage_params / (rs.zero >= 1 ? rs.dp * rs.cp : 1);
        std::vector<std::uint32_t> opt_task(mem.size());
        for (std::size_t i = 0; i < mem.size(); ++i) {
            Task t = em.base(Phase::optimizer, -1, -1, -1);
            t.kind = TaskKind::kernel;
            t.stream = StreamKind::compute;
            t.gpu = mem[i].local;
            t.kernel = em.plan.add_kernel(workload::optimizer_step(local_params, em.opt).kernel);
            opt_task[i] = em.plan.add(t, {last_dp[static_cast<std::size_t>(s)][i]});
        }
        if (rs.zero >= 1 && !gather_in_forward)
            dp_collective(s, net::CollectiveOp::all_gather, stage_params * wbytes, Phase::optimizer, -1, -1, opt_task);
    }
    out.tokens_per_iteration = static_cast<double>(w.global_batch) * static_cast<double>(w.seq_len);
    out.model_flops = workload::training_flops_per_token(m, w.seq_len) * out.tokens_per_iteration;
}

}  // namespace

PlanBuild build_plan(const config::ScenarioSpec& sc, const config::StrategySpec& spec, const hw::CostModel& cm,
                     const BuildOptions& options) {
    PlanBuild out;
    out.spec = spec;
    ResolvedStrategy rs = resolve_degrees(sc, spec);
    const int nv = rs.pp * rs.virtual_stages;
    std::vector<LayerRange> vstages;
    if (spec.partition == config::PartitionMethod::cache_aware) {
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

    rs.virtual_stage_layers = vstages;

    // Memory: the most loaded stage decides feasibility.
    double worst = -1;
    for (int s = 0; s < rs.pp; ++s) {
        const auto verdict = hw::check_capacity(stage_memory(sc, rs, s, vstages), sc.gpu.memory_capacity);
        if (verdict.breakdown.total() > worst) {
            worst = verdict.breakdown.total();
            out.memory = verdict;
            out.memory_stage = s;
        }
    }
    out.strategy = rs;
    if (out.memory.oom) return out;

    // Collapsing skips the traffic of identical groups, which is only right
    // when those groups do not share links with the simulated one: on a PCIe
    // fabric (GPUs behind shared switches) or with fewer NICs than GPUs per
    // node, every GPU is simulated.
    BuildOptions effective = options;
    const auto& cl = sc.cluster;
    const bool shared_fabric = cl.intra_node == net::IntraNode::pcie || cl.intra_node == net::IntraNode::nvlink_pairs ||
                               (sc.gpus > cl.gpus_per_node && cl.nics_per_node < cl.gpus_per_node);
    if (options.collapse && shared_fabric && (out.strategy.tp > 1 || out.strategy.dp > 1)) {
        effective.collapse = false;
        out.strategy.partition_note += std::string(out.strategy.partition_note.empty() ? "" : "; ") +
                                       "every GPU simulated: replicas share links on this fabric";
    }
    Emitter em{sc, out.strategy, effective, operator_options(sc, out.strategy), out.plan, vstages, {}, {},
               spec.collective, spec.placement, {}};
    em.setup();
    if (sc.workload.mode == Mode::inference) emit_inference(em, out);
    else emit_training(em, out);
    return out;
}

}  // namespace sim::parallel
