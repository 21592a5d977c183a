// Tree: all-reduce over NCCL's double binary tree, pipelined: every tree edge
// carries size/2 up and size/2 down at once, and the single step pays
// 2 x depth step latencies (the pipeline fill). Broadcast: one binary tree,
// every edge carrying size, depth step latencies. auto never picks it
// (NCCL's tuner would only for small messages at scale).
#include "sim/net/collective/i_collective.h"

namespace sim::net::collectives {

namespace {

class Tree final : public ICollectiveAlgorithm {
public:
    std::string_view name() const override { return "tree"; }
    std::string_view description() const override { return "double binary tree all-reduce, binary tree broadcast"; }
    std::string_view nccl_name() const override { return "tree"; }
    bool implements(CollectiveOp op) const override {
        return op == CollectiveOp::all_reduce || op == CollectiveOp::broadcast;
    }
    void plan(PlanBuilder& b) const override {
        const auto& req = b.request();
        const std::vector<int>& g = req.gpus;
        const int depth = tree_depth(static_cast<int>(g.size()));
        const bool reduce = req.op == CollectiveOp::all_reduce;
        Time fill;
        for (int i = 0; i < (reduce ? 2 * depth : depth); ++i) fill += req.step_latency;
        b.open_phase(1, fill);
        if (reduce) {
            // The second tree is the first over the ranks in reverse, so
            // leaves of one are inner nodes of the other.
            const Bytes half = ceil_div(req.size, 2);
            b.tree_edges(g, true, half);
            b.tree_edges(std::vector<int>(g.rbegin(), g.rend()), true, half);
        } else {
            b.tree_edges(g, false, req.size);
        }
        b.close_phase();
    }
};

}  // namespace

const ICollectiveAlgorithm& tree() {
    static const Tree instance;
    return instance;
}

}  // namespace sim::net::collectives
