// The plan search (docs/planning.md): enumerate the strategies of a
// scenario's search: block, keep those `run` can form (the same rules,
// parallel::try_resolve_degrees) and whose analytic memory fits with the
// headroom, order them by an optimistic objective from a lower bound on the
// iteration time, and simulate them best-first (threads, or MPI ranks
// through an executor, work.h) until no remaining candidate's bound can beat
// the k-th best result. Results never depend on the thread or rank count.
#pragma once

#include "sim/config/scenario.h"
#include "sim/report/metrics.h"
#include "sim/search/space.h"
#include "sim/search/work.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sim::search {

// One point of the space: a GPU count, a strategy and the workload knobs.
struct Candidate {
    std::size_t id = 0;  // its place in the enumeration (stable for --explain)
    int gpus = 0;
    config::StrategySpec strategy;
    std::int64_t micro_batch = 1;  // training
    workload::Recompute recompute = workload::Recompute::none;
    std::int64_t batch = 1;  // inference
};

enum class Verdict {
    equivalent,   // the same plan as an earlier candidate (sp at tp 1, ZeRO without replicas, ...)
    invalid,      // `run` would refuse it (why in note)
    over_memory,  // analytic footprint above (1 - headroom) x HBM
    pruned,       // its bound cannot beat the k-th best simulated plan
    simulated,
};

struct Outcome {
    Candidate candidate;
    Verdict verdict = Verdict::invalid;
    std::string note;                           // why invalid / over memory / infeasible
    double memory_bytes = 0;                    // analytic footprint of the most loaded GPU
    double bound_s = 0;                         // iteration lower bound (training; 0 otherwise)
    double optimistic = 0;                      // objective at the bound (higher is better)
    std::optional<report::RunMetrics> metrics;  // when simulated
    std::optional<double> value;  // objective (higher is better) when simulated and every constraint holds
    std::string violated;         // the constraint a simulated plan misses, with its numbers
};

struct SearchOptions {
    bool prune = true;  // false: simulate every candidate that fits memory
    int keep = 5;       // k: prune against the k-th best
    int threads = 0;    // 0: all cores
    // Called after each simulation (serialised): done, handed out so far.
    std::function<void(std::size_t, std::size_t)> progress;
    // Runs the simulations (work.h); returns whether this process holds the
    // results (false on the helper ranks of an MPI run). Default: run_local
    // on `threads` threads.
    std::function<bool(OrderedWork&)> executor;
};

struct SearchResult {
    SearchSpec spec;
    std::vector<Outcome> outcomes;    // every candidate, by id
    std::vector<std::size_t> ranked;  // ids of plans meeting every constraint, best first
    bool complete = true;             // false where an executor ran the work for another process
    std::size_t generated = 0, equivalent = 0, invalid = 0, over_memory = 0, pruned = 0, simulated = 0;
};

// The scenario of one candidate (its GPU count and workload knobs set).
config::ScenarioSpec candidate_scenario(const config::ScenarioSpec& sc, const Candidate& c);
// The candidates of the space, in enumeration order (ids 0, 1, ...).
std::vector<Candidate> enumerate(const config::ScenarioSpec& sc, const SearchSpec& spec);
// The objective's value of a simulated run (higher is better), before constraints.
std::optional<double> objective_value(const SearchSpec& spec, const config::ScenarioSpec& sc, const Candidate& c,
                                      const report::RunMetrics& m);
SearchResult run_search(const config::ScenarioSpec& sc, const SearchOptions& options);
// "candidates: N generated, ..." for reports.
std::string counts_line(const SearchResult& r);
// "no plan satisfies ...", with the closest candidates and what each misses.
std::string no_plan_message(const SearchResult& r);

}  // namespace sim::search
