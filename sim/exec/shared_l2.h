// The executor's L2 residency, one model per distinct kernel sequence
// instead of one per GPU. A GPU's L2 state is a function of the kernels it
// has run, in order (sim/hw/l2_cache.h), and kernels run only on the compute
// stream, one at a time in its program order. GPUs whose compute streams
// hold the same kernel descriptors at the same positions (the TP ranks and
// DP replicas of a pipeline stage, which share descriptors) therefore see
// the same hits at the same position, whatever their timing: the first of
// them to reach a position advances the group's model and records the hit
// bytes, the others read them. Same hits as one model per GPU; the L2 work
// is done once per group instead of once per GPU.
#pragma once

#include "sim/core/units.h"
#include "sim/hw/l2_cache.h"
#include "sim/parallel/plan.h"

#include <cstdint>
#include <vector>

namespace sim::exec {

class SharedL2 {
public:
    SharedL2(const parallel::Plan& plan, Bytes capacity);

    // Hit bytes of kernel `k`, at position `pos` of GPU `gpu`'s compute
    // stream, given the L2 state its earlier kernels left. A GPU's calls
    // must come in increasing position order (the stream runs in order).
    Bytes access(std::uint32_t gpu, std::size_t pos, const hw::KernelDesc& k) {
        Group& q = groups_[group_[gpu]];
        if (q.hits.empty()) return q.l2.access(k.tensors);
        // Every member runs the same kernels at positions below `filled`,
        // so the model's state at `pos` is this GPU's.
        if (pos < q.filled) return q.hits[pos];
        const Bytes h = q.l2.access(k.tensors);
        q.hits[pos] = h;
        q.filled = pos + 1;
        return h;
    }

    std::size_t group_count() const { return groups_.size(); }
    std::uint32_t group_of(std::uint32_t gpu) const { return group_[gpu]; }

private:
    struct Group {
        hw::L2Cache l2;
        std::vector<Bytes> hits;  // by compute-stream position; empty: one member, no record
        std::size_t filled = 0;   // positions below it are recorded
    };
    std::vector<std::uint32_t> group_;  // per simulated GPU
    std::vector<Group> groups_;
};

}  // namespace sim::exec
