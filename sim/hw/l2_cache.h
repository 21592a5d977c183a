// Cross-kernel L2 residency: an LRU set of named tensors (weights,
// activations, KV blocks) with a byte capacity. A kernel's read of a tensor
// still resident is served by L2; hit rate = bytes served by L2 / bytes
// requested.
#pragma once

#include "sim/core/units.h"
#include "sim/hw/kernel.h"

#include <cstdint>
#include <vector>

namespace sim::hw {

class L2Cache {
public:
    explicit L2Cache(Bytes capacity);

    // Applies one kernel's tensor uses in order: reads of resident tensors hit
    // (bytes returned), then every used tensor becomes most recently used;
    // tensors larger than the capacity are streamed and never resident.
    Bytes access(const std::vector<TensorUse>& uses);

    Bytes capacity() const { return capacity_; }
    Bytes resident_bytes() const { return Bytes{used_}; }
    double hit_bytes() const { return hit_bytes_; }
    double requested_bytes() const { return requested_bytes_; }
    double hit_rate() const { return requested_bytes_ > 0 ? hit_bytes_ / requested_bytes_ : 0.0; }

private:
    static constexpr std::uint32_t kNil = UINT32_MAX;
    // The LRU list lives in a node pool (indices, a free list) and the
    // id -> node map is open addressing with linear probing: once the pool
    // and the table have grown to the resident set, nothing is allocated,
    // which a simulation calling this for every kernel needs.
    struct Node {
        std::uint64_t id = 0, size = 0;
        std::uint32_t prev = kNil, next = kNil;  // prev: towards the most recent
    };
    struct Slot {
        std::uint64_t id = 0;
        std::uint32_t node = kNil;  // kNil: empty
    };

    void touch(std::uint64_t id, std::uint64_t size);
    std::size_t home(std::uint64_t id) const;
    std::uint32_t find(std::uint64_t id) const;  // node or kNil
    void insert_slot(std::uint64_t id, std::uint32_t node);
    void erase_slot(std::uint64_t id);
    void unlink(std::uint32_t n);
    void evict_over_capacity();
    void clear();

    Bytes capacity_;
    std::uint64_t used_ = 0;
    std::vector<Node> nodes_;
    std::uint32_t free_ = kNil;                // free nodes, chained by next
    std::uint32_t head_ = kNil, tail_ = kNil;  // most / least recently used
    std::vector<Slot> slots_;                  // size 0 or a power of two
    std::size_t count_ = 0;                    // resident tensors
    double hit_bytes_ = 0.0;
    double requested_bytes_ = 0.0;
};

}  // namespace sim::hw
