// The cache-aware partitioner (DESIGN.md section 8): per-layer time from the
// cost model and per-layer working set, then the min-max contiguous split
// (partitioner.h) whose every stage fits the L2 (or a given size), else HBM,
// else balancing time only. One stage per GPU (group); no virtual stages.
#include "sim/parallel/partition/i_partitioner.h"
#include "sim/parallel/strategy.h"
#include "sim/workload/footprint.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sim::parallel::partitioners_impl {

namespace {

using config::Mode;

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
        const double weights = workload::layer_weight_bytes(m, opt).as_double();
        if (inference) {
            const double decode = ops_time(workload::layer_forward(m, l, 0, sh.decode_mid, opt), sc.gpu, cm);
            const double prefill = ops_time(workload::layer_forward(m, l, 0, sh.prefill, opt), sc.gpu, cm);
            // sh.prefill is one prefill sub-batch (prefill_sub_batch); a micro-batch runs this many.
            const double passes =
                std::ceil(static_cast<double>(rs.microbatch_sizes.front()) / static_cast<double>(sh.prefill.batch));
            cost[l] = prefill * passes * rs.microbatches +
                      decode * rs.microbatches * static_cast<double>(sc.workload.output_tokens);
            const double kv_mid = workload::layer_kv_bytes(m, replica_batch, sh.decode_mid.context, opt).as_double();
            const double kv_full =
                workload::layer_kv_bytes(m, replica_batch, sc.workload.prompt_tokens + sc.workload.output_tokens, opt)
                    .as_double();
            l2_set[l] = weights + kv_mid;  // re-read on every decode step
            hbm_set[l] = weights + kv_full;
        } else {
            const double fwd = ops_time(workload::layer_forward(m, l, 0, sh.train, opt), sc.gpu, cm);
            const double bwd =
                ops_time(workload::layer_backward(m, l, 0, sh.train, opt, sc.workload.recompute), sc.gpu, cm);
            cost[l] = (fwd + bwd) * rs.microbatches;
            l2_set[l] = weights;
            const double act = workload::layer_activation_bytes(m, sh.train, opt, sc.workload.recompute).as_double();
            // Training state: the footprint's own bytes per parameter (one
            // definition; 16 with 16-bit weights and Adam).
            hbm_set[l] = weights / hw::bytes_per_element(opt.precision.weights) *
                             workload::training_state_bytes_per_param(opt).total() +
                         act * std::min(rs.microbatches, rs.pp);
        }
    }
    const auto& shape = inference ? sh.prefill : sh.train;
    const double boundary = workload::boundary_activation_bytes(m, inference ? sh.decode_mid : shape, opt).as_double();
    const double l2_capacity =
        spec.capacity == CapacityLevel::bytes ? spec.capacity_bytes.as_double() : sc.gpu.l2_size.as_double();
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

class CacheAware final : public IPartitioner {
public:
    std::string_view name() const override { return "cache-aware"; }
    std::string_view description() const override {
        return "min-max layer split by simulated time whose stages fit L2 (or a size), else HBM";
    }
    bool computes_split() const override { return true; }
    std::vector<LayerRange> split(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                                  ResolvedStrategy& rs, const hw::CostModel& cm) const override {
        if (rs.virtual_stages > 1 || rs.schedule->chunks(PipelineShape{rs.pp, rs.microbatches, 1}) > 1)
            refuse(spec, "cache-aware partitioning produces one stage per GPU; use schedule 1f1b or gpipe");
        if (spec.first_stage_layers > 0 || spec.last_stage_layers > 0)
            refuse(spec,
                   "first_stage_layers / last_stage_layers set the split by hand; cache-aware partitioning "
                   "computes it");
        partition_cache_aware(sc, spec, rs, cm);
        return rs.stage_layers;
    }
};

}  // namespace

const IPartitioner& cache_aware() {
    static const CacheAware instance;
    return instance;
}

}  // namespace sim::parallel::partitioners_impl
