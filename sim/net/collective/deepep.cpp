// DeepEP-style token exchange (docs/moe.md section 3a): the all-to-all of an
// MoE layer's dispatch or combine, with each token sent once per destination
// node over the network, to the GPU on the same rail there, and forwarded over
// NVLink to the GPUs holding its experts; tokens for the sender's own node go
// over NVLink directly. The request's TokenRouting says how many copies a
// token carries (top_k) and how many nodes it reaches (nodes_per_token).
// Combine is the mirror image and moves the same bytes over the same links,
// so one plan serves both. Needs the same number of ranks on every node.
#include "sim/net/collective/i_collective.h"

#include <algorithm>
#include <cmath>

namespace sim::net {

double nodes_per_token(const TokenRouting& r, int nodes) {
    if (nodes <= 1 || r.top_k <= 0 || r.experts <= 0) return 1.0;
    const double n = nodes, e = static_cast<double>(r.experts), per_node = e / n;
    if (r.groups > 0 && r.group_limit > 0 && r.group_limit < r.groups) {
        // A group of E / groups consecutive experts spans ceil(size / per node)
        // nodes (at least 1); a token's group_limit groups span at most M nodes.
        const double group_size = e / r.groups;
        const double limit = r.group_limit * std::max(1.0, std::ceil(group_size / per_node));
        if (limit < n) return std::min(static_cast<double>(r.top_k), limit);
    }
    // Uniform choice of top_k distinct experts: a node is missed with
    // probability C(E - E/N, k) / C(E, k) = prod_i (E - E/N - i) / (E - i).
    double miss = 1.0;
    for (int i = 0; i < r.top_k; ++i) miss *= std::max(0.0, (e - per_node - i) / (e - i));
    return n * (1.0 - miss);
}

namespace collectives {

namespace {

class DeepEp final : public ICollectiveAlgorithm {
public:
    std::string_view name() const override { return "deepep"; }
    std::string_view description() const override {
        return "MoE dispatch/combine: each token once per destination node over its rail, then NVLink (DeepEP)";
    }
    bool implements(CollectiveOp op) const override { return op == CollectiveOp::all_to_all; }
    bool needs_token_routing() const override { return true; }
    // Every MoE layer issues the same dispatch and combine per micro-batch:
    // thousands of identical steps an iteration (docs/moe.md section 3d).
    bool reuses_steps(CollectiveOp) const override { return true; }
    std::string infeasible(const Topology& topo, const std::vector<int>& gpus) const override {
        if (!ranks_by_node(topo, gpus).empty()) return {};
        return "deepep all-to-all needs the same number of ranks on every node of the group";
    }
    std::optional<int> auto_rank(const Topology& topo, CollectiveOp, const std::vector<int>& gpus) const override {
        if (ranks_by_node(topo, gpus).size() > 1) return 1;
        return std::nullopt;
    }
    void plan(PlanBuilder& b) const override {
        const auto& req = b.request();
        auto nodes = ranks_by_node(b.topo(), req.gpus);
        // Local index j of every node is the same rail when nodes hold the
        // same local GPUs (GPU ids in order within a node).
        for (auto& ranks : nodes) std::sort(ranks.begin(), ranks.end());
        const auto big_n = static_cast<std::uint32_t>(nodes.size());
        const auto g = static_cast<std::uint32_t>(nodes.front().size());
        const double s = req.size.as_double();
        // Inside a node, every ordered pair carries S / g: the S / n of the
        // sender's own tokens for the peer's experts plus the (N - 1) S / n
        // it forwards from the other nodes' senders on its rail.
        const Bytes nvlink = ceil_div(req.size, g);
        // Across nodes, to the same rail of each other node: one copy of each
        // token that reaches it, T x m / N tokens of S / (T k) bytes.
        const double m = nodes_per_token(req.tokens, static_cast<int>(big_n));
        const Bytes rdma = Bytes::ceil(s * m / (static_cast<double>(req.tokens.top_k) * big_n));
        b.open_phase(1, b.group_step(), b.network_step_covers_wire());
        for (std::uint32_t a = 0; a < big_n; ++a)
            for (std::uint32_t j = 0; j < g; ++j) {
                const int src = nodes[a][j];
                for (std::uint32_t q = 0; q < g; ++q)
                    if (q != j) b.add(src, nodes[a][q], nvlink);
                if (rdma.value > 0)
                    for (std::uint32_t c = 0; c < big_n; ++c)
                        if (c != a) b.add(src, nodes[c][j], rdma);
            }
        b.close_phase();
    }
};

}  // namespace

const ICollectiveAlgorithm& deepep() {
    static const DeepEp instance;
    return instance;
}

}  // namespace collectives
}  // namespace sim::net
