// A cost model that remembers: it forwards to the scenario's cost model and
// keeps each answer under a key made of every input that model reads (the
// kernel's kind, dtype, FLOPs, bytes read, written and read by the epilogue,
// m, n, k, batch, causal, backward, attention kernel, the grouped flags, the
// issue instructions, the ceiling, the share of the streaming rate, and the
// L2-resident bytes; the GPU is fixed per instance). Equal keys are equal calls to a
// pure function, so the answer is the same one, bit for bit: serving runs
// the same kernel shapes thousands of times (docs/serving.md, "Iteration
// cost and its cache"); tests/serve/ checks the equality.
#pragma once

#include "sim/hw/cost_model.h"

#include <array>
#include <cstdint>
#include <unordered_map>

namespace sim::serve {

class MemoCostModel final : public hw::CostModel {
public:
    MemoCostModel(const hw::CostModel& inner, const hw::GpuSpec& gpu) : inner_(inner), gpu_(gpu) {}
    std::string name() const override { return inner_.name(); }
    hw::KernelCost cost(const hw::GpuSpec& gpu, const hw::KernelDesc& k, const hw::L2Residency& l2) const override;
    const hw::GpuSpec& gpu() const { return gpu_; }
    std::uint64_t hits() const { return hits_; }
    std::uint64_t misses() const { return misses_; }

private:
    using Key = std::array<std::uint64_t, 15>;
    struct KeyHash {
        std::size_t operator()(const Key& k) const;
    };
    const hw::CostModel& inner_;
    const hw::GpuSpec& gpu_;
    mutable std::unordered_map<Key, hw::KernelCost, KeyHash> memo_;
    mutable std::uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace sim::serve
