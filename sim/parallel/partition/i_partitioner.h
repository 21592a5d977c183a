// The partitioner interface and its registry. A partitioner decides which
// transformer layers each (virtual) pipeline stage runs: evenly, by hand
// (first/last_stage_layers), or from a cost and capacity model. One .cpp per
// partitioner in this folder, listed in registry.cpp (docs/architecture.md,
// "Registries"); a scenario names one in `partition: {method: NAME}`.
#pragma once

#include "sim/parallel/partitioner.h"

#include <string>
#include <string_view>
#include <vector>

namespace sim::config {
struct ScenarioSpec;
struct StrategySpec;
}  // namespace sim::config
namespace sim::hw {
class CostModel;
}

namespace sim::parallel {

struct ResolvedStrategy;

class IPartitioner {
public:
    virtual ~IPartitioner() = default;
    // The name a scenario gives in `partition: {method: NAME}`.
    virtual std::string_view name() const = 0;
    // One line for `parasim list partitioners`.
    virtual std::string_view description() const = 0;
    // Whether the partitioner computes the split itself: it then refuses a
    // split given by hand (first/last_stage_layers) and virtual stages, and
    // `pp: auto` gives it every GPU (one stage per GPU, dp 1).
    virtual bool computes_split() const { return false; }
    // The layers of each virtual stage (vs = chunk x pp + stage), filling
    // rs.stage_layers (and, for a capacity-aware partitioner, the working
    // sets, fits and note); refuses (ConfigError) what it cannot split.
    virtual std::vector<LayerRange> split(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                                          ResolvedStrategy& rs, const hw::CostModel& cm) const = 0;
};

// Every registered partitioner, in listing order; read-only after first use.
const std::vector<const IPartitioner*>& partitioners();
std::vector<std::string> partitioner_names();
// ModelError naming the registered partitioners when `name` is unknown.
const IPartitioner& partitioner(std::string_view name);
// What a strategy runs when it names none (uniform).
const IPartitioner& default_partitioner();

}  // namespace sim::parallel
