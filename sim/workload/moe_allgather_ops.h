// Megatron-Core's allgather token dispatcher (MoEAllGatherTokenDispatcher;
// docs/moe.md section 3l), the shape of its exchange and its permutation
// kernels: each rank routes its own tokens, all-gathers every rank's tokens,
// gate weights and routing map over the etp x ep ranks, selects by a mask the
// rows its local experts take, and after the experts scatters their output
// back into the gathered rows, which a reduce-scatter over the same ranks
// sums and returns to their owners. moe_ops.cpp builds the layer around it.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/workload/op_builders.h"

namespace sim::workload::ops {

struct AllGatherShape {
    std::int64_t group = 1;   // ranks the dispatcher gathers over: etp x ep
    std::int64_t copies = 1;  // identical copies of each token among the gathered rows
    std::int64_t rows = 0;    // gathered rows: group x the tokens a rank routes
    std::int64_t local_experts = 1;
    std::vector<std::int64_t> local;  // tokens of each local expert of the hot EP rank, copies included
    std::int64_t selected = 0;        // their sum: the rows the permutation selects (L)
};

// `routed`: the routed part's dimensions (T: the tokens a rank routes, its
// sequence-parallel shard, or all T tokens without sequence parallelism);
// `sp`: whether the layer runs sequence parallel. Without it the etp
// expert-TP peers of a rank are TP ranks holding the same tokens, so the
// gathered rows hold etp copies of each and every local expert computes
// each copy.
AllGatherShape allgather_shape(const Dims& routed, bool sp);

// Forward: the mask-based selection of the local experts' rows out of the
// gathered ones (Megatron-Core's permute over the local routing map), and
// the scatter of the experts' output back into every gathered row (unpermute,
// zero where no local expert was picked). Backward: their mirror images;
// the gathered tokens' gradient buffer includes the gate weights' (the probs
// are gathered with the tokens, so their gradient is reduce-scattered too).
Operator allgather_permute(const Dims& x, const AllGatherShape& g, std::vector<TensorUse> uses);
Operator allgather_unpermute(const Dims& x, const AllGatherShape& g, std::vector<TensorUse> uses);
Operator allgather_unpermute_bwd(const Dims& x, const AllGatherShape& g, std::vector<TensorUse> uses);
Operator allgather_permute_bwd(const Dims& x, const AllGatherShape& g, std::vector<TensorUse> uses);

// The add of the shared experts' output to the routed output (forward), or
// of their input gradient to the routed one (backward), over a rank's tokens.
Operator allgather_add_shared(const Dims& x, const char* name);

}  // namespace sim::workload::ops
