// The breakdown taken as the run goes (sim/exec/run_breakdown.h) against
// hand-computed figures and against the breakdown of the same intervals
// after the run (breakdown_in), which it must equal double for double.
#include "sim/config/data_dir.h"
#include "sim/config/scenario.h"
#include "sim/exec/run_breakdown.h"
#include "sim/hw/cost_model.h"
#include "sim/net/topology.h"
#include "sim/parallel/builder.h"

#include <doctest/doctest.h>

#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;

namespace {

Time us(std::uint64_t v) { return Time::us(v); }

bool same(const exec::TimeBreakdown& a, const exec::TimeBreakdown& b) {
    return a.compute == b.compute && a.memory == b.memory && a.communication == b.communication && a.idle == b.idle;
}

}  // namespace

TEST_CASE("run breakdown: touching communication joins, zero-length adds nothing, overlap per piece") {
    // Compute stream: A [0, 10] compute-bound, B [12, 18] memory-bound.
    // Communication: X [5, 15] and Y [15, 20] (touching: one interval
    // [5, 20]), a zero-length Q at 22, Z [25, 30]. Run of 30 us.
    exec::RunBreakdown r;
    r.compute_begin(us(0));
    r.comm_begin(us(5));
    r.compute_end(us(10), exec::IntervalKind::compute_kernel);
    r.compute_begin(us(12));
    r.comm_end(us(15));
    r.comm_begin(us(15));
    r.compute_end(us(18), exec::IntervalKind::memory_kernel);
    r.comm_end(us(20));
    r.comm_begin(us(22));
    r.comm_end(us(22));
    r.comm_begin(us(25));
    r.comm_end(us(30));
    const exec::TimeBreakdown b = r.result(us(30));
    // Union [5, 20] + [25, 30] = 20 us, of which A covers 5 and B 6.
    CHECK(b.compute == doctest::Approx(10e-6));
    CHECK(b.memory == doctest::Approx(6e-6));
    CHECK(b.communication == doctest::Approx(9e-6));
    CHECK(b.idle == doctest::Approx(5e-6));

    exec::GpuRecord g;
    auto& compute = g.intervals[static_cast<std::size_t>(parallel::StreamKind::compute)];
    compute.push_back({us(0), us(10), 0, exec::IntervalKind::compute_kernel});
    compute.push_back({us(12), us(18), 1, exec::IntervalKind::memory_kernel});
    auto& tp = g.intervals[static_cast<std::size_t>(parallel::StreamKind::tp_comm)];
    tp.push_back({us(5), us(15), 2, exec::IntervalKind::communication});
    tp.push_back({us(22), us(22), 3, exec::IntervalKind::communication});
    tp.push_back({us(25), us(30), 4, exec::IntervalKind::communication});
    g.intervals[static_cast<std::size_t>(parallel::StreamKind::p2p)].push_back(
        {us(15), us(20), 5, exec::IntervalKind::communication});
    CHECK(same(b, exec::breakdown_in(g, Time{}, us(30))));
}

TEST_CASE("run breakdown: a union interval ending while a kernel runs, and one ending with it") {
    // Kernel [0, 10]; communication [2, 4] and [6, 10]: two pieces of one kernel.
    exec::RunBreakdown r;
    r.compute_begin(us(0));
    r.comm_begin(us(2));
    r.comm_end(us(4));
    r.comm_begin(us(6));
    r.comm_end(us(10));
    r.compute_end(us(10), exec::IntervalKind::compute_kernel);
    const exec::TimeBreakdown b = r.result(us(12));
    CHECK(b.compute == doctest::Approx(10e-6));
    CHECK(b.communication == doctest::Approx(0.0));
    CHECK(b.idle == doctest::Approx(2e-6));
    exec::GpuRecord g;
    g.intervals[static_cast<std::size_t>(parallel::StreamKind::compute)].push_back(
        {us(0), us(10), 0, exec::IntervalKind::compute_kernel});
    auto& dp = g.intervals[static_cast<std::size_t>(parallel::StreamKind::dp_comm)];
    dp.push_back({us(2), us(4), 1, exec::IntervalKind::communication});
    dp.push_back({us(6), us(10), 2, exec::IntervalKind::communication});
    CHECK(same(b, exec::breakdown_in(g, Time{}, us(12))));
}

TEST_SUITE_END();

TEST_SUITE_BEGIN("e2e");  // ctest label (docs/testing.md)

TEST_CASE("run breakdown: every GPU of real scenarios, collapsed and not, equals its intervals' breakdown") {
    const auto cm = hw::make_cost_model("roofline");
    for (const char* file : {"scenarios/moe-mixtral-8x7b-ep.yaml", "scenarios/fabric-multi-plane-h800.yaml",
                             "scenarios/partitioning-16xh100-feasible.yaml"}) {
        const auto sc = config::load_scenario(std::string(sim::config::data_dir()) + "/" + std::string(file), {});
        const net::Topology topo(sc.cluster, sc.gpus);
        for (const auto& strategy : sc.strategies)
            for (const bool collapse : {true, false}) {
                const auto build = parallel::build_plan(sc, strategy, *cm, parallel::BuildOptions{collapse});
                if (build.memory.oom) continue;
                const auto ex = exec::execute(build.plan, sc.gpu, topo, *cm);
                for (std::uint32_t g = 0; g < ex.gpus.size(); ++g) {
                    CAPTURE(file);
                    CAPTURE(strategy.name);
                    CAPTURE(g);
                    CHECK(same(ex.gpus[g].breakdown, exec::breakdown_in(ex.gpus[g], Time{}, ex.makespan)));
                    CHECK(same(ex.gpus[g].breakdown, exec::breakdown_in(build.plan, ex, g, Time{}, ex.makespan)));
                }
            }
    }
}

TEST_SUITE_END();
