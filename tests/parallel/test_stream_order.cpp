// The plan's stream order (sim/parallel/stream_order.h): whatever the layout
// (one vector per GPU, position-major, or position-major turned per-GPU when
// padding passes its bound), each GPU's stream reads back exactly the ids
// pushed onto it, in order; the position-major cells are where the layout
// says (the executor reads them directly).
#include "sim/core/error.h"
#include "sim/parallel/stream_order.h"

#include <doctest/doctest.h>

#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using sim::parallel::kStreamCount;
using sim::parallel::StreamOrder;

namespace {

using Reference = std::vector<std::vector<std::vector<std::uint32_t>>>;  // [gpu][stream]

void require_same(const StreamOrder& o, const Reference& ref) {
    REQUIRE(o.size() == ref.size());
    for (std::size_t g = 0; g < ref.size(); ++g)
        for (std::size_t s = 0; s < kStreamCount; ++s) {
            const auto v = o[g][s];
            REQUIRE(v.size() == ref[g][s].size());
            REQUIRE(o.length(g, s) == ref[g][s].size());
            for (std::size_t h = 0; h < v.size(); ++h) REQUIRE(v[h] == ref[g][s][h]);
            std::vector<std::uint32_t> walked(v.begin(), v.end());
            REQUIRE(walked == ref[g][s]);
        }
}

// Pushes ids 0, 1, ... : `rounds` rounds in which GPU (r * 7 + i) % gpus
// (i = 0..gpus-1, so every GPU, in a rotated order) appends one id to the
// compute stream (0) and every third GPU one to stream 2; GPU `long_gpu`
// then appends `extra` more to stream 0.
Reference fill(StreamOrder& o, std::size_t gpus, int rounds, std::size_t long_gpu, int extra) {
    o.resize(gpus);
    Reference ref(gpus, std::vector<std::vector<std::uint32_t>>(kStreamCount));
    std::uint32_t id = 0;
    auto push = [&](std::size_t g, std::size_t s) {
        o.push(static_cast<std::uint32_t>(g), s, id);
        ref[g][s].push_back(id++);
    };
    for (int r = 0; r < rounds; ++r)
        for (std::size_t i = 0; i < gpus; ++i) {
            const std::size_t g = (static_cast<std::size_t>(r) * 7 + i + 3) % gpus;
            push(g, 0);
            if (g % 3 == 0) push(g, 2);
        }
    for (int e = 0; e < extra; ++e) push(long_gpu, 0);
    return ref;
}

}  // namespace

TEST_CASE("stream order: few GPUs keep one vector per GPU") {
    StreamOrder o;
    const Reference ref = fill(o, 5, 4, 1, 3);
    for (std::size_t s = 0; s < kStreamCount; ++s) CHECK_FALSE(o.interleaved(s));
    require_same(o, ref);
}

TEST_CASE("stream order: position-major from 32 GPUs, columns in the order GPUs appear") {
    StreamOrder o;
    constexpr std::size_t kGpus = 40;
    const Reference ref = fill(o, kGpus, 6, 0, 0);
    require_same(o, ref);
    CHECK(o.interleaved(0));
    CHECK(o.interleaved(2));
    // The first round visits GPUs 3, 4, ..., 39, 0, 1, 2.
    REQUIRE(o.by_slot().size() == kGpus);
    for (std::size_t i = 0; i < kGpus; ++i) {
        CHECK(o.by_slot()[i] == (i + 3) % kGpus);
        CHECK(o.slot((i + 3) % kGpus) == i);
    }
    // Stream 0: 6 rows, every cell filled; stream 2: GPUs not divisible by 3
    // have no entries, so their cells are padding.
    CHECK(o.rows(0) == 6);
    CHECK(o.rows(2) == 6);
    for (std::size_t g = 0; g < kGpus; ++g)
        for (std::size_t h = 0; h < 6; ++h) {
            CHECK(o.cells(0)[h * kGpus + o.slot(g)] == ref[g][0][h]);
            CHECK(o.cells(2)[h * kGpus + o.slot(g)] == (g % 3 == 0 ? ref[g][2][h] : StreamOrder::kEmpty));
        }
    CHECK(o.rows(1) == 0);
    CHECK(o[5][1].empty());
}

TEST_CASE("stream order: a stream far longer than the others turns per-GPU, other kinds stay") {
    // 40 GPUs, 2 rounds (80 entries in stream 0), then GPU 9 appends 5000
    // more: rows x 40 passes 4 x entries + 4096 x 40 near row 4600, so
    // stream 0 becomes per-GPU; stream 2 stays position-major.
    StreamOrder o;
    const Reference ref = fill(o, 40, 2, 9, 5000);
    CHECK_FALSE(o.interleaved(0));
    CHECK(o.interleaved(2));
    require_same(o, ref);
    // With 3000 extra entries the bound is not reached.
    StreamOrder p;
    const Reference ref2 = fill(p, 40, 2, 9, 3000);
    CHECK(p.interleaved(0));
    CHECK(p.rows(0) == 3002);
    require_same(p, ref2);
}

TEST_CASE("stream order: resizing after a push is refused") {
    StreamOrder o;
    o.resize(3);
    o.push(1, 0, 0);
    CHECK_THROWS_AS(o.resize(4), sim::InternalError);
}

TEST_SUITE_END();
