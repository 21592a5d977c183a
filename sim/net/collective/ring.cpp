// Ring: all-reduce in 2(n-1) steps, reduce-scatter / all-gather in n-1, each
// rank sending ceil(size/n) to the next; across nodes with k ranks on each,
// k rings (NCCL's channels), one per rail, each carrying size/k. Broadcast is
// a pipelined chain: every hop carries the whole buffer at once and the fill
// costs one step latency per hop. auto's fallback for every op it implements.
#include "sim/net/collective/i_collective.h"

namespace sim::net::collectives {

namespace {

class Ring final : public ICollectiveAlgorithm {
public:
    std::string_view name() const override { return "ring"; }
    std::string_view description() const override {
        return "ring reduce-scatter / all-gather / all-reduce, chained broadcast";
    }
    std::string_view nccl_name() const override { return "ring"; }
    bool implements(CollectiveOp op) const override {
        return op == CollectiveOp::all_reduce || op == CollectiveOp::reduce_scatter || op == CollectiveOp::all_gather ||
               op == CollectiveOp::broadcast;
    }
    std::optional<int> auto_rank(const Topology&, CollectiveOp, const std::vector<int>&) const override { return 2; }
    void plan(PlanBuilder& b) const override {
        const auto& req = b.request();
        const auto n = static_cast<std::uint32_t>(req.gpus.size());
        switch (req.op) {
            case CollectiveOp::all_reduce: b.channel_rings(req.size, 2 * (n - 1)); break;
            case CollectiveOp::reduce_scatter:
            case CollectiveOp::all_gather: b.channel_rings(req.size, n - 1); break;
            case CollectiveOp::broadcast: {
                Time fill;
                for (std::uint32_t i = 0; i + 1 < n; ++i) fill += req.step_latency;
                b.open_phase(1, fill);
                for (std::uint32_t i = 0; i + 1 < n; ++i) b.add(req.gpus[i], req.gpus[i + 1], req.size);
                b.close_phase();
                break;
            }
            default: break;
        }
    }
};

}  // namespace

const ICollectiveAlgorithm& ring() {
    static const Ring instance;
    return instance;
}

}  // namespace sim::net::collectives
