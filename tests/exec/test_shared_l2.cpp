// SharedL2: GPUs with the same compute-stream kernel sequence share one L2
// model and read its recorded hits; others get a model of their own, also
// when the plan's hashes say they are the same (a collision, forced here). Hand-
// computed hits on a 200-byte L2 (docs/hardware-model.md §5: reads of
// resident tensors hit, then every used tensor becomes most recent).
#include "sim/exec/shared_l2.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

TEST_SUITE_BEGIN("unit");

using sim::Bytes;
using sim::exec::SharedL2;
using sim::parallel::Plan;
using sim::parallel::StreamKind;
using sim::parallel::Task;
using sim::parallel::TaskKind;

namespace {

// Kernel A reads tensor 1 (60 B) and writes tensor 2 (10 B); kernel B reads
// tensor 3 (50 B). On a 200-byte L2 nothing is evicted.
struct Fixture {
    Plan plan;
    std::uint32_t a = 0, b = 0;
    Fixture() {
        sim::hw::KernelDesc ka;
        ka.name = "A";
        ka.tensors = {{1, Bytes{60}, false}, {2, Bytes{10}, true}};
        sim::hw::KernelDesc kb;
        kb.name = "B";
        kb.tensors = {{3, Bytes{50}, false}};
        a = plan.add_kernel(ka);
        b = plan.add_kernel(kb);
    }
    // GPUs 0..n-1 run the test's tasks; idle ones pad the plan to the size
    // from which the executor groups GPUs (they form one group of their own).
    void gpus(std::size_t n, bool pad = true) {
        const std::size_t total = pad ? std::max(n, SharedL2::kShareGpus) : n;
        for (std::size_t i = 0; i < total; ++i) plan.simulated_gpus.push_back(static_cast<int>(i));
        plan.streams.resize(total);
    }
    void kernel(std::uint32_t gpu, std::uint32_t k, StreamKind s = StreamKind::compute) {
        Task t;
        t.kind = TaskKind::kernel;
        t.stream = s;
        t.gpu = gpu;
        t.kernel = k;
        plan.add(t, {});
    }
    void other(std::uint32_t gpu) {  // a zero-byte copy on the compute stream: not a kernel
        Task t;
        t.kind = TaskKind::transfer;
        t.stream = StreamKind::compute;
        t.gpu = gpu;
        t.peer = gpu;
        plan.add(t, {});
    }
};

}  // namespace

TEST_CASE("GPUs with the same kernel sequence share the L2 model; hits as one model per GPU") {
    Fixture f;
    f.gpus(3);
    // GPUs 0 and 1: A, B, A. GPU 2: A, A, B.
    for (std::uint32_t g = 0; g < 2; ++g) {
        f.kernel(g, f.a);
        f.kernel(g, f.b);
        f.kernel(g, f.a);
    }
    f.kernel(2, f.a);
    f.kernel(2, f.a);
    f.kernel(2, f.b);
    SharedL2 l2(f.plan, Bytes{200});
    CHECK(l2.group_count() == 3);  // with the idle GPUs' group
    CHECK(l2.group_of(0) == l2.group_of(1));
    CHECK(l2.group_of(0) != l2.group_of(2));
    // GPU 0 runs all three first (advancing the model), GPU 1 then reads the
    // record, GPU 2 interleaved with them. A, B, A: 0, 0, then tensor 1's 60.
    CHECK(l2.access(0, 0, f.a).value == 0);
    CHECK(l2.access(2, 0, f.a).value == 0);
    CHECK(l2.access(0, 1, f.b).value == 0);
    CHECK(l2.access(0, 2, f.a).value == 60);
    CHECK(l2.access(1, 0, f.a).value == 0);
    // A, A, B: the second A finds tensor 1 (60 B); B misses.
    CHECK(l2.access(2, 1, f.a).value == 60);
    CHECK(l2.access(1, 1, f.b).value == 0);
    CHECK(l2.access(1, 2, f.a).value == 60);
    CHECK(l2.access(2, 2, f.b).value == 0);
}

