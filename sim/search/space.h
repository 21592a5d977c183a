// The `search:` block of a scenario (docs/planning.md): the space of
// strategies the plan search enumerates, the constraints a plan must meet
// and the objective that ranks plans. Read with file:line:column errors;
// checked for emptiness and contradictions before anything is enumerated.
#pragma once

#include "sim/config/scenario.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sim::search {

// One dimension of the space: `auto` (values that follow from the GPU count,
// the model and the workload; expanded per GPU count) or the listed values.
// A dimension the block does not name is fixed at the scenario's first
// strategy (or workload) value.
template <class T>
struct Dimension {
    bool is_auto = false;
    std::vector<T> values;
};

enum class Objective {
    tokens_per_s,          // training or inference: whole-cluster tokens/s
    tokens_per_s_per_gpu,  // tokens/s divided by the GPUs used
    cost,                  // dollars per million tokens, from price_per_gpu_hour
    time_to_budget,        // training: seconds to train token_budget tokens (less is better)
};

struct SearchSpec {
    SourceLocation where;   // the search: block
    std::vector<int> gpus;  // GPU counts searched, ascending
    Dimension<int> tp, pp, dp, cp, ep, zero, virtual_stages;
    // Transformer layers on the first / last pipeline rank (0: an even
    // split); auto: even, or one layer short of the even share (pp >= 2).
    Dimension<int> first_stage_layers, last_stage_layers;
    Dimension<bool> sp;
    Dimension<const parallel::IPipelineSchedule*> schedule;
    Dimension<std::int64_t> micro_batch, batch;
    Dimension<workload::Recompute> recompute;
    // Fraction of HBM a plan must leave free. Default 0.10: vLLM leaves the
    // same share by default (gpu_memory_utilization 0.9, docs.vllm.ai, engine
    // arguments), for the allocator's fragmentation and the CUDA context,
    // which the analytic footprint does not count.
    double memory_headroom = 0.10;
    std::optional<double> ttft_ms, tpot_ms;  // inference SLOs (<=)
    Objective objective = Objective::tokens_per_s;
    double price_per_gpu_hour = 0;  // dollars; objective cost only
    double token_budget = 0;        // tokens; objective time_to_budget only
};

SearchSpec read_search(const config::ScenarioSpec& sc);

std::string to_string(Objective o);
std::string to_string(workload::Recompute r);

}  // namespace sim::search
