// Cross-kernel L2 residency (docs/hardware-model.md §5): LRU over whole
// tensors, hit rate = bytes served by L2 / bytes requested.
#include "sim/hw/cost_model.h"
#include "sim/hw/l2_cache.h"
#include "tests/hw/hw_test_gpus.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <utility>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim;
using namespace sim::hw;

namespace {
constexpr std::uint64_t MiB = 1ULL << 20;
TensorUse read(std::uint64_t id, std::uint64_t bytes) { return TensorUse{id, Bytes{bytes}, false}; }
TensorUse write(std::uint64_t id, std::uint64_t bytes) { return TensorUse{id, Bytes{bytes}, true}; }
}  // namespace

TEST_CASE("a weight tensor smaller than L2 re-read by the next kernel hits") {
    L2Cache l2(Bytes{50 * MiB});
    CHECK(l2.access({read(1, 32 * MiB), write(2, 4 * MiB)}).value == 0);  // cold
    CHECK(l2.access({read(1, 32 * MiB), write(3, 4 * MiB)}).value == 32 * MiB);
    CHECK(l2.requested_bytes() == doctest::Approx(64.0 * MiB));
    CHECK(l2.hit_bytes() == doctest::Approx(32.0 * MiB));
    CHECK(l2.hit_rate() == doctest::Approx(0.5));
}

TEST_CASE("a weight tensor larger than L2 misses every time") {
    L2Cache l2(Bytes{50 * MiB});
    CHECK(l2.access({read(1, 64 * MiB)}).value == 0);
    CHECK(l2.access({read(1, 64 * MiB)}).value == 0);
    CHECK(l2.hit_rate() == 0.0);
    CHECK(l2.resident_bytes().value == 0);
}

TEST_CASE("a kernel's output is resident for the next kernel (write-allocate)") {
    L2Cache l2(Bytes{50 * MiB});
    l2.access({read(1, 8 * MiB), write(2, 8 * MiB)});
    CHECK(l2.access({read(2, 8 * MiB), write(3, 8 * MiB)}).value == 8 * MiB);
}

TEST_CASE("least recently used tensors are evicted first") {
    L2Cache l2(Bytes{50 * MiB});
    l2.access({read(1, 20 * MiB)});
    l2.access({read(2, 20 * MiB)});
    l2.access({read(1, 20 * MiB)});  // 1 becomes most recent
    l2.access({read(3, 20 * MiB)});  // evicts 2
    CHECK(l2.resident_bytes().value == 40 * MiB);
    CHECK(l2.access({read(1, 20 * MiB)}).value == 20 * MiB);
    CHECK(l2.access({read(2, 20 * MiB)}).value == 0);
}

TEST_CASE("a tensor streamed through an L2 it does not fit evicts what was resident") {
    L2Cache l2(Bytes{50 * MiB});
    l2.access({read(1, 10 * MiB)});
    l2.access({read(9, 200 * MiB), write(2, 1 * MiB)});
    CHECK(l2.access({read(1, 10 * MiB)}).value == 0);
    CHECK(l2.access({read(2, 1 * MiB)}).value == 1 * MiB);
}

TEST_CASE("hits feed the cost model: a resident weight is served by L2, not HBM") {
    const GpuSpec g = test::h100();
    const auto model = make_cost_model("roofline");
    KernelDesc k;
    k.kind = KernelKind::gemm;
    k.dtype = DType::bf16;
    k.m = 16;
    k.n = 4096;
    k.k = 4096;
    k.flops = Flops{2.0 * 16 * 4096 * 4096};
    k.bytes_read = Bytes{(16 * 4096 + 4096 * 4096) * 2};
    k.bytes_written = Bytes{16 * 4096 * 2};
    k.tensors = {read(100, 16 * 4096 * 2), read(1, 4096 * 4096 * 2), write(101, 16 * 4096 * 2)};
    L2Cache l2(g.l2_size);
    const KernelCost first = model->cost(g, k, L2Residency{l2.access(k.tensors)});
    k.tensors[0].id = 101;  // the next decode step reads the last output
    k.tensors[2].id = 102;
    const KernelCost second = model->cost(g, k, L2Residency{l2.access(k.tensors)});
    CHECK(first.hbm_bytes.value == k.bytes_read.value + k.bytes_written.value);
    CHECK(second.hbm_bytes.value == k.bytes_written.value);
    CHECK(second.duration < first.duration);
    CHECK(l2.hit_rate() == doctest::Approx(0.5));
}

// The cache keeps its LRU list in a node pool and its map in an open-addressed
// table; a plain list scanned linearly states the same rules. Many ids
// colliding in a small table, re-uses, evictions and oversize tensors that
// flush everything must give the same hits and residency at every step.
TEST_CASE("the L2 cache behaves as a plain LRU list over a long random run") {
    const std::uint64_t cap = 1000;
    L2Cache l2(Bytes{cap});
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ref;  // front = most recent (id, size)
    std::uint64_t ref_used = 0;
    std::uint64_t state = 12345;
    auto next = [&] {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return state >> 33;
    };
    for (int step = 0; step < 20000; ++step) {
        std::vector<TensorUse> uses;
        const int n = 1 + static_cast<int>(next() % 4);
        for (int u = 0; u < n; ++u) {
            const std::uint64_t id = next() % 97;
            const std::uint64_t size = next() % 50 == 0 ? cap + 1 : 1 + next() % 300;
            uses.push_back(TensorUse{id, Bytes{size}, next() % 3 == 0});
        }
        double hits = 0;
        for (const auto& u : uses) {
            if (u.write) continue;
            for (const auto& e : ref)
                if (e.first == u.id) hits += std::min(u.size.as_double(), static_cast<double>(e.second));
        }
        for (const auto& u : uses) {
            const auto it = std::find_if(ref.begin(), ref.end(), [&](const auto& e) { return e.first == u.id; });
            if (it != ref.end()) {
                ref_used -= it->second;
                ref.erase(it);
            }
            if (u.size.value > cap) {
                ref.clear();
                ref_used = 0;
                continue;
            }
            ref.insert(ref.begin(), {u.id, u.size.value});
            ref_used += u.size.value;
            while (ref_used > cap) {
                ref_used -= ref.back().second;
                ref.pop_back();
            }
        }
        const Bytes got = l2.access(uses);
        REQUIRE(got == Bytes::ceil(hits));
        REQUIRE(l2.resident_bytes().value == ref_used);
    }
}

TEST_SUITE_END();
