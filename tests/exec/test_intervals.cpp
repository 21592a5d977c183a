// A GPU's intervals are its streams' program order with the tasks' start and
// end times (executor.cpp, record_intervals): recorded on request, and the
// time breakdown computed from the plan's stream order gives the same numbers
// as from the recorded intervals.
#include "tests/exec/exec_harness.h"

#include <doctest/doctest.h>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;
using parasim_test::us;

namespace {

// GPU 0: a 10 us compute-bound kernel, then a 5 us memory-bound one, a 3 us
// host task beside them, and a send to GPU 1 after the first kernel; GPU 1
// runs a 4 us kernel once the data is there.
parallel::Plan small_plan() {
    parallel::Plan plan;
    plan.simulated_gpus = {0, 1};
    plan.streams.resize(2);
    plan.gpus_represented = 2;
    const std::uint32_t k0 = parasim_test::add_kernel_us(plan, 10, {});
    parasim_test::add_memory_kernel_us(plan, 5, {k0});
    parallel::Task host;
    host.kind = parallel::TaskKind::host;
    host.stream = parallel::StreamKind::host;
    host.host_time = us(3);
    plan.add(host, {});
    parallel::Task send;
    send.kind = parallel::TaskKind::transfer;
    send.stream = parallel::StreamKind::p2p;
    send.peer = 1;
    send.bytes = Bytes{1 << 20};
    const std::uint32_t s = plan.add(send, {k0});
    hw::KernelDesc k;
    k.name = "k";
    k.flops = Flops{4};
    parallel::Task t;
    t.kind = parallel::TaskKind::kernel;
    t.stream = parallel::StreamKind::compute;
    t.gpu = 1;
    t.kernel = plan.add_kernel(k);
    plan.add(t, {s});
    return plan;
}

bool same(const exec::TimeBreakdown& a, const exec::TimeBreakdown& b) {
    return a.compute == b.compute && a.memory == b.memory && a.communication == b.communication && a.idle == b.idle;
}

}  // namespace

TEST_CASE("intervals: recorded on request, in stream order, with each task's times and kind") {
    const auto plan = small_plan();
    exec::ExecOptions on;
    const auto r = parasim_test::run_on_dgx_h100(plan, on);
    const auto& compute = r.gpus[0].intervals[static_cast<std::size_t>(parallel::StreamKind::compute)];
    REQUIRE(compute.size() == 2);
    CHECK(compute[0].start == Time{});
    CHECK(compute[0].end == us(10));
    CHECK(compute[0].kind == exec::IntervalKind::compute_kernel);
    CHECK(compute[1].start == us(10));
    CHECK(compute[1].end == us(15));
    CHECK(compute[1].kind == exec::IntervalKind::memory_kernel);
    const auto& host = r.gpus[0].intervals[static_cast<std::size_t>(parallel::StreamKind::host)];
    REQUIRE(host.size() == 1);
    CHECK(host[0].end == us(3));
    CHECK(host[0].kind == exec::IntervalKind::host);
    const auto& p2p = r.gpus[0].intervals[static_cast<std::size_t>(parallel::StreamKind::p2p)];
    REQUIRE(p2p.size() == 1);
    CHECK(p2p[0].start == us(10));
    CHECK(p2p[0].kind == exec::IntervalKind::communication);
    CHECK(r.gpus[1].intervals[static_cast<std::size_t>(parallel::StreamKind::compute)].at(0).start == p2p[0].end);

    exec::ExecOptions off;
    off.record_intervals = false;
    const auto q = parasim_test::run_on_dgx_h100(plan, off);
    CHECK(q.makespan == r.makespan);
    for (std::uint32_t g = 0; g < 2; ++g) {
        for (const auto& s : q.gpus[g].intervals) CHECK(s.empty());
        CHECK(same(q.gpus[g].breakdown, r.gpus[g].breakdown));
        // Windows that cut kernels, the send and the host task.
        for (const auto& w : {std::pair{Time{}, r.makespan}, std::pair{us(2), us(12)}, std::pair{us(11), r.makespan}})
            CHECK(same(exec::breakdown_in(plan, q, g, w.first, w.second),
                       exec::breakdown_in(r.gpus[g], w.first, w.second)));
    }
    // GPU 0 over its first 15 us: 10 us compute, 5 us memory (the send runs beside kernel 1), no idle time.
    const auto b = exec::breakdown_in(plan, q, 0, Time{}, us(15));
    CHECK(b.compute == doctest::Approx(10e-6));
    CHECK(b.memory == doctest::Approx(5e-6));
    CHECK(b.idle == doctest::Approx(0).epsilon(1e-12));
}

TEST_SUITE_END();
