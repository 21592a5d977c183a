// Shared by the DualPipe and DualPipeV tests: schedule items written the way
// the reference code's steps read (F, P, B, Bi, W), the 4-rank training
// scenario with links too fast to matter, and a cost model in which only the
// layers' GEMMs take time (1 ms each), so an iteration's makespan is a count
// of GEMMs that the tests work out by hand.
#pragma once

#include "sim/config/data_dir.h"
#include "sim/config/scenario.h"
#include "sim/hw/cost_model.h"
#include "sim/parallel/schedule/i_schedule.h"

#include <string>
#include <vector>

namespace dual_pipe_test {

using sim::parallel::BackwardPart;
using sim::parallel::ScheduleItem;

// Forward, backward (whole, input-gradient half, weight-gradient half) of
// micro-batch mb on chunk c; P: a forward that runs paired with the next item.
inline ScheduleItem F(int mb, int c) { return {true, mb, c}; }
inline ScheduleItem P(int mb, int c) { return {true, mb, c, BackwardPart::all, true}; }
inline ScheduleItem B(int mb, int c) { return {false, mb, c}; }
inline ScheduleItem Bi(int mb, int c) { return {false, mb, c, BackwardPart::input}; }
inline ScheduleItem W(int mb, int c) { return {false, mb, c, BackwardPart::weight}; }

inline sim::config::ScenarioSpec scenario(const std::string& path, const std::vector<std::string>& sets) {
    std::vector<sim::config::Override> ov;
    for (const auto& s : sets) ov.push_back(sim::config::parse_override(s));
    return sim::config::load_scenario(path, ov);
}

// The layers' GEMMs (every one above 100 GFLOP in the 4-rank scenario) take
// 1 ms each; every other kernel (attention, norms, the 128-word head and
// embedding, the optimizer) takes no time. A forward or either half of a
// backward of one layer is 4 GEMMs.
inline constexpr sim::Time kGemm = sim::Time::ps(1'000'000'000);
class LayerGemmsOnly final : public sim::hw::CostModel {
public:
    std::string name() const override { return "layer-gemms-only"; }
    sim::hw::KernelCost cost(const sim::hw::GpuSpec&, const sim::hw::KernelDesc& k,
                             const sim::hw::L2Residency&) const override {
        sim::hw::KernelCost c;
        if (k.kind == sim::hw::KernelKind::gemm && k.flops.value >= 1e11) c.compute_time = c.duration = kGemm;
        return c;
    }
};

// tests/data/scenarios/pipeline-4stage-training.yaml (4 ranks, 8 equal
// layers, 8 micro-batches) under `schedule`, links too fast to matter.
inline sim::config::ScenarioSpec four_ranks(const std::string& schedule, std::vector<std::string> extra = {}) {
    std::vector<std::string> sets = {"strategies[1].schedule=" + schedule, "workload.recompute=none",
                                     "cluster.links.nvlink.bandwidth=1000000 TB/s",
                                     "cluster.links.nvlink.latency=0 us"};
    sets.insert(sets.end(), extra.begin(), extra.end());
    return scenario(std::string(sim::config::data_dir()) + "/tests/data/scenarios/pipeline-4stage-training.yaml", sets);
}

}  // namespace dual_pipe_test
