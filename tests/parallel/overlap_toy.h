// Shared by the overlap tests (overlap.moe_a2a, overlap.two_batch): a cost
// model in which every kernel takes the same time, a plan built and run on
// the scenario's topology, and the durations of its all-to-alls, so that
// the plan's order alone decides the timeline and the expected makespan is
// a count of kernels and exchanges.
#pragma once

#include "sim/config/scenario.h"
#include "sim/exec/executor.h"
#include "sim/hw/cost_model.h"
#include "sim/net/topology.h"
#include "sim/parallel/builder.h"

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

namespace parasim_test {

inline constexpr sim::Time kToyKernel = sim::Time::ps(1'000'000'000);  // 1 ms, every kernel

// Every kernel takes k whatever its shape or L2 hits.
class ConstantCost final : public sim::hw::CostModel {
public:
    explicit ConstantCost(sim::Time k = kToyKernel) : k_(k) {}
    std::string name() const override { return "constant"; }
    sim::hw::KernelCost cost(const sim::hw::GpuSpec&, const sim::hw::KernelDesc&,
                             const sim::hw::L2Residency&) const override {
        sim::hw::KernelCost c;
        c.compute_time = k_;
        c.duration = k_;
        return c;
    }

private:
    sim::Time k_;
};

struct ToyRun {
    sim::parallel::PlanBuild build;
    sim::exec::ExecResult result;
};

// Strategy `strategy` of `sc` built and executed with kernels of `kernel`
// and `comm_sms` SMs lent to the collective library's communication.
inline ToyRun run_toy(const sim::config::ScenarioSpec& sc, std::size_t strategy, int comm_sms,
                      sim::Time kernel = kToyKernel) {
    const ConstantCost cm(kernel);
    ToyRun r{sim::parallel::build_plan(sc, sc.strategies.at(strategy), cm, {}), {}};
    const sim::net::Topology topo(sc.cluster, sc.gpus);
    sim::exec::ExecOptions eo;
    eo.comm_sms = comm_sms;
    eo.collectives = sc.collectives;
    r.result = sim::exec::execute(r.build.plan, sc.gpu, topo, cm, eo);
    return r;
}

// The durations of the plan's all-to-alls.
inline std::set<std::uint64_t> a2a_durations(const ToyRun& r) {
    std::set<std::uint64_t> out;
    for (std::size_t i = 0; i < r.build.plan.tasks.size(); ++i) {
        const auto& t = r.build.plan.tasks[i];
        if (t.kind == sim::parallel::TaskKind::collective && t.op == sim::net::CollectiveOp::all_to_all)
            out.insert((r.result.task_end[i] - r.result.task_start[i]).count_ps());
    }
    return out;
}

}  // namespace parasim_test
