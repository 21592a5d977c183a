// HBM capacity accounting per GPU, with the breakdown a user needs to see
// why a plan does not fit.
#pragma once

#include "sim/core/units.h"

#include <string>

namespace sim::hw {

struct MemoryBreakdown {
    double weights = 0, gradients = 0, optimizer = 0, activations = 0, kv_cache = 0, workspace = 0;  // bytes
    // The MoE experts' part of weights, gradients and optimizer (included
    // in those; the rest is dense). Zero for a dense model.
    double expert_weights = 0, expert_gradients = 0, expert_optimizer = 0;
    double total() const { return weights + gradients + optimizer + activations + kv_cache + workspace; }
};

struct MemoryVerdict {
    MemoryBreakdown breakdown;
    Bytes capacity;
    bool oom = false;
    // "KV cache 1.34 TB (97%) of 1.38 TB needed; capacity 80.0 GB" when OOM.
    std::string explanation;
};

MemoryVerdict check_capacity(const MemoryBreakdown& need, Bytes capacity);

}  // namespace sim::hw
