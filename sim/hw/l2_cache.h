// Cross-kernel L2 residency: an LRU set of named tensors (weights,
// activations, KV blocks) with a byte capacity. A kernel's read of a tensor
// still resident is served by L2; hit rate = bytes served by L2 / bytes
// requested.
#pragma once

#include "sim/core/units.h"
#include "sim/hw/kernel.h"

#include <cstdint>
#include <list>
#include <unordered_map>
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
    void touch(std::uint64_t id, std::uint64_t size);

    Bytes capacity_;
    std::uint64_t used_ = 0;
    std::list<std::pair<std::uint64_t, std::uint64_t>> lru_;  // front = most recent (id, size)
    std::unordered_map<std::uint64_t, std::list<std::pair<std::uint64_t, std::uint64_t>>::iterator> where_;
    double hit_bytes_ = 0.0;
    double requested_bytes_ = 0.0;
};

}  // namespace sim::hw
