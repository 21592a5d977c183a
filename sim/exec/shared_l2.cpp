// Groups the simulated GPUs by their compute stream's kernel sequence
// (shared_l2.h says why that decides their L2 hits, and how a group that
// should not have formed is undone).
#include "sim/exec/shared_l2.h"

#include <unordered_map>

namespace sim::exec {

using parallel::kNone;
using parallel::StreamKind;
using parallel::TaskKind;

SharedL2::SharedL2(const parallel::Plan& plan, Bytes capacity) : plan_(plan), capacity_(capacity) {
    const std::size_t g = plan.streams.size();
    const auto compute = static_cast<std::size_t>(StreamKind::compute);
    group_.assign(g, kNone);
    next_.assign(g, 0);
    // Candidates: the same hash and length. A GPU with a kernel on another
    // stream (only hand-built plans have one) keeps a model of its own: its
    // kernels' order is then a matter of timing.
    // Below kShareGpus a model per GPU is cheaper than grouping: serving
    // runs plans of a few GPUs for every iteration cost it prices.
    const bool hashed = g >= kShareGpus && plan.compute_hash.size() == g && plan.kernel_off_compute.size() == g;
    std::unordered_map<std::uint64_t, std::uint32_t> first;  // (hash, length) mixed -> group
    std::vector<std::size_t> members;
    std::vector<std::size_t> length;
    for (std::size_t i = 0; i < g; ++i) {
        const std::size_t n = plan.streams[i][compute].size();
        std::uint32_t q = kNone;
        if (hashed && plan.kernel_off_compute[i] == 0) {
            const std::uint64_t key = (plan.compute_hash[i] ^ n) * 0x9E3779B97F4A7C15ULL;
            const auto it = first.find(key);
            if (it != first.end() && length[it->second] == n) q = it->second;
            else if (it == first.end()) first.emplace(key, static_cast<std::uint32_t>(members.size()));
        }
        if (q == kNone) {
            q = static_cast<std::uint32_t>(members.size());
            members.push_back(0);
            length.push_back(n);
        }
        group_[i] = q;
        ++members[q];
    }
    groups_.reserve(members.size());
    for (std::size_t q = 0; q < members.size(); ++q) {
        groups_.push_back(Group{hw::L2Cache(capacity), {}, {}, 0});
        // One member needs no record: it reads its own model directly.
        if (members[q] > 1) {
            groups_.back().hits.assign(length[q], Bytes{});
            groups_.back().kernel.assign(length[q], kNone);
        }
    }
}

Bytes SharedL2::detach(std::uint32_t gpu, std::size_t pos, std::uint32_t kernel) {
    const auto compute = static_cast<std::size_t>(StreamKind::compute);
    group_[gpu] = static_cast<std::uint32_t>(groups_.size());
    groups_.push_back(Group{hw::L2Cache(capacity_), {}, {}, 0});
    hw::L2Cache& l2 = groups_.back().l2;
    const auto& order = plan_.streams[gpu][compute];
    for (std::size_t p = 0; p < pos && p < order.size(); ++p) {
        const parallel::Task& t = plan_.tasks[order[p]];
        if (t.kind == TaskKind::kernel) l2.access(plan_.kernels[t.kernel].tensors);
    }
    return l2.access(plan_.kernels[kernel].tensors);
}

}  // namespace sim::exec
