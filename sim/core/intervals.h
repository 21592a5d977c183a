// Time intervals [start, end) and their union: what the time breakdowns
// (exec's per-GPU breakdown, report's exposed all-to-all) ask when several
// streams may be busy at once and each instant must count once.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "sim/core/units.h"

namespace sim {

using TimeInterval = std::pair<Time, Time>;  // [first, second)

// The union of `intervals` as disjoint intervals in start order; intervals
// that overlap or touch join into one.
inline std::vector<TimeInterval> interval_union(std::vector<TimeInterval> intervals) {
    std::sort(intervals.begin(), intervals.end());
    std::vector<TimeInterval> merged;
    for (const TimeInterval& c : intervals) {
        if (!merged.empty() && c.first <= merged.back().second)
            merged.back().second = std::max(merged.back().second, c.second);
        else merged.push_back(c);
    }
    return merged;
}

}  // namespace sim
