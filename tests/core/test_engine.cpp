// Engine: ordering, ties, cancellation, run-until, determinism, time arithmetic.
#include "apps/hold_bench.h"
#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/simulation.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using sim::Simulation;
using sim::Time;

TEST_CASE("events run in time order whatever the order they were scheduled in") {
    Simulation s;
    std::vector<int> seen;
    s.schedule_at(Time::ns(30), [&seen] { seen.push_back(30); });
    s.schedule_at(Time::ns(10), [&seen] { seen.push_back(10); });
    s.schedule_at(Time::ns(20), [&seen] { seen.push_back(20); });
    s.run();
    CHECK(seen == std::vector<int>{10, 20, 30});
    CHECK(s.now() == Time::ns(30));
    CHECK(s.events_processed() == 3);
}

TEST_CASE("events at equal times run in insertion order") {
    Simulation s;
    std::vector<int> seen;
    for (int i = 0; i < 100; ++i) s.schedule_at(Time::ns(5), [&seen, i] { seen.push_back(i); });
    s.run();
    REQUIRE(seen.size() == 100);
    for (int i = 0; i < 100; ++i) CHECK(seen[static_cast<std::size_t>(i)] == i);
}

TEST_CASE("an event scheduled from a callback at the current time runs after those already queued") {
    Simulation s;
    std::vector<int> seen;
    s.schedule_at(Time::ns(1), [&] {
        seen.push_back(1);
        s.schedule_after(Time{}, [&seen] { seen.push_back(3); });
    });
    s.schedule_at(Time::ns(1), [&seen] { seen.push_back(2); });
    s.run();
    CHECK(seen == std::vector<int>{1, 2, 3});
}

TEST_CASE("a cancelled event does not run, and cancelling twice or after running is harmless") {
    Simulation s;
    int ran = 0;
    auto a = s.schedule_at(Time::ns(1), [&ran] { ran += 1; });
    auto b = s.schedule_at(Time::ns(2), [&ran] { ran += 10; });
    CHECK(s.pending() == 2);
    CHECK(s.cancel(b));
    CHECK_FALSE(s.cancel(b));
    CHECK(s.pending() == 1);
    s.run();
    CHECK(ran == 1);
    CHECK_FALSE(s.cancel(a));
    // The slot of `b` is reused; the old handle must not cancel the new event.
    s.schedule_after(Time::ns(1), [&ran] { ran += 100; });
    s.schedule_after(Time::ns(1), [&ran] { ran += 100; });
    CHECK_FALSE(s.cancel(b));
    s.run();
    CHECK(ran == 201);
}

TEST_CASE("run_until stops at the limit, includes events at the limit, and advances the clock") {
    Simulation s;
    std::vector<int> seen;
    s.schedule_at(Time::ns(10), [&seen] { seen.push_back(10); });
    s.schedule_at(Time::ns(20), [&seen] { seen.push_back(20); });
    s.schedule_at(Time::ns(30), [&seen] { seen.push_back(30); });
    s.run_until(Time::ns(20));
    CHECK(seen == std::vector<int>{10, 20});
    CHECK(s.now() == Time::ns(20));
    s.run_until(Time::ns(25));
    CHECK(s.now() == Time::ns(25));
    CHECK(s.pending() == 1);
    s.run();
    CHECK(seen.back() == 30);
}

TEST_CASE("scheduling in the past is an internal error naming both times") {
    Simulation s;
    s.schedule_at(Time::ns(10), [] {});
    s.run();
    CHECK_THROWS_WITH_AS(s.schedule_at(Time::ns(5), [] {}),
                         "internal error: event scheduled in the past: at 5000 ps while the clock is at 10000 ps",
                         sim::InternalError);
}

namespace {
std::vector<std::uint64_t> random_trace(std::uint64_t seed) {
    Simulation s;
    std::mt19937_64 rng(seed);
    std::vector<std::uint64_t> trace;
    std::vector<sim::EventId> ids;
    for (int i = 0; i < 2000; ++i) {
        const auto t = Time::ps(rng() % 1000);  // many ties on purpose
        ids.push_back(s.schedule_at(
            t, [&trace, &s, i] { trace.push_back(s.now().count_ps() * 10000 + static_cast<std::uint64_t>(i)); }));
    }
    for (std::size_t i = 0; i < ids.size(); i += 7) s.cancel(ids[i]);
    s.run();
    return trace;
}
}  // namespace

