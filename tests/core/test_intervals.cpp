// interval_union (sim/core/intervals.h): hand-drawn sets of intervals.
#include "sim/core/intervals.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

TEST_SUITE_BEGIN("unit");

using sim::Time;
using sim::TimeInterval;

namespace {
TimeInterval ns(std::uint64_t a, std::uint64_t e) { return {Time::ns(a), Time::ns(e)}; }
}  // namespace

TEST_CASE("interval_union joins overlapping and touching intervals, in start order") {
    // Out of order (ns): [50,70) overlaps [60,90); [0,20) touches [20,30);
    // [100,110) stands alone; [10,15) lies inside [0,20).
    const std::vector<TimeInterval> u =
        sim::interval_union({ns(50, 70), ns(100, 110), ns(20, 30), ns(60, 90), ns(0, 20), ns(10, 15)});
    const std::vector<TimeInterval> want{ns(0, 30), ns(50, 90), ns(100, 110)};
    CHECK(u == want);
}

TEST_CASE("interval_union of nothing is nothing; of one interval, that interval") {
    CHECK(sim::interval_union({}).empty());
    const std::vector<TimeInterval> one{ns(40, 80)};
    CHECK(sim::interval_union(one) == one);
}

TEST_SUITE_END();
