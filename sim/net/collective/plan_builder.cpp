// The planning primitives algorithms share (see i_collective.h): flows with
// the right efficiency, phases, channel rings and binary trees.
#include "sim/net/collective/i_collective.h"

#include <map>

namespace sim::net {

PlanBuilder::PlanBuilder(const Topology& topo, const CollectiveRequest& req, CollectivePlan& plan)
    : topo_(topo), req_(req), plan_(plan) {
    plan_.flows.clear();
    plan_.phases.clear();
    plan_.initial = Time{};
    for (int gpu : req_.gpus)
        if (topo_.node_of(gpu) != topo_.node_of(req_.gpus.front())) spans_nodes_ = true;
}

Time PlanBuilder::network_step() const {
    return req_.network_step_latency > Time{} ? req_.network_step_latency : req_.step_latency;
}

void PlanBuilder::add(int src, int dst, Bytes size) {
    const double net_eff = req_.network_efficiency > 0.0 ? req_.network_efficiency : req_.protocol_efficiency;
    const double e = topo_.node_of(src) == topo_.node_of(dst) ? req_.protocol_efficiency : net_eff;
    plan_.flows.push_back(PlannedFlow{src, dst, size, e, FlowPath::gpu_to_gpu});
}

void PlanBuilder::add_switch(int gpu, FlowPath path, Bytes size, double efficiency) {
    plan_.flows.push_back(PlannedFlow{gpu, gpu, size, efficiency, path});
}

void PlanBuilder::open_phase(std::uint32_t repeat, Time latency) {
    const auto at = static_cast<std::uint32_t>(plan_.flows.size());
    plan_.phases.push_back(PlanPhase{at, at, repeat, latency});
}

void PlanBuilder::close_phase() {
    plan_.phases.back().end = static_cast<std::uint32_t>(plan_.flows.size());
    if (plan_.phases.back().end == plan_.phases.back().begin) plan_.phases.pop_back();
}

void PlanBuilder::channel_rings(Bytes size, std::uint32_t repeat) {
    const auto rs = rings_of(topo_, req_.gpus);
    const auto n = static_cast<std::uint64_t>(req_.gpus.size());
    if (n < 2 || repeat == 0) return;
    const Bytes chunk = ceil_div(size, n * rs.size());
    open_phase(repeat, group_step());
    for (const auto& r : rs)
        for (std::size_t i = 0; i < r.size(); ++i) add(r[i], r[(i + 1) % r.size()], chunk);
    close_phase();
}

void PlanBuilder::tree_edges(const std::vector<int>& ranks, bool reduce, Bytes size) {
    for (std::size_t p = 1; p < ranks.size(); ++p) {
        const int child = ranks[p], parent = ranks[(p - 1) / 2];
        if (reduce) add(child, parent, size);
        add(parent, child, size);
    }
}

Bytes ceil_div(Bytes size, std::uint64_t parts) { return Bytes{(size.value + parts - 1) / parts}; }

int tree_depth(int n) {
    int depth = 0;
    while ((2 << depth) <= n) ++depth;
    return depth;
}

std::vector<std::vector<int>> ranks_by_node(const Topology& topo, const std::vector<int>& gpus) {
    std::map<int, std::vector<int>> groups;
    for (int g : gpus) groups[topo.node_of(g)].push_back(g);
    std::vector<std::vector<int>> out;
    for (auto& [node, ranks] : groups) out.push_back(std::move(ranks));
    for (const auto& r : out)
        if (r.size() != out.front().size()) return {};
    return out;
}

std::vector<std::vector<int>> rings_of(const Topology& topo, const std::vector<int>& g) {
    const auto nodes = ranks_by_node(topo, g);
    if (nodes.size() < 2 || nodes.front().size() < 2) return {g};
    const std::size_t k = nodes.front().size();
    std::vector<std::vector<int>> out(k);
    for (std::size_t j = 0; j < k; ++j)
        for (const auto& ranks : nodes)
            for (std::size_t t = 0; t < k; ++t) out[j].push_back(ranks[(j + t) % k]);
    return out;
}

}  // namespace sim::net
