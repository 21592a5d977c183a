// Hierarchical all-reduce: ring reduce-scatter inside each node, ring
// all-reduce of the node's shard across nodes (one ring per local rank, i.e.
// per rail), ring all-gather inside each node. Needs the same number of
// ranks on every node; auto's choice for all-reduce across nodes.
#include "sim/net/collective/i_collective.h"

namespace sim::net::collectives {

namespace {

class Hierarchical final : public ICollectiveAlgorithm {
public:
    std::string_view name() const override { return "hierarchical"; }
    std::string_view description() const override {
        return "intra-node reduce-scatter, inter-node all-reduce per rail, intra-node all-gather";
    }
    bool implements(CollectiveOp op) const override { return op == CollectiveOp::all_reduce; }
    std::string infeasible(const Topology& topo, const std::vector<int>& gpus) const override {
        if (!ranks_by_node(topo, gpus).empty()) return {};
        return "hierarchical all-reduce needs the same number of ranks on every node of the group";
    }
    std::optional<int> auto_rank(const Topology& topo, CollectiveOp, const std::vector<int>& gpus) const override {
        if (ranks_by_node(topo, gpus).size() > 1) return 1;
        return std::nullopt;
    }
    void plan(PlanBuilder& b) const override {
        const auto& req = b.request();
        const Bytes s = req.size;
        const auto nodes = ranks_by_node(b.topo(), req.gpus);
        const auto k = static_cast<std::uint32_t>(nodes.front().size());
        const auto m = static_cast<std::uint32_t>(nodes.size());
        const auto intra_ring = [&] {
            if (k < 2) return;
            b.open_phase(k - 1, req.step_latency);
            for (const auto& ranks : nodes)
                for (std::size_t i = 0; i < k; ++i) b.add(ranks[i], ranks[(i + 1) % k], ceil_div(s, k));
            b.close_phase();
        };
        intra_ring();  // reduce-scatter, all nodes in the same steps
        if (m > 1) {
            b.open_phase(2 * (m - 1), b.network_step(), b.network_step_covers_wire());
            for (std::uint32_t j = 0; j < k; ++j)
                for (std::uint32_t i = 0; i < m; ++i) b.add(nodes[i][j], nodes[(i + 1) % m][j], ceil_div(s, k * m));
            b.close_phase();
        }
        intra_ring();  // all-gather
    }
};

}  // namespace

const ICollectiveAlgorithm& hierarchical() {
    static const Hierarchical instance;
    return instance;
}

}  // namespace sim::net::collectives
