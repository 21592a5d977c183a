// In-switch all-reduce (NVLink SHARP, NCCL's NVLS) on one NVSwitch node:
// multimem reduce of each rank's shard plus multicast store, so each rank
// sends (n+1)/n x size up to the switch and receives as much, concurrently,
// in one step costing in_switch_latency plus the fill of NVLS's chunk
// pipeline, at protocol_efficiency x in_switch_efficiency. NCCL runs it with
// the Simple protocol only and no protocol base latency; auto prefers it
// over > 4 GPUs.
#include "sim/core/checked.h"
#include "sim/net/collective/i_collective.h"

#include <algorithm>
#include <limits>

namespace sim::net {

Bytes nvls_chunk(Bytes size, std::uint64_t concurrent_ops, Bytes max_chunk) {
    // NCCL's rule (NVIDIA/nccl@5067397c src/enqueue.cc, calcCollChunking,
    // the NVLS branch): each test uses the chunk the previous one left.
    std::uint64_t chunk = max_chunk.value;
    const auto below = [&](std::uint64_t rounds) {
        const auto span = checked_mul(rounds, concurrent_ops, chunk);
        return !span || size.value < *span;  // an overflowing span exceeds any size
    };
    if (below(64) && chunk > 65536) chunk = 65536;
    if (below(8) && chunk > 32768) chunk = 32768;
    if (below(2) && chunk > 16384) chunk = 16384;
    return Bytes{chunk};
}

}  // namespace sim::net

namespace sim::net::collectives {

namespace {

// The fill of NVLS's pipeline: `fill` rounds in which each of the
// channels x n (channel, rank) pairs moves one chunk, at the step's rate
// (each chunk carrying (n+1)/n of its size over the GPU's switch link, as
// the step's flows do). Zero without a pipeline (in_switch_channels 0).
Time pipeline_fill(const PlanBuilder& b, std::uint32_t n, double efficiency) {
    const auto& req = b.request();
    if (req.in_switch_channels <= 0 || !(req.in_switch_fill > 0)) return Time{};
    const auto ops = static_cast<std::uint64_t>(req.in_switch_channels) * n;
    const Bytes chunk = nvls_chunk(req.size, ops, req.in_switch_chunk);
    double bandwidth = std::numeric_limits<double>::infinity();
    for (LinkId l : b.topo().to_switch(req.gpus.front()))
        bandwidth = std::min(bandwidth, b.topo().link(l).bandwidth.bytes_per_s);
    const double round_bytes = static_cast<double>(ops) * chunk.as_double() * (n + 1) / n;
    return Time::from_seconds_ceil(req.in_switch_fill * round_bytes / (efficiency * bandwidth));
}

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
        b.open_phase(1, req.in_switch_latency + pipeline_fill(b, n, e));
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
