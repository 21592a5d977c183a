// overlap.two_batch (docs/moe.md section 8a): the passes that the
// inference and serving builders call, and, between its two files,
// emit_two_batch.cpp's emit_two_halves handing a decode step's halves to
// emit_two_batch_decode.cpp, which joins their ends as the prefill order does.
#pragma once

#include "sim/parallel/emitter.h"

#include <cstdint>
#include <vector>

namespace sim::parallel {

// One inference pass (prefill or a decode step) of `shape` on stage 0 under
// overlap.two_batch (pp 1): the embedding and dense layers on the whole
// batch, the MoE layers as two halves whose segments alternate at the
// all-to-alls, then the head on the whole batch, and `tail` after it (the
// decode step's kernels). `entry` and `last` as Emitter::emit_ops's
// `pending` and `last`. emit_two_batch.cpp.
void emit_two_batch_pass(Emitter& em, Phase ph, int mb, const workload::PassShape& shape, int step,
                         const std::vector<Operator>& tail, std::vector<std::vector<std::uint32_t>>& entry,
                         std::vector<std::uint32_t>& last);

// The two halves' operators (`a_layers`, `b_layers`: each half's MoE layers,
// one list a layer) on stage 0 in SGLang's stage order for the phase: in
// prefill cut at their all-to-alls into segments that alternate on the
// compute stream, A's first; in decode SGLang's decode order
// (emit_two_batch_decode.cpp). After it
// `entry` holds both halves' ends, so what follows runs on the merged batch.
// Shared by `run`'s passes and serving's iterations (emit_serving.cpp).
// emit_two_batch.cpp.
void emit_two_halves(Emitter& em, Phase ph, int mb, int step, const std::vector<std::vector<Operator>>& a_layers,
                     const std::vector<std::vector<Operator>>& b_layers, std::vector<std::vector<std::uint32_t>>& entry,
                     std::vector<std::uint32_t>& last);

// SGLang's split of a pass's `sequences` (of `tokens` new tokens each) into
// two halves (two_batch_overlap.py, compute_split_seq_index): prefill, the
// first half ends at the first sequence, the last excepted, where the running
// sum of tokens reaches half the total (rounded down); decode, the first half
// is sequences / 2 rounded down. Returns the first half's sequences; 0 means
// no split (one sequence).
std::int64_t two_batch_first_half(Phase ph, std::int64_t sequences, std::int64_t tokens);

// The first layer the halves run apart under overlap.two_batch (pp 1: the
// one stage's range): SGLang runs the dense first_k_dense_replace layers on
// the whole batch (DeepseekV2Model.forward); the stage's end when the pass
// is not split. emit_two_batch.cpp.
int two_batch_first_moe(const Emitter& em, bool split);

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
