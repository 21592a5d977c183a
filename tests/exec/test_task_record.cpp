// The compact per-task records of a plan and of a run: a Task keeps only its
// kind's fields (plan.h: the kernel, group and receiver share storage, as do
// a size and a host duration), and the result keeps per task an index into
// the distinct kernel statistics (executor.h) instead of the statistics.
#include "sim/report/trace.h"
#include "tests/exec/exec_harness.h"

#include <doctest/doctest.h>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;
using parasim_test::us;

namespace {

// GPU 0: a 10 us kernel, a 3 us host task, a 1 MiB send to GPU 1 after the
// kernel, then the 10 us kernel again (same descriptor); GPU 1: the same
// descriptor once the data is there, then a 4 us kernel. Then a collective
// over both GPUs.
parallel::Plan plan_of_every_kind() {
    auto plan = parasim_test::empty_plan(2);
    const std::uint32_t k_ten = plan.add_kernel(parasim_test::kernel_desc_us("ten", 10));
    const std::uint32_t k_four = plan.add_kernel(parasim_test::kernel_desc_us("four", 4));
    auto kernel = [&](std::uint32_t gpu, std::uint32_t k, const std::vector<std::uint32_t>& deps) {
        parallel::Task t;
        t.kind = parallel::TaskKind::kernel;
        t.gpu = gpu;
        t.kernel = k;
        return plan.add(t, deps);
    };
    const std::uint32_t first = kernel(0, k_ten, {});  // task 0
    parallel::Task host;                               // task 1
    host.kind = parallel::TaskKind::host;
    host.stream = parallel::StreamKind::host;
    host.host_time = us(3);
    plan.add(host, {});
    parallel::Task send;  // task 2
    send.kind = parallel::TaskKind::transfer;
    send.stream = parallel::StreamKind::p2p;
    send.peer = 1;
    send.bytes = Bytes{1 << 20};
    const std::uint32_t s = plan.add(send, {first});
    kernel(0, k_ten, {first});  // task 3
    kernel(1, k_ten, {s});      // task 4
    kernel(1, k_four, {});      // task 5
    parallel::Group g;
    g.gpus = {0, 1};
    g.members = {0, 1};
    g.algorithm = "ring";
    parallel::Task c;  // task 6
    c.kind = parallel::TaskKind::collective;
    c.stream = parallel::StreamKind::dp_comm;
    c.group = plan.add_group(g);
    c.bytes = Bytes{4096};
    plan.add(c, {});
    return plan;
}

}  // namespace

TEST_CASE("task record: 40 bytes, each kind's fields kept") {
    CHECK(sizeof(parallel::Task) == 40);
    const auto plan = plan_of_every_kind();
    REQUIRE(plan.tasks.size() == 7);
    CHECK(plan.tasks[0].kernel == 0);
    CHECK(plan.tasks[1].host_time == us(3));
    CHECK(plan.tasks[2].peer == 1);
    CHECK(plan.tasks[2].bytes.value == (1u << 20));
    CHECK(plan.tasks[5].kernel == 1);
    CHECK(plan.tasks[6].group == 0);
    CHECK(plan.tasks[6].bytes.value == 4096);
    // A fresh task has no kernel and no size.
    const parallel::Task fresh;
    CHECK(fresh.kernel == parallel::kNone);
    CHECK(fresh.bytes.value == 0);
}

TEST_CASE("task record: a host task's trace slice moves no bytes (its size field holds its duration)") {
    const auto plan = plan_of_every_kind();
    const auto r = parasim_test::run_on_dgx_h100(plan, exec::ExecOptions{});
    const std::string trace = report::chrome_trace("t", plan, r);
    const auto host = trace.find("\"cat\":\"host\"");
    REQUIRE(host != std::string::npos);
    const auto end = trace.find("}}", host);  // the slice's args close it
    REQUIRE(end != std::string::npos);
    const std::string text = trace.substr(host, end + 2 - host);
    CAPTURE(text);
    CHECK(text.find("\"bytes\":0}}") != std::string::npos);
    CHECK(trace.find("\"bytes\":1048576}") != std::string::npos);  // the send's
    CHECK(trace.find("\"bytes\":4096}") != std::string::npos);     // the collective's
}

TEST_CASE("kernel statistics: one entry per descriptor and hits, entry 0 for every other task") {
    const auto plan = plan_of_every_kind();
    const auto r = parasim_test::run_on_dgx_h100(plan, exec::ExecOptions{});
    REQUIRE(r.kernel_stats_index.size() == plan.tasks.size());
    // FixedCost has no L2 traffic, so a kernel's entry is its FLOPs alone:
    // three runs of "ten" (no L2 hits, no tensors) share one entry.
    REQUIRE(r.kernel_stats.size() == 3);
    CHECK(r.kernel_stats[0].flops == 0);
    for (const std::uint32_t t : {1u, 2u, 6u}) CHECK(r.kernel_stats_index[t] == 0);
    CHECK(r.kernel_stats_index[0] == r.kernel_stats_index[3]);
    CHECK(r.kernel_stats_index[0] == r.kernel_stats_index[4]);
    CHECK(r.kernel_stats_index[0] != r.kernel_stats_index[5]);
    CHECK(r.kernel_stats_of(0).flops == 10);
    CHECK(r.kernel_stats_of(4).flops == 10);
    CHECK(r.kernel_stats_of(5).flops == 4);
    CHECK(r.kernel_stats_of(6).flops == 0);
    CHECK(r.kernel_stats_of(0).l2_requested_bytes == 0);
}

TEST_SUITE_END();
