// The discrete-event engine: a clock and an event queue. Components schedule
// callbacks at absolute times or after delays; run() executes them in
// (time, insertion) order. A Simulation is one sequential run; several may
// live in one process (sweeps run them on different threads), so there is no
// global state here.
#pragma once

#include "sim/core/event_queue.h"

#include <cstdint>

namespace sim {

class Simulation {
public:
    Time now() const { return now_; }

    // Schedules `cb` at absolute time `at`; `at` earlier than now() is an
    // InternalError naming both times.
    EventId schedule_at(Time at, const Callback& cb) {
        if (at < now_) [[unlikely]]
            scheduled_in_the_past(at);
        return queue_.push(at, cb);
    }
    // A delay that would carry the clock past 2^64 ps (213 days) is a
    // ModelError: each duration fits the clock (Time::from_seconds_ceil), so
    // only a run of inputs near zero (bandwidths, rates) reaches the end of it.
    EventId schedule_after(Time delay, const Callback& cb) {
        if (delay > Time::max() - now_) [[unlikely]]
            clock_passed(delay);
        return schedule_at(now_ + delay, cb);
    }
    bool cancel(EventId id) { return queue_.cancel(id); }

    // Runs until no event is pending.
    void run();
    // Runs every event with time <= `until`, then advances the clock to `until`.
    void run_until(Time until);
    // Runs at most `n` events; returns how many ran.
    std::uint64_t run_events(std::uint64_t n);

    std::uint64_t events_processed() const { return events_; }
    std::size_t pending() const { return queue_.size(); }
    void reserve(std::size_t n) { queue_.reserve(n); }

private:
    [[noreturn]] void scheduled_in_the_past(Time at) const;
    [[noreturn]] void clock_passed(Time delay) const;
    bool step(Time limit);

    EventQueue queue_;
    Time now_{};
    std::uint64_t events_ = 0;
};

}  // namespace sim