TEST_CASE("the same input gives the same trace") {
    const auto a = random_trace(42);
    const auto b = random_trace(42);
    CHECK(a.size() == 2000 - 286);
    CHECK(a == b);
    for (std::size_t i = 1; i < a.size(); ++i) CHECK(a[i - 1] < a[i]);  // time then insertion order
}

TEST_CASE("durations from bandwidths round up to the next picosecond") {
    // 1000 bytes at 3 bytes/ps = 333.33 ps -> 334 ps.
    CHECK(sim::transfer_time(sim::Bytes{1000}, sim::Bandwidth{3e12}) == Time::ps(334));
    CHECK(sim::transfer_time(sim::Bytes{1000}, sim::Bandwidth{1e12}) == Time::ps(1000));
    CHECK(sim::transfer_time(sim::Bytes{0}, sim::Bandwidth{1e12}) == Time{});
    CHECK_THROWS_AS(sim::transfer_time(sim::Bytes{1}, sim::Bandwidth{0.0}), sim::InternalError);
    CHECK_THROWS_AS(Time::max() + Time::ps(1), sim::InternalError);
    CHECK_THROWS_AS(Time::ps(1) - Time::ps(2), sim::InternalError);
}

TEST_CASE("byte sums are checked like times: past 2^64 they throw, never wrap") {
    constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
    CHECK((sim::Bytes{kMax - 1} + sim::Bytes{1}).value == kMax);
    CHECK_THROWS_AS(sim::Bytes{kMax} + sim::Bytes{1}, sim::InternalError);
    sim::Bytes b{kMax - 10};
    b += sim::Bytes{10};
    CHECK(b.value == kMax);
    CHECK_THROWS_AS(b += sim::Bytes{1}, sim::InternalError);
    CHECK(b.value == kMax);  // a failed sum leaves the operand as it was
}

TEST_CASE("the hold model does the same work on the engine and the baseline") {
    const auto r = parasim_cli::run_hold_benchmark(1000, 20000, 7);
    CHECK(r.engine_checksum == r.baseline_checksum);
    CHECK(r.engine_events_per_s > 0.0);
}

TEST_CASE("the queue matches a reference ordered set under random pushes, cancels and run_until") {
    // Reference: std::set of (time, insertion index); the engine must run the
    // same events in the same order, including after run_until leaves the
    // clock between events and after cancelling the earliest event.
    struct Rec {
        std::vector<std::uint64_t> ran;
    } rec;
    Simulation s;
    std::set<std::pair<std::uint64_t, std::uint64_t>> ref;
    std::vector<sim::EventId> ids;
    std::vector<std::uint64_t> times;
    std::mt19937_64 rng(3);
    std::vector<std::uint64_t> expected;
    std::uint64_t now = 0;
    for (int round = 0; round < 3000; ++round) {
        const int op = static_cast<int>(rng() % 10);
        if (op < 5) {
            const std::uint64_t t = now + (rng() % 3 == 0 ? 0 : rng() % (1ULL << (rng() % 40)));
            const std::uint64_t idx = ids.size();
            ids.push_back(s.schedule_at(Time::ps(t), [&rec, idx] { rec.ran.push_back(idx); }));
            times.push_back(t);
            ref.insert({t, idx});
        } else if (op < 7 && !ref.empty()) {
            // Cancel the earliest pending event half the time, a random one otherwise.
            auto it = ref.begin();
            if (rng() % 2) std::advance(it, static_cast<long>(rng() % ref.size()));
            CHECK(s.cancel(ids[it->second]));
            ref.erase(it);
        } else {
            const std::uint64_t until = now + rng() % (1ULL << 20);
            s.run_until(Time::ps(until));
            while (!ref.empty() && ref.begin()->first <= until) {
                expected.push_back(ref.begin()->second);
                ref.erase(ref.begin());
            }
            now = until;
            CHECK(s.now() == Time::ps(now));
        }
        CHECK(s.pending() == ref.size());
    }
    s.run();
    for (const auto& e : ref) expected.push_back(e.second);
    CHECK(rec.ran == expected);
}

