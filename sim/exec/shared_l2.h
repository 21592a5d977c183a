// The executor's L2 residency, one model per distinct kernel sequence
// instead of one per GPU. A GPU's L2 state is a function of the kernels it
// has run, in order (sim/hw/l2_cache.h), and kernels run only on the compute
// stream, one at a time in its program order. GPUs whose compute streams
// hold the same kernel descriptors at the same positions (the TP ranks and
// DP replicas of a pipeline stage, which share descriptors) therefore see
// the same hits at the same position, whatever their timing: the first of
// them to reach a position advances the group's model and records the
// descriptor and the hit bytes, the others read them.
//
// Groups are formed from the plan's per-GPU hash of that sequence
// (Plan::compute_hash) and checked as the run goes: a GPU reading a position
// compares the recorded descriptor with its own, and the positions it
// skipped (non-kernels) with none. One that differs (a hash collision) gets
// a model of its own, rebuilt by replaying its own kernels before that
// position. So the hits are exactly those of one model per GPU; the L2 work
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

    // Hit bytes of kernel `kernel` (descriptor index) at position `pos` of
    // GPU `gpu`'s compute stream, given the L2 state its earlier kernels
    // left. A GPU's calls come in increasing position order.
    Bytes access(std::uint32_t gpu, std::size_t pos, std::uint32_t kernel) {
        const hw::KernelDesc& k = plan_.kernels[kernel];
        Group& q = groups_[group_[gpu]];
        if (q.hits.empty()) return q.l2.access(k.tensors);
        const std::size_t from = next_[gpu];
        next_[gpu] = pos + 1;
        if (pos < q.filled) {
            // Read: the same descriptor here and nothing at the positions
            // this GPU skipped since its last kernel.
            bool same = q.kernel[pos] == kernel;
            for (std::size_t p = from; same && p < pos; ++p) same = q.kernel[p] == parallel::kNone;
            if (same) return q.hits[pos];
            return detach(gpu, pos, kernel);
        }
        // Advance: positions from `filled` to here are non-kernels (this GPU
        // skipped them); the ones it read before were checked.
        if (pos >= q.hits.size()) return detach(gpu, pos, kernel);
        for (std::size_t p = from; p < q.filled; ++p)
            if (q.kernel[p] != parallel::kNone) return detach(gpu, pos, kernel);
        for (std::size_t p = q.filled; p < pos; ++p) q.kernel[p] = parallel::kNone;
        const Bytes h = q.l2.access(k.tensors);
        q.hits[pos] = h;
        q.kernel[pos] = kernel;
        q.filled = pos + 1;
        return h;
    }

    // Plans of fewer GPUs keep one model per GPU (no grouping, no record).
    static constexpr std::size_t kShareGpus = 32;

    std::size_t group_count() const { return groups_.size(); }
    std::uint32_t group_of(std::uint32_t gpu) const { return group_[gpu]; }

private:
    struct Group {
        hw::L2Cache l2;
        std::vector<Bytes> hits;            // by compute-stream position; empty: one member, no record
        std::vector<std::uint32_t> kernel;  // descriptor recorded at each position (kNone: not a kernel)
        std::size_t filled = 0;             // positions below it are recorded
    };
    // Gives `gpu` a model of its own, replays its kernels before `pos` on
    // it, and runs the kernel at `pos`.
    Bytes detach(std::uint32_t gpu, std::size_t pos, std::uint32_t kernel);

    const parallel::Plan& plan_;
    Bytes capacity_;
    std::vector<std::uint32_t> group_;  // per simulated GPU
    std::vector<std::size_t> next_;     // per simulated GPU: position after its last kernel
    std::vector<Group> groups_;
};

}  // namespace sim::exec
