// Memoized kernel costs (the key is every input the cost models read).
#include "sim/serve/memo_cost_model.h"

#include "sim/core/error.h"

#include <bit>

namespace sim::serve {

std::size_t MemoCostModel::KeyHash::operator()(const Key& k) const {
    std::uint64_t h = 1469598103934665603ULL;  // FNV-1a over the words
    for (const auto v : k) {
        h ^= v;
        h *= 1099511628211ULL;
    }
    return static_cast<std::size_t>(h);
}

hw::KernelCost MemoCostModel::cost(const hw::GpuSpec& gpu, const hw::KernelDesc& k, const hw::L2Residency& l2) const {
    if (&gpu != &gpu_) throw InternalError("MemoCostModel asked about another GPU than its own");
    const auto u = [](auto v) { return static_cast<std::uint64_t>(v); };
    const Key key{u(k.kind),
                  u(k.dtype),
                  std::bit_cast<std::uint64_t>(k.flops.value),
                  k.bytes_read.value,
                  k.bytes_written.value,
                  k.epilogue_read.value,
                  u(k.m),
                  u(k.n),
                  u(k.k),
                  u(k.batch),
                  u(k.causal) | u(k.backward) << 1 | u(k.attention_kernel) << 2 | u(k.grouped) << 4 |
                      u(k.grouped_dense_ceiling) << 5,
                  l2.resident_read_bytes.value,
                  std::bit_cast<std::uint64_t>(k.issue_instructions),
                  std::bit_cast<std::uint64_t>(k.ceiling),
                  std::bit_cast<std::uint64_t>(k.hbm_share)};
    if (const auto it = memo_.find(key); it != memo_.end()) {
        ++hits_;
        return it->second;
    }
    ++misses_;
    const hw::KernelCost c = inner_.cost(gpu, k, l2);
    memo_.emplace(key, c);
    return c;
}

}  // namespace sim::serve
