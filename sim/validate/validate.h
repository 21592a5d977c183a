// `parasim validate`: simulate every point of a dataset of published
// measurements with the machinery of `parasim run` and report the error.
//
//   training, inference  report::run_strategy on the translated scenario
//                        (the one path `parasim run` uses); the metric is
//                        read from its RunMetrics (docs/output.md)
//   gemm, attention,     the point's kernels as a one-task-per-kernel plan
//   memory               on one GPU, run by exec::execute (cost model, L2)
//   collective           one collective task over the point's GPUs, run by
//                        exec::execute (comm_tuning's NCCL request, flows
//                        on the generated topology)
//   serving              serve::simulate_serving on the translated scenario
//                        (the path `parasim serve` uses); the metric is read
//                        from its summary (serving_point.h)
//
// Error = (simulated - measured) / measured, signed. MAPE of a kind = mean
// |error| over its simulated points; skipped points are listed with their
// reason and counted apart, never folded into the MAPE.
#pragma once

#include "sim/validate/dataset.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace sim::validate {

struct Outcome {
    std::string id;
    Kind kind = Kind::training;
    Metric metric = Metric::iteration_s;
    Statistic statistic = Statistic::none;  // serving latencies: which one
    double measured = 0;
    bool skipped = false;
    std::string reason;  // why skipped
    double simulated = 0;
    double error = 0;                    // signed fraction
    std::vector<std::string> defaults;   // defaults applied to fields the point left out
    std::vector<std::string> annotated;  // fields an annotations file set (Point::annotated)
    std::string detail;                  // what the simulation did (strategy, algorithm, ...)
    std::string software;                // the point's software.name ("" when it does not say)
    std::string gpu;                     // the point's hardware.gpu (catalog name)
    bool moe = false;                    // the simulated model has routed experts
};

struct KindSummary {
    int simulated = 0;
    int skipped = 0;
    std::optional<double> mape;  // fraction; empty when nothing was simulated
    std::string worst_id;
    double worst_error = 0;  // signed fraction of the worst point
};

struct Report {
    std::string dataset;
    std::string annotations;        // the annotations file applied to the dataset, "" if none
    std::vector<Outcome> outcomes;  // dataset order
    std::array<KindSummary, kKindCount> kinds;
    KindSummary all;
    // Whole runs (training, inference, serving) by software stack, "unstated" where a
    // point does not say; ordered by kind, then name.
    struct StackSummary {
        Kind kind;
        std::string software;
        KindSummary summary;
    };
    std::vector<StackSummary> by_software;
};

struct ValidateOptions {
    int jobs = 0;                  // worker threads; 0 = hardware concurrency
    std::vector<std::string> ids;  // only these points (empty: all)
    std::vector<Kind> kinds;       // only these kinds (empty: all)
    std::string gpu_dir;           // GPU files ("" = topologies/gpus; tools/fit-gemms.py sets it)
    std::string software_dir;      // software profiles ("" = topologies/software; tools/fit-profiles.py sets it)
    std::string attention_fit;     // attention shape constants ("" = topologies/kernels/flash-attention.yaml;
                                   // tools/fit-kernel-constants.py --attention-shape sets it)
    std::string annotations;       // the annotations file already applied to the dataset (reported; annotations.h)
};

// Simulates the points (in parallel; results do not depend on `jobs`).
Report validate(const Dataset& dataset, const ValidateOptions& options = {});

// Summaries from outcomes (validate() calls it; exposed for tests).
void summarise(Report& report);

// The table: one row per point, then MAPE and the worst point per kind, the
// skipped points with their reasons, and the defaults applied.
std::string format_table(const Report& report);
// {"points":[{"id","kind","metric","measured","simulated","error",...}],
//  "mape":{"all","training","inference","gemm","attention","collective","memory","serving"}, ...}
std::string format_json(const Report& report);

}  // namespace sim::validate
