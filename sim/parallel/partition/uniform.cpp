// The uniform partitioner: an even split of the layers over the virtual
// stages, or the split a strategy gives by hand (first_stage_layers /
// last_stage_layers, Megatron-Core's uneven pipeline split).
#include "sim/parallel/index.h"
#include "sim/parallel/partition/i_partitioner.h"
#include "sim/parallel/strategy.h"

#include <algorithm>

namespace sim::parallel::partitioners_impl {

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
// `unit` names what pp counts in the messages ("rank", or "virtual stage"
// for DualPipeV's split of its 2 x pp virtual stages, v then 1).
std::vector<LayerRange> uneven_split(const config::StrategySpec& spec, int layers, int pp, int v,
                                     std::string_view unit = "rank") {
    const int first = spec.first_stage_layers, last = spec.last_stage_layers;
    if (pp < 2) refuse(spec, "first_stage_layers / last_stage_layers need pp >= 2");
    const int fixed = (first > 0) + (last > 0);
    const int middle = pp - fixed;
    const long rest = static_cast<long>(layers) - first - last;
    if (rest < 0 || (middle == 0 && rest != 0) || (middle > 0 && rest < static_cast<long>(middle) * v))
        refuse(spec, fmt::format("first_stage_layers={} + last_stage_layers={} leave {} of the model's {} layers for "
                                 "{} middle {}s{} (each needs at least one)",
                                 first, last, rest, layers, middle, unit,
                                 v > 1 ? fmt::format(" x {} virtual stages", v) : std::string()));
    PerIndex<int> rank_layers(pp);
    const auto middle_split = uniform_split(static_cast<int>(rest), std::max(middle, 1));
    std::size_t k = 0;  // the next middle rank's share
    for (int s = 0; s < pp; ++s) {
        if (s == 0 && first > 0) rank_layers[0] = first;
        else if (s == pp - 1 && last > 0) rank_layers[s] = last;
        else {
            const auto [a, b] = middle_split[k++];
            rank_layers[s] = b - a;
        }
        if (rank_layers[s] < v)
            refuse(spec, fmt::format("pipeline {} {} holds {} layers, fewer than its {} virtual stages", unit, s,
                                     rank_layers[s], v));
    }
    std::vector<LayerRange> out;
    int at = 0;
    for (int vs = 0; vs < pp * v; ++vs) {
        const int s = vs % pp, c = vs / pp;
        const int n = rank_layers[s], base = n / v, extra = n % v;
        // Which chunks take one more layer: the last `extra` on the first rank
        // and the middle ones, the first `extra` on the last rank.
        const bool more = s == pp - 1 && pp > 1 ? c < extra : c >= v - extra;
        const int size = base + (more ? 1 : 0);
        out.emplace_back(at, at + size);
        at += size;
    }
    return out;
}

class Uniform final : public IPartitioner {
public:
    std::string_view name() const override { return "uniform"; }
    std::string_view description() const override {
        return "even layer split over the (virtual) stages, or first/last_stage_layers by hand";
    }
    std::vector<LayerRange> split(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                                  ResolvedStrategy& rs, const hw::CostModel&) const override {
        const int layers = static_cast<int>(sc.model.layers);
        const PipelineShape shape{rs.pp, rs.microbatches, rs.virtual_stages};
        // Whether chunk c of rank s is virtual stage c x pp + s (interleaved).
        // DualPipeV's ranks hold virtual stages s and 2pp - 1 - s instead:
        // there first/last_stage_layers set the first and the last of its
        // 2 x pp virtual stages (both on rank 0), the others split the rest.
        bool by_rank = true;
        for (int s = 0; s < rs.pp; ++s)
            for (int c = 0; c < rs.virtual_stages; ++c)
                by_rank = by_rank && rs.schedule->virtual_stage(shape, s, c) == c * rs.pp + s;
        const std::vector<LayerRange> vstages =
            spec.first_stage_layers > 0 || spec.last_stage_layers > 0
                ? (by_rank ? uneven_split(spec, layers, rs.pp, rs.virtual_stages)
                           : uneven_split(spec, layers, rs.pp * rs.virtual_stages, 1, "virtual stage"))
                : uniform_split(layers, rs.pp * rs.virtual_stages);
        // A rank's layers span its chunks, as the schedule places them.
        for (int s = 0; s < rs.pp; ++s) {
            int first = layers, last = 0;
            for (int c = 0; c < rs.schedule->chunks(shape); ++c) {
                const auto [a, b] = vstages[as_index(rs.schedule->virtual_stage(shape, s, c))];
                first = std::min(first, a);
                last = std::max(last, b);
            }
            rs.stage_layers.emplace_back(first, last);
        }
        return vstages;
    }
};

}  // namespace

const IPartitioner& uniform() {
    static const Uniform instance;
    return instance;
}

}  // namespace sim::parallel::partitioners_impl
