// HBM capacity verdicts.
#include "sim/hw/memory.h"

#include <doctest/doctest.h>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim;
using namespace sim::hw;

TEST_CASE("a capacity overflow reports out of memory with the breakdown and the largest component") {
    MemoryBreakdown need;
    need.weights = 16.1e9;
    need.kv_cache = 1.34e12;
    need.workspace = 1e9;
    const MemoryVerdict v = check_capacity(need, Bytes{80'000'000'000ULL});
    CHECK(v.oom);
    CHECK(v.capacity.value == 80'000'000'000ULL);
    CHECK(v.explanation ==
          "out of memory: KV cache 1.34 TB (99%) of 1.36 TB needed; capacity 80.00 GB "
          "(breakdown: weights 16.10 GB, KV cache 1.34 TB, workspace 1.00 GB)");
}

TEST_CASE("a plan within capacity fits") {
    MemoryBreakdown need;
    need.weights = 20e9;
    need.gradients = 20e9;
    need.optimizer = 20e9;
    need.activations = 10e9;
    const MemoryVerdict v = check_capacity(need, Bytes{80'000'000'000ULL});
    CHECK_FALSE(v.oom);
    CHECK(v.breakdown.total() == doctest::Approx(70e9));
    CHECK(v.explanation.rfind("fits: 70.00 GB of 80.00 GB (88%)", 0) == 0);
}

TEST_CASE("exactly full is not out of memory; one byte more is") {
    MemoryBreakdown need;
    need.weights = 1000;
    CHECK_FALSE(check_capacity(need, Bytes{1000}).oom);
    need.workspace = 1;
    CHECK(check_capacity(need, Bytes{1000}).oom);
}

TEST_SUITE_END();
