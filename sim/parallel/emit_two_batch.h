// Between the two files of overlap.two_batch (docs/moe.md section 8a):
// emit_two_batch.cpp's emit_two_halves hands a decode step's halves to
// emit_two_batch_decode.cpp, which joins their ends as the prefill order does.
#pragma once

#include "sim/parallel/emitter.h"

#include <cstdint>
#include <vector>

namespace sim::parallel {

// A decode step's halves in SGLang's decode order (its DeepSeek decode
// strategy, tbo_delta_stages 2): each MoE layer five stages, half A two
// stages ahead of half B; each exchange issued at its `_a` operation and
// waited for at its `_b`. emit_two_batch_decode.cpp.
void emit_two_halves_decode(Emitter& em, int mb, int step, const std::vector<std::vector<Operator>>& a_layers,
                            const std::vector<std::vector<Operator>>& b_layers,
                            std::vector<std::vector<std::uint32_t>>& entry, std::vector<std::uint32_t>& last);

// The halves' ends joined: `entry` waits for both halves' chains and
// `last` is the later of their last tasks. emit_two_batch.cpp.
void join_two_halves(const std::vector<std::vector<std::uint32_t>>& a_pending, const std::vector<std::uint32_t>& a_last,
                     const std::vector<std::vector<std::uint32_t>>& b_pending, const std::vector<std::uint32_t>& b_last,
                     std::vector<std::vector<std::uint32_t>>& entry, std::vector<std::uint32_t>& last);

}  // namespace sim::parallel
