// Paged KV block accounting.
#include "sim/serve/kv_blocks.h"

#include "sim/core/error.h"

#include <fmt/format.h>

namespace sim::serve {

BlockManager::BlockManager(std::int64_t total_blocks, std::int64_t block_size)
    : total_(total_blocks), block_size_(block_size) {
    if (total_blocks < 0 || block_size < 1)
        throw InternalError(fmt::format("KV pool of {} blocks of {} tokens", total_blocks, block_size));
}

std::int64_t BlockManager::blocks_for(std::int64_t tokens) const {
    return tokens <= 0 ? 0 : (tokens + block_size_ - 1) / block_size_;
}

bool BlockManager::take(std::int64_t n) {
    if (n > free()) return false;
    used_ += n;
    return true;
}

void BlockManager::give_back(std::int64_t n) {
    if (n > used_) throw InternalError(fmt::format("KV pool: {} blocks returned, {} in use", n, used_));
    used_ -= n;
}

}  // namespace sim::serve