TEST_CASE("a GPU with a kernel off the compute stream keeps an L2 model of its own") {
    Fixture f;
    f.gpus(2);
    for (std::uint32_t g = 0; g < 2; ++g) {
        f.kernel(g, f.a);
        f.kernel(g, f.a);
    }
    f.kernel(1, f.b, StreamKind::tp_comm);
    SharedL2 l2(f.plan, Bytes{200});
    CHECK(l2.group_count() == 3);  // with the idle GPUs' group
    CHECK(l2.group_of(0) != l2.group_of(1));
    // GPU 1's own model: its second A hits whatever GPU 0 did.
    CHECK(l2.access(1, 0, f.a).value == 0);
    CHECK(l2.access(1, 1, f.a).value == 60);
    CHECK(l2.access(0, 0, f.a).value == 0);
    CHECK(l2.access(0, 1, f.a).value == 60);
}

TEST_CASE("a plan of fewer GPUs than kShareGpus keeps one L2 model per GPU") {
    Fixture f;
    f.gpus(2, false);
    for (std::uint32_t g = 0; g < 2; ++g) {
        f.kernel(g, f.a);
        f.kernel(g, f.a);
    }
    SharedL2 l2(f.plan, Bytes{200});
    CHECK(l2.group_count() == 2);
    CHECK(l2.group_of(0) != l2.group_of(1));
    CHECK(l2.access(0, 0, f.a).value == 0);
    CHECK(l2.access(0, 1, f.a).value == 60);
    CHECK(l2.access(1, 0, f.a).value == 0);
    CHECK(l2.access(1, 1, f.a).value == 60);
}

TEST_CASE("GPUs grouped by a colliding hash still get their own hits") {
    Fixture f;
    f.gpus(3);
    // GPU 0: A, B, B. GPU 1: A, A, B. GPU 2: A, (a copy), B.
    f.kernel(0, f.a);
    f.kernel(0, f.b);
    f.kernel(0, f.b);
    f.kernel(1, f.a);
    f.kernel(1, f.a);
    f.kernel(1, f.b);
    f.kernel(2, f.a);
    f.other(2);
    f.kernel(2, f.b);
    CHECK(f.plan.compute_hash[0] != f.plan.compute_hash[1]);
    f.plan.compute_hash[1] = f.plan.compute_hash[2] = f.plan.compute_hash[0];
    SharedL2 l2(f.plan, Bytes{200});
    CHECK(l2.group_of(0) == l2.group_of(1));
    CHECK(l2.group_of(0) == l2.group_of(2));
    // GPU 0 first: A 0, B 0, B 50 (tensor 3 resident).
    CHECK(l2.access(0, 0, f.a).value == 0);
    CHECK(l2.access(0, 1, f.b).value == 0);
    CHECK(l2.access(0, 2, f.b).value == 50);
    // GPU 1 differs at position 1 (A where the record has B): A hits 60, then B misses.
    CHECK(l2.access(1, 0, f.a).value == 0);
    CHECK(l2.access(1, 1, f.a).value == 60);
    CHECK(l2.access(1, 2, f.b).value == 0);
    // GPU 2 skips position 1, where the record has B: its B misses (the record says 50).
    CHECK(l2.access(2, 0, f.a).value == 0);
    CHECK(l2.access(2, 2, f.b).value == 0);
    CHECK(l2.group_of(1) != l2.group_of(0));
    CHECK(l2.group_of(2) != l2.group_of(0));
}

TEST_CASE("a GPU that differs while advancing the shared model leaves it for the others") {
    Fixture f;
    f.gpus(2);
    // GPU 0: A, B, A. GPU 1: A, A, A; the hashes forced equal; GPU 1 runs first.
    f.kernel(0, f.a);
    f.kernel(0, f.b);
    f.kernel(0, f.a);
    for (int i = 0; i < 3; ++i) f.kernel(1, f.a);
    f.plan.compute_hash[1] = f.plan.compute_hash[0];
    SharedL2 l2(f.plan, Bytes{200});
    CHECK(l2.access(1, 0, f.a).value == 0);
    CHECK(l2.access(1, 1, f.a).value == 60);
    CHECK(l2.access(1, 2, f.a).value == 60);
    CHECK(l2.access(0, 0, f.a).value == 0);
    CHECK(l2.access(0, 1, f.b).value == 0);
    CHECK(l2.access(0, 2, f.a).value == 60);
}

TEST_SUITE_END();
