// The serving event loop (docs/serving.md, "The loop", "Replicas and the
// router", "Disaggregated prefill and decode"): arrivals, the replicas'
// iterations and the KV transfers as events of one sim::Simulation. Each
// replica has its own engine state (queue, running set, KV pool) and
// scheduler pass; a router sends each request to a replica of the pool it
// enters. Disaggregated, a prefill replica's finished prompt waits for KV
// blocks on the decode replica the router chose, and its cache then moves
// as one flow per tensor-parallel rank on the cluster's flow network. With
// pp > 1 a replica has up to pp batches in flight, each crossing the stages
// in turn, its activations sent between stages as flows on the same network
// (docs/serving.md, "Pipeline parallelism"). Under data-parallel attention
// the replicas are the ranks of engines that step in lockstep.
#pragma once

#include "sim/config/scenario.h"
#include "sim/serve/iteration_cost.h"
#include "sim/serve/requests.h"
#include "sim/serve/simulator.h"

#include <vector>

namespace sim::serve {

struct LoopSetup {
    const config::ScenarioSpec& scenario;  // the whole cluster (the KV flows run on its topology)
    IterationCost& cost;                   // one replica's iteration times (the replicas are alike)
    int tp = 1, replicas = 1, prefill_replicas = 0;
    std::size_t max_timeline = 1000;
    const net::LinkClassSpec* pcie = nullptr;  // swap preemption: each GPU's link to host memory
    // Disaggregated with decode replicas of another tp: their iteration
    // times and KV pool (null: the decode replicas are like the others).
    IterationCost* decode_cost = nullptr;
    int decode_tp = 0;
    const KvPool* decode_pool = nullptr;
    // Pipeline parallelism (pp > 1): each stage's part of an iteration, the
    // activation bytes each TP rank sends per token across a stage
    // boundary, and how the replica's GPUs are laid out.
    int pp = 1;
    std::vector<IterationCost*> stage_costs = {};
    double boundary_bytes_per_token = 0;
    parallel::Placement placement = parallel::Placement::tp_first;
    // Data-parallel attention (docs/serving.md, "Data-parallel attention"):
    // the replicas (one a GPU) form engines of `lockstep` ranks, each with
    // its own scheduler and KV pool, which start every iteration together
    // and end it together, when the slowest rank's batch ends. 1: every
    // replica on its own.
    int lockstep = 1;
    // Disaggregated: the decode pool's engines' ranks (decode_dp; 1: decode
    // replicas on their own). `lockstep` is then the prefill pool's.
    int decode_lockstep = 1;
    // Every request arrives with its cache in place (serving.prefilled):
    // the replicas only decode, and an arrival takes its blocks and joins
    // the running set as a transferred cache does, without a transfer.
    bool prefilled = false;
};

// Runs every request to its end; fills res.records (whose requests are
// set), the timeline and the counters. InternalError when a replica can
// make no progress.
void run_serving_loop(const LoopSetup& setup, const std::vector<Request>& requests, ServeResult& res);

}  // namespace sim::serve
