// Serving points of a validation dataset, parasim's extension of the shared
// format (docs/validation.md §2, "Serving points"): a point of kind
// `serving` carries the precision and the scenario's own `serving:` block
// (arrivals, lengths, scheduler, limits; read by config::read_serving, so
// the two formats cannot drift), and a measured throughput or latency
// statistic. It is simulated by the engine of `parasim serve`
// (serve::simulate_serving, serve::summarize), on the cluster, GPU and
// software profile that translate.h builds for every whole-run point.
#pragma once

#include "sim/config/serving_spec.h"
#include "sim/validate/dataset.h"
#include "sim/validate/translate.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sim::validate {

// A serving point's `workload:` map: dtype, kv_dtype, attention or
// flash_attention as for inference points, and `serving:` (required). A
// trace file is read beside the dataset.
// `block` receives the `serving:` map as flow YAML (serving_yaml of the Point).
config::WorkloadSpec read_serving_workload(const config::Node& node, std::vector<std::string>& defaults,
                                           std::string& block);

// The longest sequence (prompt + output) the lengths can give, the default
// for the model's max_seq; 0 when unbounded (lognormal without `max`).
std::int64_t serving_max_seq(const config::ServingSpec& s);

// `measured.statistic` of a serving point: p50 | p90 | p99 | mean for a
// latency metric (ttft_ms, tpot_ms, e2e_ms), absent for a throughput.
Statistic read_statistic(const std::optional<config::Node>& node, Metric metric, const config::Node& measured);

struct ServingValue {
    std::optional<double> value;  // empty: the run does not produce the metric (reason in `detail`)
    std::string detail;
};

// Runs the point's serving workload on its setup and reads the metric.
ServingValue simulate_serving_point(const Point& p, const Setup& s);

}  // namespace sim::validate
