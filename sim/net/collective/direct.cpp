// Direct transfers: all-to-all as one step of n(n-1) flows of ceil(size/n);
// send-recv as one flow of size from gpus[0] to gpus[1]. The only algorithm
// for those ops, so auto's choice for them. Its all-to-alls are MoE token
// exchanges (Megatron-Core's alltoall dispatcher, and every exchange inside
// one node), issued identically for every layer and micro-batch, so they
// reuse steps as deepep's do (docs/moe.md section 3d).
#include "sim/net/collective/i_collective.h"

namespace sim::net::collectives {

namespace {

class Direct final : public ICollectiveAlgorithm {
public:
    std::string_view name() const override { return "direct"; }
    std::string_view description() const override {
        return "all-to-all as one step of point-to-point flows; send-recv as one flow";
    }
    bool implements(CollectiveOp op) const override {
        return op == CollectiveOp::all_to_all || op == CollectiveOp::send_recv;
    }
    bool reuses_steps(CollectiveOp op) const override { return op == CollectiveOp::all_to_all; }
    std::optional<int> auto_rank(const Topology&, CollectiveOp, const std::vector<int>&) const override { return 2; }
    void plan(PlanBuilder& b) const override {
        const auto& req = b.request();
        const std::vector<int>& g = req.gpus;
        b.open_phase(1, b.group_step(), b.network_step_covers_wire());
        if (req.op == CollectiveOp::send_recv) {
            b.add(g[0], g[1], req.size);
        } else {
            const auto n = static_cast<std::uint32_t>(g.size());
            for (std::uint32_t i = 0; i < n; ++i)
                for (std::uint32_t j = 0; j < n; ++j)
                    if (i != j) b.add(g[i], g[j], ceil_div(req.size, n));
        }
        b.close_phase();
    }
};

}  // namespace

const ICollectiveAlgorithm& direct() {
    static const Direct instance;
    return instance;
}

}  // namespace sim::net::collectives
