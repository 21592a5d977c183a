// PodVector: the realloc-grown array the plan keeps its tasks and
// dependencies in. Checked against std::vector step by step, and for the
// std::vector behaviours the plan's users rely on (copies are deep, moves
// leave the source empty, growth keeps the values).
#include "sim/core/pod_vector.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

TEST_SUITE_BEGIN("unit");

namespace {
struct Rec {
    std::uint32_t a = 7;
    double b = 0.5;
};
}  // namespace

TEST_CASE("PodVector keeps its values across growth, like std::vector") {
    sim::PodVector<std::uint32_t> v;
    std::vector<std::uint32_t> ref;
    CHECK(v.empty());
    for (std::uint32_t i = 0; i < 100000; ++i) {
        v.push_back(i * 3 + 1);
        ref.push_back(i * 3 + 1);
    }
    REQUIRE(v.size() == ref.size());
    CHECK(v.capacity() >= v.size());
    bool same = true;
    for (std::size_t i = 0; i < ref.size(); ++i) same = same && v[i] == ref[i];
    CHECK(same);
    CHECK(v.front() == 1);
    CHECK(v.back() == 99999u * 3 + 1);
    std::uint64_t sum = 0;
    for (const std::uint32_t x : v) sum += x;
    // sum of 3i + 1 over i < n = 3 n (n - 1) / 2 + n
    CHECK(sum == 3ull * 100000 * 99999 / 2 + 100000);
}

TEST_CASE("PodVector copies deeply and moves by handing over its block") {
    sim::PodVector<std::uint32_t> a{4, 5, 6};
    sim::PodVector<std::uint32_t> b = a;
    b[0] = 40;
    CHECK(a[0] == 4);
    CHECK(b[0] == 40);
    CHECK(b.size() == 3);
    sim::PodVector<std::uint32_t> c = std::move(b);
    CHECK(c.size() == 3);
    CHECK(c[2] == 6);
    CHECK(b.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    a = c;
    CHECK(a[0] == 40);
    a = sim::PodVector<std::uint32_t>{};
    CHECK(a.empty());
}

TEST_CASE("PodVector resize value-initialises, reserve and shrink keep the values") {
    sim::PodVector<Rec> v;
    v.resize(3);
    CHECK(v.size() == 3);
    CHECK(v[2].a == 7);
    CHECK(v[2].b == 0.5);
    v[1].a = 9;
    v.reserve(1000);
    CHECK(v.capacity() >= 1000);
    CHECK(v[1].a == 9);
    v.shrink_to_fit();
    CHECK(v.capacity() == 3);
    CHECK(v[1].a == 9);
    v.pop_back();
    CHECK(v.size() == 2);
    v.clear();
    CHECK(v.empty());
    v.shrink_to_fit();
    CHECK(v.capacity() == 0);
}

TEST_SUITE_END();
