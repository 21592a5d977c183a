// The classic hold model, used to benchmark the event queue: a fixed
// population of pending events; each step pops the earliest and schedules one
// at a later time drawn from a seeded generator. Run on parasim's engine and,
// as a baseline, on std::priority_queue with std::function events (the shape
// of a straightforward simulator).
#pragma once

#include <cstdint>

namespace parasim_cli {

struct HoldResult {
    std::uint64_t pending = 0;
    std::uint64_t events = 0;
    double engine_events_per_s = 0.0;
    double baseline_events_per_s = 0.0;
    // Sum of event times seen, so both runs are checked to do the same work.
    std::uint64_t engine_checksum = 0;
    std::uint64_t baseline_checksum = 0;
};

HoldResult run_hold_benchmark(std::uint64_t pending, std::uint64_t events, std::uint64_t seed);

}  // namespace parasim_cli
