// Contiguous layer partitioning: split layers 0..n-1 into `parts` non-empty
// contiguous ranges that minimise the largest per-part cost (the pipeline's
// slowest stage), subject to each part's footprint fitting a capacity.
//
// Method: dynamic programming over prefixes gives the optimal bottleneck B*
// (O(n^2 * parts)); the ranges are then packed greedily left to right, each
// taking as many layers as B*, the capacity and the layers still needed by
// the remaining parts allow. The greedy packing makes ties deterministic:
// earlier stages take more.
#pragma once

#include <optional>
#include <utility>
#include <vector>

namespace sim::parallel {

using LayerRange = std::pair<int, int>;  // [first, last)

// The capacity a cache-aware split fits each stage into: the GPU's L2, its
// HBM, or a given size (the partitioners themselves: partition/).
enum class CapacityLevel { l2, hbm, bytes };

// nullopt when no partition into `parts` ranges keeps every footprint within
// `capacity` (footprints add up over a range).
std::optional<std::vector<LayerRange>> min_max_partition(const std::vector<double>& cost,
                                                         const std::vector<double>& footprint, int parts,
                                                         double capacity);

}  // namespace sim::parallel
