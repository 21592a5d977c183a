// The request-level serving simulation (docs/serving.md): requests arrive
// over time, a scheduler (scheduler/) forms each iteration from the waiting
// and running requests under the paged KV pool (kv_blocks.h), and every
// iteration takes the time of its own plan on the executor
// (iteration_cost.h). dp replicas of the strategy's tp x pp GPUs behind a
// router (with pp > 1, up to pp batches in flight through the stages),
// optionally split into prefill and decode pools (pp 1) with the KV cache
// moved between them as flows (serving_loop.h).
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
    std::int32_t replica = 0;            // where it was routed (its prefill replica when disaggregated)
    std::int32_t decode_replica = -1;    // disaggregated: where it decoded (-1: not)
    double prefill_done_s = -1;          // disaggregated: end of the prefill that sampled its first token
    double kv_transfer_s = 0;            // disaggregated: its KV transfer, descriptors posted, then first byte to last
    double kv_wait_s = 0;                // disaggregated: prefill end to transfer start (decode blocks short)
    std::int64_t prefix_hit_tokens = 0;  // prompt tokens found in the replica's prefix cache
};

// One replica over the run.
struct ReplicaStats {
    const char* role = "both";  // "both", "prefill" or "decode"
    int first_gpu = 0, tp = 1;  // GPUs first_gpu .. first_gpu + tp x pp - 1
    int pp = 1;
    std::uint64_t iterations = 0, requests = 0, preemptions = 0;
    double busy_s = 0;  // time inside iterations
    std::int64_t peak_kv_blocks = 0;
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
    double non_torch_bytes = 0;  // held outside the allocator (the profile's non_torch_memory), off the budget
    double bytes_per_token = 0;  // K and V of every layer of this GPU's shard
    std::int64_t blocks = 0, block_size = 0;
    // Regions of one block on this GPU that a KV transfer moves separately:
    // each layer's K and V (one latent for MLA), vLLM's NIXL descriptors.
    std::int64_t regions_per_block = 0;
    int binding_stage = 0;  // pipeline parallel: the stage whose memory sets `blocks` (the others alike or larger)
};

struct ServeResult {
    std::string strategy;
    int gpus = 0;
    KvPool pool;                         // of each replica (disaggregated: of the prefill replicas)
    std::vector<RequestRecord> records;  // arrival order
    std::string router;
    int tp = 1, replicas = 1, prefill_replicas = 0;  // prefill_replicas 0: not disaggregated
    int pp = 1;                                      // pipeline stages per replica
    int decode_tp = 0;                               // disaggregated with decode replicas of another tp (0: not)
    KvPool decode_pool;                              // theirs (when decode_tp is set)
    int decode_dp = 0;  // disaggregated: the decode engines' data-parallel-attention ranks (0: not)
    // Data-parallel attention: ranks (replicas) per lockstep engine (0: not).
    int attention_dp = 0;
    std::vector<ReplicaStats> replica_stats;
    double kv_bytes_moved = 0;                                      // disaggregated: over every transfer, all GPUs
    double swap_out_bytes = 0, swap_in_bytes = 0, swap_time_s = 0;  // swap preemption, per GPU
    std::uint64_t tokens_fed = 0;  // through the model, every replica (recomputed ones again)
    std::vector<TimelinePoint>
        timeline;  // replica 0's: every stride-th iteration (stride a power of 2), under 2 x max_timeline points, and the last
    double mean_batch = 0;            // sequences per iteration, over every iteration of every replica
    std::int64_t peak_kv_blocks = 0;  // over every iteration and replica
    std::uint64_t iterations = 0, preemptions = 0, cache_hits = 0, cache_misses = 0, clamped = 0;
    double end_s = 0;  // the last request's finish
};

struct ServeOptions {
    std::string cost_model = "roofline";
    std::size_t max_timeline = 1000;
};

// KV pool of a replica: (capacity x utilisation - weights - workspace) /
// (block_size x bytes per token). ConfigError at the strategy when nothing is left.
KvPool size_kv_pool(const config::ScenarioSpec& scenario, const parallel::PlanBuild& build);

// Runs the scenario's serving workload under `strategy`: gpus / (tp x pp)
// replicas of tp x pp GPUs each. ConfigError for what cannot run (a pp that
// `run` refuses, pp > 1 with disaggregation, swap or a scheduler that is not
// iteration-level, unfused attention, a request larger than the pool, no
// decode replica left).
ServeResult simulate_serving(const config::ScenarioSpec& scenario, const config::StrategySpec& strategy,
                             const ServeOptions& options);

}  // namespace sim::serve
