// The exposed all-to-all time the report prints as "of which all-to-all"
// (sim/report/exchange_time.h), on a hand-made plan and times.
#include "sim/report/exchange_time.h"

#include <doctest/doctest.h>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using sim::Time;
using sim::parallel::StreamKind;
using sim::parallel::Task;
using sim::parallel::TaskKind;

TEST_CASE("exposed all-to-all: its intervals' union less what the compute stream covers, by hand") {
    sim::parallel::Plan plan;
    plan.simulated_gpus = {0};
    plan.streams.resize(1);
    plan.compute_hash.resize(1, sim::parallel::Plan::kHashBasis);
    plan.kernel_off_compute.resize(1, 0);
    const std::uint32_t group = plan.add_group(sim::parallel::Group{{0, 1}, {0}, "auto", {}, 0});
    sim::exec::ExecResult r;
    const auto add = [&](TaskKind kind, StreamKind stream, sim::net::CollectiveOp op, int from_us, int to_us) {
        Task t;
        t.kind = kind;
        t.stream = stream;
        t.op = op;
        if (kind == TaskKind::collective) t.group = group;
        else t.kernel = plan.add_kernel(sim::hw::KernelDesc{});
        plan.add(t, {});
        r.task_start.push_back(Time::us(static_cast<std::uint64_t>(from_us)));
        r.task_end.push_back(Time::us(static_cast<std::uint64_t>(to_us)));
    };
    using Op = sim::net::CollectiveOp;
    add(TaskKind::kernel, StreamKind::compute, Op::all_reduce, 0, 10);
    add(TaskKind::collective, StreamKind::tp_comm, Op::all_to_all, 5, 20);
    add(TaskKind::collective, StreamKind::p2p, Op::all_to_all, 18, 25);  // overlaps the first: counted once
    add(TaskKind::kernel, StreamKind::compute, Op::all_reduce, 22, 24);
    add(TaskKind::collective, StreamKind::dp_comm, Op::all_reduce, 30, 40);  // not an all-to-all
    CHECK(sim::report::has_all_to_all(plan));
    const auto us = [&](int from, int to) {  // microseconds (Approx's margin is absolute near zero)
        return sim::report::exposed_all_to_all_seconds(plan, r, 0, Time::us(static_cast<std::uint64_t>(from)),
                                                       Time::us(static_cast<std::uint64_t>(to))) *
               1e6;
    };
    // All-to-alls run 5-25 us; kernels cover 5-10 and 22-24: 20 - 7 = 13 us exposed.
    CHECK(us(0, 50) == doctest::Approx(13.0));
    // Within 8-23 us: 15 us of all-to-all, kernels cover 8-10 and 22-23: 12 us.
    CHECK(us(8, 23) == doctest::Approx(12.0));
    CHECK(us(30, 50) == 0.0);
}

TEST_SUITE_END();
