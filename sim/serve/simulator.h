// The request-level serving simulation (docs/serving.md): requests arrive
// over time, a scheduler (scheduler/) forms each iteration from the waiting
// and running requests under the paged KV pool (kv_blocks.h), and every
// iteration takes the time of its own plan on the executor
// (iteration_cost.h). One replica of the strategy's tp GPUs; pp = 1.
#pragma once

#include "sim/config/scenario.h"
#include "sim/hw/memory.h"
#include "sim/parallel/builder.h"
#include "sim/serve/requests.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sim::serve {

struct RequestRecord {
    Request request;
    double first_scheduled_s = -1;  // start of the first iteration that fed it
    double first_token_s = -1;      // end of the iteration that sampled its first token
    double finish_s = -1;           // end of the iteration that sampled its last token
    double max_gap_s = 0;           // longest gap between two of its tokens
    std::uint32_t preemptions = 0;
};

// The engine after an iteration.
struct TimelinePoint {
    double t_s = 0;
    std::int64_t batch = 0;      // sequences in the iteration
    std::int64_t tokens = 0;     // tokens fed
    std::int64_t kv_blocks = 0;  // blocks in use after it
    std::int64_t waiting = 0;
};

// How the KV pool was sized (per GPU of the replica).
struct KvPool {
    hw::MemoryBreakdown memory;  // weights and workspace (kv_cache 0)
    double budget_bytes = 0;     // capacity x gpu_memory_utilization
    double bytes_per_token = 0;  // K and V of every layer of this GPU's shard
    std::int64_t blocks = 0, block_size = 0;
};

struct ServeResult {
    std::string strategy;
    int gpus = 0;
    KvPool pool;
    std::vector<RequestRecord> records;  // arrival order
    std::vector<TimelinePoint> timeline; // every stride-th iteration (stride a power of 2), under 2 x max_timeline points, and the last
    double mean_batch = 0;               // sequences per iteration, over every iteration
    std::int64_t peak_kv_blocks = 0;     // over every iteration
    std::uint64_t iterations = 0, preemptions = 0, cache_hits = 0, cache_misses = 0, clamped = 0;
    double end_s = 0;                    // the last request's finish
};

struct ServeOptions {
    std::string cost_model = "roofline";
    std::size_t max_timeline = 1000;
};

// KV pool of a replica: (capacity x utilisation - weights - workspace) /
// (block_size x bytes per token). ConfigError at the strategy when nothing is left.
KvPool size_kv_pool(const config::ScenarioSpec& scenario, const parallel::PlanBuild& build);

// Runs the scenario's serving workload under `strategy`. ConfigError for what
// cannot run (pp > 1, unfused attention, a request larger than the pool).
ServeResult simulate_serving(const config::ScenarioSpec& scenario, const config::StrategySpec& strategy,
                             const ServeOptions& options);

}  // namespace sim::serve
