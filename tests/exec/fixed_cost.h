// A cost model for executor tests: every kernel is compute-bound and takes
// its `flops` in microseconds, with no memory time and no launch overhead,
// so what the executor adds (host issue, interference) shows exactly.
#pragma once

#include "sim/hw/cost_model.h"

namespace parasim_test {

class FixedCost final : public sim::hw::CostModel {
public:
    std::string name() const override { return "fixed"; }
    sim::hw::KernelCost cost(const sim::hw::GpuSpec&, const sim::hw::KernelDesc& k,
                             const sim::hw::L2Residency&) const override {
        sim::hw::KernelCost c;
        c.compute_time = sim::Time::ps(static_cast<std::uint64_t>(k.flops.value) * 1'000'000);
        c.duration = c.compute_time;
        return c;
    }
};

}  // namespace parasim_test
