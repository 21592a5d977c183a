// What a run reports: the metrics of DESIGN.md section 7 computed from a
// plan and its execution, and writers for tables, JSON and CSV (the JSON
// layout is documented in docs/output.md and is stable).
#pragma once

#include "sim/config/scenario.h"
#include "sim/exec/executor.h"
#include "sim/parallel/builder.h"

#include <optional>
#include <string>
#include <vector>

namespace sim::report {

struct RunMetrics {
    std::string strategy;
    int gpus = 0;
    bool feasible = true;
    std::string note;  // why infeasible, or the partitioner's conclusion
    hw::MemoryVerdict memory;
    int memory_stage = 0;
    parallel::ResolvedStrategy resolved;
    std::optional<double> tokens_per_s, tpot_ms, inv_tps_ms, ttft_ms, iteration_ms, mfu, hfu, l2_hit_rate, hbm_bytes,
        gpu_busy;
    std::optional<double> link_nvlink, link_pcie, link_network;
    std::optional<double> frac_compute, frac_memory, frac_communication, frac_idle;
    // Of frac_communication, the part spent in all-to-alls (MoE dispatch and
    // combine); set when the plan has any (report/exchange_time.h).
    std::optional<double> frac_all_to_all;
    std::uint64_t events = 0;
    double simulated_seconds = 0;  // wall of the simulated run (iteration, or prefill + simulated decode)
};

// Metrics of an executed plan (exec == nullptr for an out-of-memory plan).
RunMetrics compute_metrics(const config::ScenarioSpec& scenario, const parallel::PlanBuild& build,
                           const exec::ExecResult* exec);

// One JSON object {"strategy":...,"gpus":...,...} for a run (no trailing newline).
std::string run_json(const RunMetrics& m);
// `extra_members`: more "key":value members of the top-level object, if any.
std::string format_json(const std::string& scenario, const std::vector<RunMetrics>& runs,
                        const std::string& extra_members = "");
std::string format_csv(const std::vector<RunMetrics>& runs, const std::vector<std::string>& extra_columns = {},
                       const std::vector<std::vector<std::string>>& extra_values = {});
std::string format_table(const config::ScenarioSpec& scenario, const std::vector<RunMetrics>& runs);
// Formats a number for JSON deterministically (shortest round-trip form), or null.
std::string json_number(const std::optional<double>& v);
// A JSON string literal of any bytes (invalid UTF-8 becomes U+FFFD).
std::string json_string(const std::string& s);
// One RFC 4180 CSV field: quoted when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& s);
// Quotes text as a gnuplot single-quoted string literal, the only way report
// text (scenario, strategy and swept-value names: anything a scenario file
// says) may enter a gnuplot script. Inside '...' gnuplot substitutes neither
// backquotes nor @macros and knows one escape, '' for a quote; a newline (or
// any control character) would end the command, so each becomes a space.
// Nothing the text contains can end the literal.
std::string gnuplot_string(const std::string& s);

}  // namespace sim::report
