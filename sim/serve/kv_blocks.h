// The paged KV cache (vLLM's PagedAttention): the KV memory of a replica as a
// pool of fixed-size blocks of block_size tokens; a sequence of n tokens holds
// ceil(n / block_size) blocks. Sizing the pool from the memory left after
// weights and workspace is serving_memory() (simulator.cpp, docs/serving.md).
#pragma once

#include <cstdint>

namespace sim::serve {

class BlockManager {
public:
    BlockManager() = default;
    BlockManager(std::int64_t total_blocks, std::int64_t block_size);

    std::int64_t block_size() const { return block_size_; }
    std::int64_t total() const { return total_; }
    std::int64_t used() const { return used_; }
    std::int64_t free() const { return total_ - used_; }
    // Blocks that hold `tokens` tokens.
    std::int64_t blocks_for(std::int64_t tokens) const;
    // Takes n blocks; false (nothing taken) when fewer are free.
    bool take(std::int64_t n);
    // Returns n blocks; InternalError when more are returned than taken.
    void give_back(std::int64_t n);

private:
    std::int64_t total_ = 0, block_size_ = 16, used_ = 0;
};

}  // namespace sim::serve
