// Cross-kernel L2 residency (docs/hardware-model.md §5): LRU over whole
// tensors, hit rate = bytes served by L2 / bytes requested.
#include "sim/hw/cost_model.h"
#include "sim/hw/l2_cache.h"
#include "tests/hw/hw_test_gpus.h"

#include <doctest/doctest.h>

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

TEST_SUITE_END();
