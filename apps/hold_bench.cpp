// Hold-model benchmark of the engine against a std::priority_queue baseline.
#include "apps/hold_bench.h"

#include "sim/core/simulation.h"

#include <chrono>
#include <functional>
#include <queue>
#include <vector>

namespace parasim_cli {

namespace {

using sim::Simulation;
using sim::Time;

// Increment distribution of the hold model: uniform on [1 ps, 2 us] from a
// splitmix64 generator, cheap enough that the queue, not the generator, is
// what the benchmark measures.
__extension__ typedef unsigned __int128 Uint128;  // a GNU type: -Wpedantic accepts it marked so

struct Increments {
    explicit Increments(std::uint64_t seed) : state(seed) {}
    std::uint64_t next() {
        std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z ^= z >> 31;
        return 1 + static_cast<std::uint64_t>((static_cast<Uint128>(z) * 2'000'000ULL) >> 64);
    }
    std::uint64_t state;
};

struct EngineHold {
    Simulation sim;
    Increments inc;
    std::uint64_t checksum = 0;
    explicit EngineHold(std::uint64_t seed) : inc(seed) {}
    void fire() {
        checksum += sim.now().count_ps();
        sim.schedule_after(Time::ps(inc.next()), [this] { fire(); });
    }
};

struct BaselineEvent {
    std::uint64_t time_ps;
    std::uint64_t sequence;
    std::function<void()> action;
};
struct BaselineLater {
    bool operator()(const BaselineEvent& a, const BaselineEvent& b) const {
        return a.time_ps > b.time_ps || (a.time_ps == b.time_ps && a.sequence > b.sequence);
    }
};

struct BaselineHold {
    std::priority_queue<BaselineEvent, std::vector<BaselineEvent>, BaselineLater> queue;
    Increments inc;
    std::uint64_t now = 0;
    std::uint64_t sequence = 0;
    std::uint64_t checksum = 0;
    explicit BaselineHold(std::uint64_t seed) : inc(seed) {}
    void schedule(std::uint64_t at) {
        queue.push(BaselineEvent{at, sequence++, [this] { fire(); }});
    }
    void fire() {
        checksum += now;
        schedule(now + inc.next());
    }
    void step() {
        BaselineEvent ev = queue.top();
        queue.pop();
        now = ev.time_ps;
        ev.action();
    }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

HoldResult run_hold_benchmark(std::uint64_t pending, std::uint64_t events, std::uint64_t seed) {
    HoldResult r;
    r.pending = pending;
    r.events = events;
    {
        EngineHold h(seed);
        h.sim.reserve(pending + 1);
        for (std::uint64_t i = 0; i < pending; ++i) h.sim.schedule_at(Time::ps(h.inc.next()), [&h] { h.fire(); });
        const auto t0 = std::chrono::steady_clock::now();
        h.sim.run_events(events);
        r.engine_events_per_s = static_cast<double>(events) / seconds_since(t0);
        r.engine_checksum = h.checksum;
    }
    {
        BaselineHold h(seed);
        for (std::uint64_t i = 0; i < pending; ++i) h.schedule(h.inc.next());
        const auto t0 = std::chrono::steady_clock::now();
        for (std::uint64_t i = 0; i < events; ++i) h.step();
        r.baseline_events_per_s = static_cast<double>(events) / seconds_since(t0);
        r.baseline_checksum = h.checksum;
    }
    return r;
}

}  // namespace parasim_cli
