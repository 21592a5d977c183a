// A GPU's time breakdown over a whole run, taken as the run goes.
//
// breakdown_of (breakdown.cpp) computes a GPU's breakdown over a window from
// its intervals: the union of its communication intervals (tasks of kind
// communication on its streams other than compute), the sums of its
// compute-stream tasks' durations, and their overlap with that union. Over
// the whole run, every figure can be taken at the moment it becomes known,
// in the order breakdown_of adds it, so the result is the same double for
// double (a test compares every GPU of several runs) without reading a
// plan-sized set of times again after the run:
//   - a stream runs one task at a time in program order, so the compute
//     stream's tasks end in the order breakdown_of sums them;
//   - the union's intervals close in start order; one closes only when the
//     next communication starts later than its end (touching intervals
//     join, as interval_union joins them), so its end is settled lazily;
//   - the overlap is a sum of pieces, one per (union interval, compute task)
//     pair that intersect, in that order: disjoint pieces, so the order is
//     the order in time, and each is added when it ends (at the task's end,
//     or at the union interval's end while the task runs on).
// Zero-length intervals add nothing either way (x + 0.0 == x for x >= 0).
#pragma once

#include "sim/core/units.h"
#include "sim/exec/executor.h"

#include <algorithm>
#include <cstdint>

namespace sim::exec {

class RunBreakdown {
public:
    // A task of the GPU's compute stream starts / ends at `now`.
    void compute_begin(Time now) {
        settle(now);
        k_start_ = now;
        k_running_ = true;
    }
    void compute_end(Time now, IntervalKind kind) {
        settle(now);
        if (now > k_start_) {
            const double d = (now - k_start_).seconds();
            total_ += d;
            (kind == IntervalKind::compute_kernel ? compute_ : memory_) += d;
        }
        if (u_open_) piece(now);
        k_running_ = false;
    }
    // A communication task on another of its streams starts / ends.
    void comm_begin(Time now) {
        settle(now);
        if (!u_open_) {
            u_start_ = now;
            u_open_ = true;
        }
        ++comm_;
    }
    void comm_end(Time now) {
        if (--comm_ == 0) u_end_ = now;
    }
    // The breakdown over [0, makespan], once the run is over.
    TimeBreakdown result(Time makespan) {
        TimeBreakdown b;
        if (makespan <= Time{}) return b;
        if (u_open_ && comm_ == 0) close();
        b.compute = compute_;
        b.memory = memory_;
        b.communication = comm_total_ - overlap_;
        b.idle = std::max(0.0, (makespan - Time{}).seconds() - total_ - b.communication);
        return b;
    }

private:
    // A union interval whose communication all ended before `now` is over;
    // one that ended at `now` may go on (a task starting now joins it).
    void settle(Time now) {
        if (u_open_ && comm_ == 0 && u_end_ < now) close();
    }
    void close() {
        comm_total_ += (u_end_ - u_start_).seconds();
        if (k_running_) piece(u_end_);
        u_open_ = false;
    }
    // The running compute task's overlap with the open union interval, up to `e`.
    void piece(Time e) {
        const Time a = std::max(k_start_, u_start_);
        if (e > a) overlap_ += (e - a).seconds();
    }

    double total_ = 0, compute_ = 0, memory_ = 0;  // compute-stream sums
    double comm_total_ = 0, overlap_ = 0;
    Time k_start_;            // the running compute task's start
    Time u_start_, u_end_;    // the open union interval (u_end_: when comm_ fell to 0)
    std::uint32_t comm_ = 0;  // communication tasks running
    bool k_running_ = false, u_open_ = false;
};

}  // namespace sim::exec
