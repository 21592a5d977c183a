// The serving engine's front end (front_end.h; docs/serving.md, "Host time of
// the serving engine").
#include "sim/serve/front_end.h"

#include "sim/config/software_loader.h"
#include "sim/core/checked.h"
#include "sim/core/error.h"

#include <algorithm>
#include <utility>

namespace sim::serve {

FrontEnd::FrontEnd(Simulation& sim, const config::SoftwareProfile& profile, std::function<void(std::uint32_t)> enter)
    : sim_(sim),
      enter_(std::move(enter)),
      sequence_cost_(profile.serving_sequence_overhead),
      request_cost_(profile.serving_request_overhead),
      token_cost_(profile.serving_token_overhead),
      request_latency_(profile.serving_request_latency),
      delayed_intake_(request_cost_ > Time{} || request_latency_ > Time{}) {}

// count x each, checked.
Time FrontEnd::times(Time each, std::size_t count) const {
    const auto ps = checked_mul(each.count_ps(), count);
    if (!ps) throw InternalError("serving host time overflows");
    return Time::ps(*ps);
}

// Without an intake cost or latency the request enters at once (the loop
// without a front end, event for event).
void FrontEnd::intake(std::uint32_t id) {
    if (!delayed_intake_) {
        enter_(id);
        return;
    }
    Time at = sim_.now();
    if (request_cost_ > Time{} && token_cost_ > Time{}) {
        // Streaming goes first: the intake starts once the tokens already
        // queued are out, and is postponed by those that come in meanwhile.
        at = intake_free_ = std::max({intake_free_, stream_free_, at}) + request_cost_;
        const Time shift = stream_shift_;
        sim_.schedule_at(at, [this, id, shift] { taken_in(id, shift); });
        return;
    }
    if (request_cost_ > Time{}) at = intake_free_ = std::max(intake_free_, at) + request_cost_;
    at += request_latency_;
    sim_.schedule_at(at, [this, id] { enter_(id); });
}

// The end of a request's intake as it was scheduled; tokens streamed since
// (stream_shift_ - shifted) postpone it, then the latency follows.
void FrontEnd::taken_in(std::uint32_t id, Time shifted) {
    if (stream_shift_ != shifted) {
        const Time shift = stream_shift_;
        sim_.schedule_at(sim_.now() + (shift - shifted), [this, id, shift] { taken_in(id, shift); });
        return;
    }
    if (request_latency_ == Time{}) enter_(id);
    else sim_.schedule_at(sim_.now() + request_latency_, [this, id] { enter_(id); });
}

// Request intake does not delay tokens (streaming goes first: a token never
// waits for every queued intake, docs/serving.md); intake still pending waits
// for them instead.
Time FrontEnd::deliver(std::int64_t tokens) {
    if (token_cost_ == Time{} || tokens == 0) return sim_.now();
    const Time work = times(token_cost_, static_cast<std::size_t>(tokens));
    stream_free_ = std::max(stream_free_, sim_.now()) + work;
    if (intake_free_ > sim_.now()) {
        intake_free_ += work;
        stream_shift_ += work;
    }
    return stream_free_;
}

}  // namespace sim::serve
