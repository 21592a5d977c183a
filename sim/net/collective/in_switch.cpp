// In-switch all-reduce (NVLink SHARP, NCCL's NVLS) on one NVSwitch node:
// multimem reduce of each rank's shard plus multicast store, so each rank
// sends (n+1)/n x size up to the switch and receives as much, concurrently,
// in one step costing in_switch_latency at protocol_efficiency x
// in_switch_efficiency. NCCL runs it with the Simple protocol only and no
// protocol base latency; auto prefers it over > 4 GPUs.
#include "sim/net/collective/i_collective.h"

namespace sim::net::collectives {

namespace {

class InSwitch final : public ICollectiveAlgorithm {
public:
    std::string_view name() const override { return "in-switch"; }
    std::string_view description() const override { return "NVLink SHARP all-reduce on one NVSwitch node"; }
    std::string_view nccl_name() const override { return "nvls"; }
    bool implements(CollectiveOp op) const override { return op == CollectiveOp::all_reduce; }
    std::string infeasible(const Topology& topo, const std::vector<int>& gpus) const override {
        const std::string why = [&]() -> std::string {
            if (topo.spec().intra_node != IntraNode::nvswitch) return "the cluster has no NVSwitch";
            if (!topo.spec().in_switch_reduction) return "the cluster's NVSwitch has no in-switch reduction";
            for (int g : gpus)
                if (topo.node_of(g) != topo.node_of(gpus.front())) return "the group spans several nodes";
            return {};
        }();
        return why.empty() ? why : "in-switch all-reduce is not possible here: " + why;
    }
    std::optional<int> auto_rank(const Topology& topo, CollectiveOp, const std::vector<int>& gpus) const override {
        if (gpus.size() > 4 && infeasible(topo, gpus).empty()) return 0;
        return std::nullopt;
    }
    bool runs_protocol(const Protocol& p) const override { return p.name == "Simple"; }
    bool pays_base_latency() const override { return false; }
    void plan(PlanBuilder& b) const override {
        const auto& req = b.request();
        const auto n = static_cast<std::uint32_t>(req.gpus.size());
        const Bytes per_rank = ceil_div(Bytes{req.size.value * (n + 1)}, n);
        const double e = req.protocol_efficiency * req.in_switch_efficiency;
        b.open_phase(1, req.in_switch_latency);
        for (int gpu : req.gpus) {
            b.add_switch(gpu, FlowPath::gpu_to_switch, per_rank, e);
            b.add_switch(gpu, FlowPath::switch_to_gpu, per_rank, e);
        }
        b.close_phase();
    }
};

}  // namespace

const ICollectiveAlgorithm& in_switch() {
    static const InSwitch instance;
    return instance;
}

}  // namespace sim::net::collectives
