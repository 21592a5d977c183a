// The serving engine's front end (docs/serving.md, "Host time of the serving
// engine"): the host work outside the engine's step, from a software
// profile's `serving:` times. It owns when a request sent by a client reaches
// the engine (intake) and when the tokens a step sampled reach their clients
// (streaming); the engine's own host time per step is sequences x
// sequence_overhead (step_host_time). With every time at zero it is not
// there: a request enters at once and tokens reach clients at the step's end.
#pragma once

#include "sim/core/simulation.h"
#include "sim/core/units.h"

#include <cstddef>
#include <cstdint>
#include <functional>

namespace sim::config {
struct SoftwareProfile;
}

namespace sim::serve {

class FrontEnd {
public:
    // `enter(id)` hands request `id` to the engine, at the end of its intake.
    FrontEnd(Simulation& sim, const config::SoftwareProfile& profile, std::function<void(std::uint32_t)> enter);

    // Request `id` was sent now: it enters after the intake work queued before
    // it, plus request_overhead, plus request_latency (at once without either).
    void intake(std::uint32_t id);
    // `tokens` sampled now: when their clients have them, after the streaming
    // work queued before, plus token_overhead each.
    Time deliver(std::int64_t tokens);
    // The engine's host time for one step of `sequences` sequences.
    Time step_host_time(std::size_t sequences) const { return times(sequence_cost_, sequences); }
    bool streams() const { return token_cost_ > Time{}; }
    // When the last token queued so far reaches its client.
    Time stream_end() const { return stream_free_; }

private:
    Time times(Time each, std::size_t count) const;
    void taken_in(std::uint32_t id, Time shifted);

    Simulation& sim_;
    std::function<void(std::uint32_t)> enter_;
    // One CPU whose token streaming (FIFO, work ending at stream_free_) goes
    // before request intake (FIFO, its work ending at intake_free_): intake
    // runs only while no token is waiting, so every token's work that comes in
    // while intake is pending postpones all pending intake by that much
    // (stream_shift_ sums it); request_latency_ delays a request without
    // occupying the front end.
    Time sequence_cost_{}, request_cost_{}, token_cost_{}, request_latency_{};
    bool delayed_intake_ = false;
    Time intake_free_{}, stream_free_{}, stream_shift_{};
};

}  // namespace sim::serve
