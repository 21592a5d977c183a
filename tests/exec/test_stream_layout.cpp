// The executor's layout of the stream order (interleaved by position, or
// the plan's own vectors when the streams' lengths differ too much to pad)
// and of the host-issue ring: on GPUs whose first tasks are emitted out of
// their local order and whose streams differ in length, every task ends when
// its stream and its host issue say, in both layouts.
#include "tests/exec/exec_harness.h"

#include <doctest/doctest.h>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;

namespace {

std::uint32_t kernel_on(parallel::Plan& plan, std::uint32_t gpu, double micros) {
    sim::hw::KernelDesc k;
    k.name = "k";
    k.flops = sim::Flops{micros};
    parallel::Task t;
    t.kind = parallel::TaskKind::kernel;
    t.stream = parallel::StreamKind::compute;
    t.gpu = gpu;
    t.kernel = plan.add_kernel(k);
    return plan.add(t, {});
}

struct Ids {
    std::vector<std::uint32_t> g0, g1, g2;
};

// GPU 0: n kernels of a us; GPU 1: one of b us; GPU 2: m kernels of c us;
// GPUs 3 to 39 (so that the executor interleaves at all: it does from 32
// GPUs) one kernel of 1 us each. Emitted GPU 2 first, then 1, then 0, then
// the rest of GPU 2, then the others, so the order of first tasks is not the
// local order. No dependencies: the streams alone order the tasks.
constexpr int kGpus = 40;
parallel::Plan gpus(int n, double a, double b, int m, double c, Ids& ids) {
    parallel::Plan plan;
    for (int i = 0; i < kGpus; ++i) plan.simulated_gpus.push_back(i);
    plan.streams.resize(kGpus);
    plan.gpus_represented = kGpus;
    ids.g2.push_back(kernel_on(plan, 2, c));
    ids.g1.push_back(kernel_on(plan, 1, b));
    for (int i = 0; i < n; ++i) ids.g0.push_back(kernel_on(plan, 0, a));
    for (int i = 1; i < m; ++i) ids.g2.push_back(kernel_on(plan, 2, c));
    for (std::uint32_t g = 3; g < kGpus; ++g) kernel_on(plan, g, 1);
    return plan;
}

// Runs `plan` on H100s of a DGX H100 pod (as many nodes as it needs) at FixedCost.
exec::ExecResult run_on_pod(const parallel::Plan& plan, const exec::ExecOptions& options) {
    const auto cluster = config::load_cluster_file(config::cluster_path("dgx-h100-pod"));
    config::GpuCatalog catalog;
    const net::Topology topo(cluster, static_cast<int>(plan.simulated_gpus.size()));
    return exec::execute(plan, catalog.get("h100-sxm"), topo, parasim_test::FixedCost{}, options);
}

// Exact microseconds (the harness's us() goes through seconds as a double).
Time us(int v) { return Time::us(static_cast<std::uint64_t>(v)); }

}  // namespace

TEST_CASE("stream layout: each GPU's stream runs in its order, interleaved or not") {
    // 10 kernels on GPU 0 pad into the interleaved order; 6000 against one
    // or two kernels each would more than double it, so the plan's vectors serve.
    for (const int n : {10, 6000}) {
        CAPTURE(n);
        Ids ids;
        const auto plan = gpus(n, 1, 3, 2, 2, ids);
        const auto r = run_on_pod(plan, {});
        // Expectation: back-to-back kernels from 0: GPU 0's i-th ends at i + 1 us,
        // GPU 1's at 3 us, GPU 2's at 2 and 4 us.
        for (int i = 0; i < n; ++i) REQUIRE(r.task_end[ids.g0[static_cast<std::size_t>(i)]] == us(i + 1));
        CHECK(r.task_end[ids.g1[0]] == us(3));
        CHECK(r.task_end[ids.g2[0]] == us(2));
        CHECK(r.task_end[ids.g2[1]] == us(4));
        CHECK(r.makespan == us(n));
    }
}

TEST_CASE("stream layout: the host-issue ring keeps each GPU's own end times") {
    // Issue 1 us, launch queue depth 2: kernel j is issued 1 us after
    // max(issue of j - 1, end of j - 2). GPU 0 (kernels of 10 us) and GPU 2
    // (20 us) both have a ring; GPU 1's single kernel has none. Expectation:
    // GPU 0's kernel j ends at 10 j + 11 us (the first waits 1 us for its
    // issue, then the GPU never starves: test_host_issue.cpp's case), GPU 2's
    // at 20 j + 21 us, GPU 1's at 1 + 3 us. Reading GPU 2's end times for
    // GPU 0 would issue GPU 0's third kernel at 22 us, after it could start (21).
    for (const int n : {10, 6000}) {
        CAPTURE(n);
        Ids ids;
        const auto plan = gpus(n, 10, 3, 4, 20, ids);
        exec::ExecOptions o;
        o.host_kernel_issue = us(1);
        o.launch_queue_depth = 2;
        const auto r = run_on_pod(plan, o);
        for (int j = 0; j < n; ++j) REQUIRE(r.task_end[ids.g0[static_cast<std::size_t>(j)]] == us(10 * j + 11));
        CHECK(r.task_end[ids.g1[0]] == us(4));
        for (int j = 0; j < 4; ++j) CHECK(r.task_end[ids.g2[static_cast<std::size_t>(j)]] == us(20 * j + 21));
    }
}

TEST_SUITE_END();
