// A GPU's time breakdown over a window of a finished run (compute, memory,
// exposed communication, idle), from its intervals: the ones a GpuRecord
// keeps, or the plan's stream orders read with the run's per-task times.
// run_breakdown.h takes the same figures as the run goes.
#include "sim/core/intervals.h"
#include "sim/exec/executor.h"

#include <algorithm>
#include <array>
#include <vector>

namespace sim::exec {

namespace {

using parallel::kStreamCount;
using parallel::Plan;
using parallel::StreamKind;

// A GPU's intervals read through the plan's stream orders and the run's
// per-task times.
struct PlanView {
    PlanView(const Plan& plan, const ExecResult& result, std::uint32_t local) : r(result) {
        for (std::size_t s = 0; s < kStreamCount; ++s) order[s] = plan.streams.view(local, s);
    }
    const ExecResult& r;
    std::array<parallel::StreamOrder::View, kStreamCount> order;
    std::size_t size(std::size_t s) const { return order[s].size(); }
    Interval at(std::size_t s, std::size_t i) const {
        const std::uint32_t id = order[s][i];
        return Interval{r.task_start[id], r.task_end[id], id, r.task_kind[id]};
    }
};

struct RecordView {
    const GpuRecord& g;
    std::size_t size(std::size_t s) const { return g.intervals[s].size(); }
    Interval at(std::size_t s, std::size_t i) const { return g.intervals[s][i]; }
};

// One arithmetic for both sources of intervals: a view gives size(stream)
// and at(stream, i), the i-th interval of that stream in program order.
template <class View>
TimeBreakdown breakdown_of(const View& g, Time from, Time to) {
    TimeBreakdown b;
    if (to <= from) return b;
    auto clip = [&](Time a, Time e, Time& ca, Time& ce) {
        ca = std::max(a, from);
        ce = std::min(e, to);
        return ce > ca;
    };
    // Union of the communication intervals inside the window.
    std::vector<TimeInterval> comm;
    for (std::size_t s = 0; s < kStreamCount; ++s) {
        if (s == static_cast<std::size_t>(StreamKind::compute)) continue;
        for (std::size_t i = 0, n = g.size(s); i < n; ++i) {
            const Interval iv = g.at(s, i);
            Time a, e;
            if (iv.kind == IntervalKind::communication && clip(iv.start, iv.end, a, e)) comm.emplace_back(a, e);
        }
    }
    const std::vector<TimeInterval> merged = interval_union(std::move(comm));
    const auto cs = static_cast<std::size_t>(StreamKind::compute);
    const std::size_t nk = g.size(cs);
    double kernel_time = 0, overlap = 0;
    for (std::size_t i = 0; i < nk; ++i) {
        const Interval k = g.at(cs, i);
        Time a, e;
        if (!clip(k.start, k.end, a, e)) continue;
        const double d = (e - a).seconds();
        kernel_time += d;
        (k.kind == IntervalKind::compute_kernel ? b.compute : b.memory) += d;
    }
    // Kernels are in start order (one in-order stream); sweep both lists.
    std::size_t j = 0;
    for (const auto& m : merged) {
        while (j < nk && g.at(cs, j).end <= m.first) ++j;
        for (std::size_t k = j; k < nk; ++k) {
            const Interval kv = g.at(cs, k);
            if (kv.start >= m.second) break;
            const Time a = std::max(kv.start, m.first), e = std::min(kv.end, m.second);
            if (e > a) overlap += (e - a).seconds();
        }
    }
    double comm_total = 0;
    for (const auto& m : merged) comm_total += (m.second - m.first).seconds();
    b.communication = comm_total - overlap;
    b.idle = std::max(0.0, (to - from).seconds() - kernel_time - b.communication);
    return b;
}

}  // namespace

TimeBreakdown breakdown_in(const GpuRecord& g, Time from, Time to) { return breakdown_of(RecordView{g}, from, to); }

TimeBreakdown breakdown_in(const Plan& plan, const ExecResult& r, std::uint32_t local, Time from, Time to) {
    return breakdown_of(PlanView{plan, r, local}, from, to);
}

}  // namespace sim::exec
