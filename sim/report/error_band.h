// How sure a run is: the error parasim showed against published runs of the
// same kind (dense or mixture of experts), on the same GPU and software stack
// where there are enough of them, on the reference set and on the points no
// constant was fitted to (docs/validation.md; the figures come from
// docs/validation-bands.yaml, which docs/validation.sh writes from `parasim
// validate`). A run on a GPU or stack that no validated point used gets a
// warning, not a number it has not earned.
#pragma once

#include "sim/config/scenario.h"

#include <optional>
#include <string>
#include <vector>

namespace sim::report {

// One line of the bands file: the MAPE of `n` simulated published runs of
// `kind` ("training" / "inference" / "serving"), narrowed to a GPU and a
// software stack when those are set ("" = any). Serving bands are per
// metric class: "throughput", "median" (p50, p90 and mean latencies) or
// "p99"; other kinds have none ("").
struct ValidatedBand {
    std::string kind, gpu, software;
    double mape = 0;
    int n = 0;
    bool fitted = false;  // the stack's efficiency was fitted on these runs: in-sample
    std::string metric;   // serving bands only
    bool unseen = false;  // from the unseen sets (docs/validation.md section 5), else the reference set
    bool moe = false;     // runs of models with routed experts (their own band: they err differently)
};

struct Bands {
    std::vector<ValidatedBand> bands;
    std::string source;  // what produced them (dataset and command)
};

// Reads a bands file (the shipped one: data_dir()/docs/validation-bands.yaml).
Bands load_bands(const std::string& path);
const Bands& shipped_bands();

struct ErrorBand {
    std::optional<ValidatedBand> band;         // the narrowest reference band with at least kMinPoints runs
    std::optional<ValidatedBand> unseen_band;  // the same among the unseen sets' bands
    std::vector<std::string> warnings;         // what no validated run covers
    // A serving run: the narrowest band of each metric class that has one
    // (throughput, median, p99, in that order); `band` is the first of them.
    bool serving = false;
    std::vector<ValidatedBand> by_metric;
};
inline constexpr const char* kServingMetrics[] = {"throughput", "median", "p99"};
inline constexpr int kMinPoints = 3;

ErrorBand expected_error(const config::ScenarioSpec& sc, const Bands& bands);
// "expected error: training on h100-sxm with megatron-core: MAPE 4.1% over 5
// published runs (docs/validation.md)", the unseen band's line after it
// ("... over N published runs parasim was never fitted to ..."), then one
// "warning: ..." line each.
// A serving run gets one "expected error: serving ... (p99): ..." line per
// metric class that has a band (docs/serving.md).
std::string format_error_band(const ErrorBand& e);
// "\"expected_error\":{...}": the band (or null) and the warnings, for a JSON report.
std::string error_band_json_member(const ErrorBand& e);

}  // namespace sim::report
