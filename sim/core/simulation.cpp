// The run loop, with its cheap invariant checks kept in Release builds.
#include "sim/core/simulation.h"

#include "sim/core/error.h"

namespace sim {

void Simulation::scheduled_in_the_past(Time at) const {
    throw InternalError(fmt::format("event scheduled in the past: at {} ps while the clock is at {} ps", at.count_ps(),
                                    now_.count_ps()));
}

void Simulation::clock_passed(Time delay) const {
    throw ModelError(
        fmt::format("the simulated clock would pass its 213 days (2^64 ps): an event {:.3g} s after "
                    "{:.3g} s; check bandwidths and sizes for values near zero",
                    delay.seconds(), now_.seconds()));
}

bool Simulation::step(Time limit) {
    Callback cb;
    Time t;
    if (!queue_.pop_until(limit, t, cb)) return false;
    if (t < now_) throw InternalError("event queue returned an event earlier than the clock");
    now_ = t;
    ++events_;
    cb();
    return true;
}

void Simulation::run() {
    while (step(Time::max())) {}
}

void Simulation::run_until(Time until) {
    while (step(until)) {}
    if (until > now_) now_ = until;
}

std::uint64_t Simulation::run_events(std::uint64_t n) {
    std::uint64_t ran = 0;
    while (ran < n && step(Time::max())) ++ran;
    return ran;
}

}  // namespace sim
