// The host-issue model of the executor (ExecOptions::host_kernel_issue,
// launch_queue_depth, kernel_efficiency; docs/software-profiles.md): closed
// forms on one GPU with kernels of fixed duration.
#include "tests/exec/exec_harness.h"

#include <doctest/doctest.h>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;

namespace {

// `n` kernels of `us` microseconds each, in order on GPU 0's compute stream.
Time run(int n, double us, Time issue, int depth = 1024, double efficiency = 1.0) {
    parallel::Plan plan;
    plan.simulated_gpus = {0};
    plan.streams.resize(1);
    plan.gpus_represented = 1;
    std::vector<std::uint32_t> prev;
    for (int i = 0; i < n; ++i) prev = {parasim_test::add_kernel_us(plan, us, prev)};
    exec::ExecOptions o;
    o.host_kernel_issue = issue;
    o.launch_queue_depth = depth;
    o.kernel_efficiency = efficiency;
    return parasim_test::run_on_dgx_h100(plan, o).makespan;
}

using parasim_test::us;

}  // namespace

TEST_CASE("host issue: kernels shorter than their issue run at the host's pace") {
    // Expectation: 100 issues of 5 us back to back; the last kernel starts when
    // it is issued, 500 us, and runs 1 us: 501 us. Without a host cost: 100 us.
    CHECK(run(100, 1, us(5)) == us(501));
    CHECK(run(100, 1, Time{}) == us(100));
}

TEST_CASE("host issue: kernels longer than their issue hide it, but the first kernel waits for its issue") {
    // Expectation: the host runs ahead; only the first issue (5 us) shows: 5 + 100 x 50 us.
    CHECK(run(100, 50, us(5)) == us(5005));
}

TEST_CASE("host issue: a full launch queue makes the host wait for the GPU") {
    // Kernels of 10 us, issue 1 us, queue depth 2: kernel j is issued once
    // kernel j-2 has finished. Expectation (4 kernels): issues end at 1, 2,
    // then 11 (kernel 0 ends at 11), then 22 (kernel 1 ends at 21, +1);
    // kernels run 1-11, 11-21, 21-31, 31-41: the GPU never starves, 41 us.
    CHECK(run(4, 10, us(1), 2) == us(41));
    // Kernels of 1 us with 5 us issue, depth 1: the host issues only after
    // the previous kernel finished: kernel j runs [6j+5, 6j+6]; 4 kernels end at 24.
    CHECK(run(4, 1, us(5), 1) == us(24));
}

TEST_CASE("host sync: the host waits for the GPU before a synced kernel, so its lead is lost") {
    // 10 kernels of 50 us, issue 5 us, kernel 5 synced (hw::KernelDesc::host_sync).
    // Expectation: kernels 0-4 run 5-255 us (the host ran ahead); kernel 5
    // is ready at 255 us, the host then issues it (+5 us): it runs 260-310;
    // the host issues the rest by 275 us, ahead again: 4 x 50 us more, 510 us.
    // Without the sync: 5 + 10 x 50 = 505 us. Without a host cost the sync
    // costs nothing (no host model): 500 us.
    const auto synced = [](Time issue) {
        parallel::Plan plan;
        plan.simulated_gpus = {0};
        plan.streams.resize(1);
        plan.gpus_represented = 1;
        std::vector<std::uint32_t> prev;
        for (int i = 0; i < 10; ++i) {
            hw::KernelDesc k;
            k.name = "k";
            k.flops = Flops{50};
            k.host_sync = i == 5;
            prev = {parasim_test::add_kernel(plan, k, prev)};
        }
        exec::ExecOptions o;
        o.host_kernel_issue = issue;
        return parasim_test::run_on_dgx_h100(plan, o).makespan;
    };
    CHECK(synced(us(5)) == us(510));
    CHECK(run(10, 50, us(5)) == us(505));
    CHECK(synced(Time{}) == us(500));
}

TEST_CASE("kernel efficiency divides each kernel's time past its launch overhead") {
    // Expectation: 10 kernels of 8 us at efficiency 0.8 take 10 us each.
    CHECK(run(10, 8, Time{}, 1024, 0.8) == us(100));
}

TEST_SUITE_END();
