// Megatron-Core's allgather token dispatcher (docs/moe.md section 3l;
// NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py,
// MoEAllGatherTokenDispatcher): the shape of its gathered rows and the
// bytes of its permutation kernels.
#include "sim/workload/moe_allgather_ops.h"

#include <algorithm>
#include <string>
#include <utility>

namespace sim::workload::ops {

namespace {
constexpr double kMapBytes = 1.0;  // one routing-map entry (bool) of a token and an expert
}  // namespace

AllGatherShape allgather_shape(const Dims& x, bool sp) {
    AllGatherShape g;
    const std::int64_t etp = x.o->expert_tp(), ep = x.o->ep;
    g.group = etp * ep;
    g.copies = sp ? 1 : etp;
    g.rows = g.group * x.T;
    g.local_experts = x.m->experts / std::max<std::int64_t>(1, ep);
    // The EP group routes ep x (etp / copies) x T distinct tokens (section 2),
    // every one of them present `copies` times among the gathered rows.
    const ExpertLoad load = expert_load(x.m->experts, x.m->top_k, x.o->ep, (etp / g.copies) * x.T, x.o->moe, x.layer);
    g.local = load.hot_local;
    for (std::int64_t& n : g.local) n *= g.copies;
    for (const std::int64_t n : g.local) g.selected += n;
    return g;
}

// Reads the selected rows and the local slices of the gathered routing map
// and gate weights; writes the rows and their gate weights in expert order.
Operator allgather_permute(const Dims& x, const AllGatherShape& g, std::vector<TensorUse> uses) {
    const double sel = static_cast<double>(g.selected), h = static_cast<double>(x.h);
    const double map = static_cast<double>(g.rows) * static_cast<double>(g.local_experts) * (kMapBytes + x.ab);
    Operator op =
        elementwise(x, "moe_ag_permute", 0, sel * h * x.ab + map, sel * h * x.ab + sel * x.ab, std::move(uses));
    // tokens_per_expert = local_map.sum(0).cpu(): the host waits for it to size the experts' GEMMs.
    op.kernel.host_sync = true;
    return op;
}

// Reads the experts' output rows and the local routing map; writes every
// gathered row (the sum of its local experts' copies, zero where none).
Operator allgather_unpermute(const Dims& x, const AllGatherShape& g, std::vector<TensorUse> uses) {
    const double sel = static_cast<double>(g.selected), h = static_cast<double>(x.h);
    const double rows = static_cast<double>(g.rows);
    const double map = rows * static_cast<double>(g.local_experts) * kMapBytes;
    return elementwise(x, "moe_ag_unpermute", sel * h, sel * h * x.ab + map, rows * h * x.ab, std::move(uses));
}

// The unpermutation's backward: the gradient of each selected row read out
// of the gathered output gradient.
Operator allgather_unpermute_bwd(const Dims& x, const AllGatherShape& g, std::vector<TensorUse> uses) {
    const double sel = static_cast<double>(g.selected), h = static_cast<double>(x.h);
    const double map = static_cast<double>(g.rows) * static_cast<double>(g.local_experts) * kMapBytes;
    return elementwise(x, "moe_ag_unpermute_bwd", 0, sel * h * x.ab + map, sel * h * x.ab, std::move(uses));
}

// The permutation's backward: the selected rows' gradients (and their gate
// weights') scattered into zero-filled gradients of every gathered row (and
// of the gathered gate weights of every expert).
Operator allgather_permute_bwd(const Dims& x, const AllGatherShape& g, std::vector<TensorUse> uses) {
    const double sel = static_cast<double>(g.selected), h = static_cast<double>(x.h);
    const double rows = static_cast<double>(g.rows), E = static_cast<double>(x.m->experts);
    return elementwise(x, "moe_ag_permute_bwd", 0, sel * h * x.ab + sel * x.ab, rows * (h + E) * x.ab, std::move(uses));
}

Operator allgather_add_shared(const Dims& x, const char* name) {
    const double n = static_cast<double>(x.T) * static_cast<double>(x.h);
    return elementwise(x, name, n, 2 * n * x.ab, n * x.ab, {});
}

}  // namespace sim::workload::ops
