// The stream order's two layouts (see stream_order.h).
#include "sim/parallel/stream_order.h"

#include "sim/core/error.h"

#include <algorithm>

namespace sim::parallel {

void StreamOrder::resize(std::size_t gpus) {
    for (const Kind& k : kinds_)
        check(k.rows == 0 && k.total == 0 && k.per_gpu.empty(), "stream order resized after tasks were added");
    gpus_ = gpus;
    slot_.assign(gpus, kEmpty);
    by_slot_.clear();
    for (Kind& k : kinds_) {
        k = Kind{};
        k.interleaved = gpus >= kInterleaveGpus;
        if (k.interleaved) k.len.assign(gpus, 0);
        else k.per_gpu.resize(gpus);
    }
}

StreamOrder::View StreamOrder::view(std::size_t gpu, std::size_t s) const {
    check(gpu < gpus_ && s < kStreamCount, "stream order: GPU or stream out of range");
    const Kind& k = kinds_[s];
    if (!k.interleaved) return View(k.per_gpu[gpu].data(), 1, k.per_gpu[gpu].size());
    if (k.len[gpu] == 0) return View();
    return View(k.cells.data() + slot_[gpu], gpus_, k.len[gpu]);
}

void StreamOrder::push(std::uint32_t gpu, std::size_t s, std::uint32_t id) {
    check(gpu < gpus_ && s < kStreamCount, "stream order: GPU or stream out of range");
    if (slot_[gpu] == kEmpty) {
        slot_[gpu] = static_cast<std::uint32_t>(by_slot_.size());
        by_slot_.push_back(gpu);
    }
    Kind& k = kinds_[s];
    if (k.interleaved) {
        const std::size_t h = k.len[gpu];
        if (h == k.rows) add_row(k);
        if (k.interleaved) {
            k.cells[h * gpus_ + slot_[gpu]] = id;
            ++k.len[gpu];
            ++k.total;
            return;
        }
    }
    k.per_gpu[gpu].push_back(id);
}

// A new row of padding, unless the padding would pass the bound: then the
// kind becomes one vector per GPU (before the entry that asked for the row).
void StreamOrder::add_row(Kind& k) {
    if ((k.rows + 1) * gpus_ > 4 * (k.total + 1) + kSlackRows * gpus_) {
        to_per_gpu(k);
        return;
    }
    const std::size_t at = k.cells.size();
    k.cells.resize(at + gpus_);
    std::fill(k.cells.begin() + at, k.cells.end(), kEmpty);
    ++k.rows;
}

void StreamOrder::to_per_gpu(Kind& k) {
    k.per_gpu.assign(gpus_, {});
    for (std::size_t g = 0; g < gpus_; ++g) {
        auto& out = k.per_gpu[g];
        out.reserve(k.len[g]);
        for (std::size_t h = 0; h < k.len[g]; ++h) out.push_back(k.cells[h * gpus_ + slot_[g]]);
    }
    k.interleaved = false;
    k.cells = PodVector<std::uint32_t>();
    k.rows = 0;
    k.total = 0;
    k.len = std::vector<std::uint32_t>();
}

}  // namespace sim::parallel
