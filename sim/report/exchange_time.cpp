// Exposed all-to-all time (see exchange_time.h): the union of the GPU's
// all-to-all intervals minus its overlap with the compute stream's.
#include "sim/report/exchange_time.h"

#include "sim/core/intervals.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace sim::report {

using parallel::StreamKind;
using parallel::TaskKind;

bool has_all_to_all(const parallel::Plan& plan) { return plan.all_to_alls > 0; }

double exposed_all_to_all_seconds(const parallel::Plan& plan, const exec::ExecResult& r, std::uint32_t local, Time from,
                                  Time to) {
    if (to <= from) return 0.0;
    const auto cs = static_cast<std::size_t>(StreamKind::compute);
    std::vector<TimeInterval> a2a;
    for (std::size_t s = 0; s < parallel::kStreamCount; ++s) {
        if (s == cs) continue;
        for (std::uint32_t id : plan.streams[local][s]) {
            const parallel::Task& t = plan.tasks[id];
            if (t.kind != TaskKind::collective || t.op != net::CollectiveOp::all_to_all) continue;
            const Time a = std::max(r.task_start[id], from), e = std::min(r.task_end[id], to);
            if (e > a) a2a.emplace_back(a, e);
        }
    }
    if (a2a.empty()) return 0.0;
    const std::vector<TimeInterval> merged = interval_union(std::move(a2a));
    // Compute-stream intervals are in start order and do not overlap (one
    // in-order stream): sweep both lists, subtracting what they cover.
    const auto& ks = plan.streams[local][cs];
    double exposed = 0;
    std::size_t j = 0;
    for (const auto& [a, e] : merged) {
        double covered = 0;
        while (j < ks.size() && r.task_end[ks[j]] <= a) ++j;
        for (std::size_t k = j; k < ks.size(); ++k) {
            const Time ka = r.task_start[ks[k]], ke = r.task_end[ks[k]];
            if (ka >= e) break;
            const Time oa = std::max(ka, a), oe = std::min(ke, e);
            if (oe > oa) covered += (oe - oa).seconds();
        }
        exposed += (e - a).seconds() - covered;
    }
    return exposed;
}

}  // namespace sim::report
