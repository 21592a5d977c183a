// The eight-step rank order DualPipe and DualPipeV share (the two `step`
// methods of github:deepseek-ai/DualPipe, dualpipe/dualpipe.py and
// dualpipe/dualpipev.py, differ only in what they count the steps with), and
// the activation peak that order holds. dualpipe.cpp and dualpipev.cpp say
// what h, H, the micro-batch count and the two directions are for each.
#pragma once

#include "sim/parallel/schedule/i_schedule.h"

#include <cstdint>
#include <vector>

namespace sim::parallel::schedules {

// One rank's place in the order. "Near" is the chunk whose micro-batches
// reach this rank first, "far" the other (1 - near).
struct DualRank {
    int h = 0;          // DualPipe: min(s, pp - 1 - s); DualPipeV: the rank s
    int big_h = 1;      // DualPipe: pp / 2; DualPipeV: pp
    int per_chunk = 1;  // micro-batches through each chunk: m / 2 (DualPipe), m (DualPipeV)
    int near = 0;
    int first_mb[2] = {0, 0};  // chunk c's k-th micro-batch is first_mb[c] + k
};

// The items of the eight steps (h, H, n = per_chunk):
//   1. 2(H - h - 1) forwards near
//   2. h + 1 times: forward near, forward far
//   3. H - h - 1 times: input-gradient backward far, its weight gradient,
//      forward far
//   4. n - 2H + h + 1 times: (forward near & backward far), (forward far &
//      backward near), each pair overlapped; the rank with h = H - 1 runs
//      its very first pair unoverlapped
//   5. H - h - 1 times: backward far, (forward far & backward near)
//   6. h + 1 times: backward far, backward near; from the middle of this
//      step on, input-gradient only (the weight gradients wait)
//   7. H - h - 1 times: a waiting weight gradient, then an input-gradient
//      backward near
//   8. h + 1 waiting weight gradients
// Weight gradients run first in, first out (WeightGradStore is a queue).
std::vector<ScheduleItem> dual_steps(const DualRank& rank);

// The most forwards not yet freed by their (input-gradient) backward,
// counting a pair's forward before its backward (the forward's activations
// are made while the backward's are freed).
std::int64_t dual_steps_peak(const std::vector<ScheduleItem>& items);

}  // namespace sim::parallel::schedules
