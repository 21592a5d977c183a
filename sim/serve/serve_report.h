// What a serving run reports (docs/serving.md, "Metrics"; layout in
// docs/output.md): per-request latencies, their percentiles, throughput,
// goodput under the SLOs, preemptions, the overload verdict, and writers for
// the summary table, JSON and the per-request CSV.
#pragma once

#include "sim/config/scenario.h"
#include "sim/serve/simulator.h"

#include <optional>
#include <string>

namespace sim::serve {

struct Percentiles {
    double p50 = 0, p90 = 0, p99 = 0, mean = 0;
    std::size_t count = 0;
};
// Nearest-rank percentiles (the value at rank ceil(p n)); zeros when empty.
Percentiles percentiles(std::vector<double> values);

struct ServeSummary {
    std::size_t measured = 0;  // requests after the warm-up
    Percentiles queue_ms, ttft_ms, tpot_ms, e2e_ms, max_gap_ms;
    double window_s = 0;      // first measured arrival to last measured finish
    double offered_rate = 0;  // measured requests / their arrival span (req/s)
    double requests_per_s = 0, output_tokens_per_s = 0, total_tokens_per_s = 0;
    std::optional<double> goodput_per_s;   // requests meeting every SLO given, per second
    std::optional<double> slo_attainment;  // their share
    double mean_batch = 0;                 // sequences per iteration, averaged over every iteration
    double peak_kv_use = 0;                // largest share of the KV pool in use
    // The wait grows with arrival time (least-squares slope, s per s of
    // arrivals) at or above kOverloadSlope: the queue grows without bound.
    // The wait is the queueing delay, plus, disaggregated, the wait for the
    // decode pool's blocks (RequestRecord::kv_wait_s).
    double queue_slope = 0;
    bool overloaded = false;
    // Disaggregated: each measured request's KV transfer (its descriptors
    // posted, then first byte to last) and its wait for decode blocks, and the transfer's share of TTFT,
    // sum of transfer times / sum of TTFTs.
    Percentiles kv_transfer_ms, kv_wait_ms;
    double kv_transfer_share = 0;
    // Prefix caching: the share of measured requests that found the prefix
    // cached, and the prompt tokens they skipped.
    double prefix_hit_rate = 0;
    std::int64_t prefix_tokens_skipped = 0;
};
inline constexpr double kOverloadSlope = 0.05;

ServeSummary summarize(const config::ScenarioSpec& scenario, const ServeResult& result);

std::string serve_table(const config::ScenarioSpec& scenario, const ServeResult& r, const ServeSummary& s);
std::string serve_json(const config::ScenarioSpec& scenario, const ServeResult& r, const ServeSummary& s);
// One row per request: index, arrival, lengths, queueing, TTFT, TPOT, end to end, preemptions.
std::string serve_requests_csv(const ServeResult& r, std::int64_t warmup);

}  // namespace sim::serve
