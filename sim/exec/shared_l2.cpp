// Groups the simulated GPUs by their compute stream's kernel sequence
// (shared_l2.h says why that decides their L2 hits).
#include "sim/exec/shared_l2.h"

#include <unordered_map>

namespace sim::exec {

using parallel::kNone;
using parallel::StreamKind;
using parallel::TaskKind;

SharedL2::SharedL2(const parallel::Plan& plan, Bytes capacity) {
    const std::size_t g = plan.streams.size();
    group_.assign(g, kNone);
    const auto compute = static_cast<std::size_t>(StreamKind::compute);
    // The key of a GPU: its compute stream's descriptor per position (kNone
    // where a task is not a kernel). A GPU with a kernel on another stream
    // (only hand-built plans have one) keeps a model of its own, since its
    // kernels' order is then a matter of timing.
    std::vector<std::vector<std::uint32_t>> keys;          // per shared group
    std::vector<std::size_t> members;                      // per group
    std::unordered_multimap<std::uint64_t, std::uint32_t> by_hash;
    std::vector<std::uint32_t> key;
    for (std::size_t i = 0; i < g; ++i) {
        bool alone = false;
        for (std::size_t s = 0; s < parallel::kStreamCount && !alone; ++s) {
            if (s == compute) continue;
            for (const std::uint32_t id : plan.streams[i][s])
                if (plan.tasks[id].kind == TaskKind::kernel) {
                    alone = true;
                    break;
                }
        }
        key.clear();
        std::uint64_t h = 0xcbf29ce484222325ULL;
        for (const std::uint32_t id : plan.streams[i][compute]) {
            const auto& t = plan.tasks[id];
            const std::uint32_t k = t.kind == TaskKind::kernel ? t.kernel : kNone;
            key.push_back(k);
            h = (h ^ k) * 0x100000001b3ULL;
        }
        std::uint32_t found = kNone;
        if (!alone) {
            const auto range = by_hash.equal_range(h);
            for (auto it = range.first; it != range.second && found == kNone; ++it)
                if (keys[it->second] == key) found = it->second;
        }
        if (found == kNone) {
            found = static_cast<std::uint32_t>(keys.size());
            keys.push_back(alone ? std::vector<std::uint32_t>{} : key);
            members.push_back(0);
            if (!alone) by_hash.emplace(h, found);
        }
        group_[i] = found;
        ++members[found];
    }
    groups_.reserve(keys.size());
    for (std::size_t q = 0; q < keys.size(); ++q) {
        groups_.push_back(Group{hw::L2Cache(capacity), {}, 0});
        // One member needs no record: it reads its own model directly.
        if (members[q] > 1) groups_.back().hits.assign(keys[q].size(), Bytes{});
    }
}

}  // namespace sim::exec
