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
        if (const std::uint32_t n = find(u.id); n != kNil) hits += std::min(size, static_cast<double>(nodes_[n].size));
    }
    for (const auto& u : uses) touch(u.id, u.size.value);
    hit_bytes_ += hits;
    return Bytes::ceil(hits);
}

void L2Cache::touch(std::uint64_t id, std::uint64_t size) {
    if (const std::uint32_t n = find(id); n != kNil) {
        used_ -= nodes_[n].size;
        if (size <= capacity_.value) {
            // Resident and staying: move it to the front in place. The same
            // list order and node as unlinking it and inserting it anew (its
            // node would be the free list's head and be taken back at once),
            // without erasing and re-inserting its map slot.
            if (n != head_) {
                Node& x = nodes_[n];
                nodes_[x.prev].next = x.next;
                (x.next != kNil ? nodes_[x.next].prev : tail_) = x.prev;
                x.prev = kNil;
                x.next = head_;
                nodes_[head_].prev = n;
                head_ = n;
            }
            nodes_[n].size = size;
            used_ += size;
            evict_over_capacity();
            return;
        }
        unlink(n);
        erase_slot(id);
    }
    if (size > capacity_.value) {
        clear();
        return;
    }
    std::uint32_t n = free_;
    if (n != kNil) {
        free_ = nodes_[n].next;
    } else {
        n = static_cast<std::uint32_t>(nodes_.size());
        nodes_.emplace_back();
    }
    nodes_[n] = Node{id, size, kNil, head_};
    if (head_ != kNil) nodes_[head_].prev = n;
    head_ = n;
    if (tail_ == kNil) tail_ = n;
    insert_slot(id, n);
    used_ += size;
    evict_over_capacity();
}

void L2Cache::evict_over_capacity() {
    while (used_ > capacity_.value) {
        const std::uint32_t victim = tail_;
        used_ -= nodes_[victim].size;
        erase_slot(nodes_[victim].id);
        unlink(victim);
    }
}

// Unlinks node n from the LRU list and returns it to the free list.
void L2Cache::unlink(std::uint32_t n) {
    Node& x = nodes_[n];
    (x.prev != kNil ? nodes_[x.prev].next : head_) = x.next;
    (x.next != kNil ? nodes_[x.next].prev : tail_) = x.prev;
    x.prev = kNil;
    x.next = free_;
    free_ = n;
}

void L2Cache::clear() {
    while (head_ != kNil) unlink(head_);
    std::fill(slots_.begin(), slots_.end(), Slot{});
    count_ = 0;
    used_ = 0;
}

std::size_t L2Cache::home(std::uint64_t id) const {
    return static_cast<std::size_t>((id * 0x9E3779B97F4A7C15ULL) >> 32) & (slots_.size() - 1);
}

std::uint32_t L2Cache::find(std::uint64_t id) const {
    if (slots_.empty()) return kNil;
    for (std::size_t i = home(id);; i = (i + 1) & (slots_.size() - 1)) {
        if (slots_[i].node == kNil) return kNil;
        if (slots_[i].id == id) return slots_[i].node;
    }
}

void L2Cache::insert_slot(std::uint64_t id, std::uint32_t node) {
    // At most half full, so probes stay short and an empty slot ends them.
    if (2 * (count_ + 1) > slots_.size()) {
        std::vector<Slot> old(std::max<std::size_t>(16, 2 * slots_.size()));
        old.swap(slots_);
        count_ = 0;
        for (const Slot& s : old)
            if (s.node != kNil) insert_slot(s.id, s.node);
    }
    std::size_t i = home(id);
    while (slots_[i].node != kNil) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = Slot{id, node};
    ++count_;
}

// Removes id's slot (it must be present), shifting back the entries of its
// probe run that would no longer be found past the hole.
void L2Cache::erase_slot(std::uint64_t id) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = home(id);
    while (slots_[i].id != id || slots_[i].node == kNil) i = (i + 1) & mask;
    for (std::size_t j = (i + 1) & mask; slots_[j].node != kNil; j = (j + 1) & mask) {
        const std::size_t k = home(slots_[j].id);
        // Slot j may fill the hole at i unless its home lies cyclically in (i, j].
        const bool stays = i <= j ? (k > i && k <= j) : (k > i || k <= j);
        if (!stays) {
            slots_[i] = slots_[j];
            i = j;
        }
    }
    slots_[i] = Slot{};
    --count_;
}

}  // namespace sim::hw
