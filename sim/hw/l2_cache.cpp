// Cross-kernel L2 residency: whole tensors in LRU order, by bytes. The rules
// (docs/hardware-model.md §5):
//  - only reads are requests: a read of a tensor resident when the kernel
//    starts is served by L2 (a smaller resident copy serves its size);
//  - writes allocate (the L2 is write-back), so a kernel's output is resident
//    for the next kernel;
//  - after the hit check, every tensor the kernel used becomes most recently
//    used, in the order given, evicting least recently used tensors;
//  - a tensor larger than the capacity streams through and leaves nothing of
//    itself, but, as LRU would, it evicts everything resident before it.
#include "sim/hw/l2_cache.h"

#include <algorithm>

namespace sim::hw {

L2Cache::L2Cache(Bytes capacity) : capacity_(capacity) {}

Bytes L2Cache::access(const std::vector<TensorUse>& uses) {
    double hits = 0.0;
    for (const auto& u : uses) {
        if (u.write) continue;
        const double size = u.size.as_double();
        requested_bytes_ += size;
        const auto it = where_.find(u.id);
        if (it != where_.end()) hits += std::min(size, static_cast<double>(it->second->second));
    }
    for (const auto& u : uses) touch(u.id, u.size.value);
    hit_bytes_ += hits;
    return Bytes::ceil(hits);
}

void L2Cache::touch(std::uint64_t id, std::uint64_t size) {
    if (const auto it = where_.find(id); it != where_.end()) {
        used_ -= it->second->second;
        lru_.erase(it->second);
        where_.erase(it);
    }
    if (size > capacity_.value) {
        lru_.clear();
        where_.clear();
        used_ = 0;
        return;
    }
    lru_.emplace_front(id, size);
    where_[id] = lru_.begin();
    used_ += size;
    while (used_ > capacity_.value) {
        const auto& victim = lru_.back();
        used_ -= victim.second;
        where_.erase(victim.first);
        lru_.pop_back();
    }
}

}  // namespace sim::hw