namespace {

// What one event of the self-scheduling model does, decided by its own id so
// that the engine and the reference take the same decisions: schedule 1-2
// follow-ups at offsets from 0 (a tie) up to 2^k ps for k in [0, 44], and now
// and then cancel the follow-up of an earlier event.
struct Action {
    std::vector<std::uint64_t> offsets;
    bool cancel_one = false;
    std::uint64_t victim_pick = 0;
};

Action action_of(std::uint64_t id, std::uint64_t seed) {
    std::mt19937_64 rng(seed * 1'000'003 + id);
    Action a;
    const int children = id < 200 ? 2 : 1 + static_cast<int>(rng() % 4 == 0);  // outgrows the cancellations
    for (int c = 0; c < children; ++c) a.offsets.push_back(rng() % 4 == 0 ? 0 : rng() % (1ULL << (rng() % 45)));
    a.cancel_one = rng() % 5 == 0;
    a.victim_pick = rng();
    return a;
}

// Runs the model on the engine; returns event ids in the order they ran.
std::vector<std::uint64_t> run_on_engine(std::uint64_t seed, std::uint64_t max_events) {
    struct Model {
        Simulation sim;
        std::uint64_t seed = 0, next_id = 0, max_events = 0;
        std::vector<std::uint64_t> ran;
        std::vector<sim::EventId> handle;  // by event id
        std::vector<bool> done;            // ran or cancelled
        void schedule(Time at) {
            const std::uint64_t id = next_id++;
            handle.push_back(sim.schedule_at(at, [this, id] { fire(id); }));
            done.push_back(false);
        }
        void fire(std::uint64_t id) {
            ran.push_back(id);
            done[id] = true;
            if (ran.size() >= max_events) return;
            const Action a = action_of(id, seed);
            for (std::uint64_t off : a.offsets) schedule(sim.now() + Time::ps(off));
            if (a.cancel_one) {
                const std::uint64_t victim = a.victim_pick % next_id;
                if (!done[victim]) {
                    CHECK(sim.cancel(handle[victim]));
                    done[victim] = true;
                }
            }
        }
    } m;
    m.seed = seed;
    m.max_events = max_events;
    m.schedule(Time::ps(0));
    m.sim.run();
    return m.ran;
}

// The same model on a std::set ordered by (time, id): ids grow with insertion,
// so this is the (time, insertion) order the engine promises.
std::vector<std::uint64_t> run_on_reference(std::uint64_t seed, std::uint64_t max_events) {
    std::set<std::pair<std::uint64_t, std::uint64_t>> pending{{0, 0}};
    std::vector<std::uint64_t> time_of{0};
    std::vector<bool> done{false};
    std::vector<std::uint64_t> ran;
    while (!pending.empty()) {
        const auto [now, id] = *pending.begin();
        pending.erase(pending.begin());
        ran.push_back(id);
        done[id] = true;
        if (ran.size() >= max_events) continue;
        const Action a = action_of(id, seed);
        for (std::uint64_t off : a.offsets) {
            pending.insert({now + off, time_of.size()});
            time_of.push_back(now + off);
            done.push_back(false);
        }
        if (a.cancel_one) {
            const std::uint64_t victim = a.victim_pick % time_of.size();
            if (!done[victim]) {
                pending.erase({time_of[victim], victim});
                done[victim] = true;
            }
        }
    }
    return ran;
}

}  // namespace

TEST_CASE("events scheduled and cancelled from callbacks run in (time, insertion) order") {
    // Offsets from 0 to 2^44 ps exercise every level of the radix heap, ties
    // in one bucket, lone events served in place, and cancelled minima.
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        CAPTURE(seed);
        const auto engine = run_on_engine(seed, 20'000);
        const auto reference = run_on_reference(seed, 20'000);
        REQUIRE(engine.size() == reference.size());
        CHECK(engine == reference);
    }
}

TEST_CASE("checked_mul gives the product when it fits and nothing when it wraps, whatever the factor types") {
    using sim::checked_mul;
    CHECK(checked_mul(3, 4) == 12);
    CHECK(checked_mul(std::int64_t{1}, 354, 12132676) == std::int64_t{4294967304});  // wraps to 8 in int
    CHECK_FALSE(checked_mul(354, 12132676).has_value());
    CHECK_FALSE(checked_mul(65536, 65536).has_value());  // 0 in int: the divisor of the SIGFPE
    CHECK_FALSE(checked_mul(1048576, 4095).has_value());
    const std::int64_t two40 = std::int64_t{1} << 40;
    CHECK_FALSE(checked_mul(two40, two40).has_value());
    CHECK_FALSE(checked_mul(std::int64_t{1}, two40, two40, 1).has_value());  // a partial product overflows
    CHECK(checked_mul(two40, 1 << 22) == std::int64_t{1} << 62);
    CHECK(checked_mul(-4, 5) == -20);
    static_assert(checked_mul(6, 7).value() == 42);
}

TEST_SUITE_END();
