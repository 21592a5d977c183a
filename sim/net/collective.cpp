// Collective algorithms lowered to flows (see collective.h for the list).
//
// start() turns a request into a plan: phases, each a set of flows repeated
// `repeat` times as barrier-separated steps (a ring's steps all move the same
// flows, so a ring of n ranks stores n flows, not 2n(n-1)). Running a plan
// is a small state machine per collective: wait the phase's step latency,
// start the step's flows, count completions, move on. Instances and their
// vectors are reused.
#include "sim/net/collective.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

namespace sim::net {

namespace {

enum class Path : std::uint8_t { gpu_to_gpu, gpu_to_switch, switch_to_gpu };

struct PlannedFlow {
    int src = 0, dst = 0;
    Bytes size;
    double efficiency = 1.0;
    Path path = Path::gpu_to_gpu;
};

struct Phase {
    std::uint32_t begin = 0, end = 0;  // into Instance::flows
    std::uint32_t repeat = 1;
    Time latency;                      // paid before each step
};

struct Instance {
    std::vector<PlannedFlow> flows;
    std::vector<Phase> phases;
    Time initial;                      // paid once before the first step (a protocol's base latency)
    std::size_t phase = 0;
    std::uint32_t step = 0;
    std::uint32_t outstanding = 0;
    Callback on_done;
    bool busy = false;
};

const char* const kAlgorithms[] = {"auto", "ring", "tree", "hierarchical", "in-switch", "direct"};

bool implements(const std::string& algo, CollectiveOp op) {
    if (algo == "auto") return true;
    if (algo == "ring") return op == CollectiveOp::all_reduce || op == CollectiveOp::reduce_scatter ||
                               op == CollectiveOp::all_gather || op == CollectiveOp::broadcast;
    if (algo == "tree") return op == CollectiveOp::all_reduce || op == CollectiveOp::broadcast;
    if (algo == "hierarchical" || algo == "in-switch") return op == CollectiveOp::all_reduce;
    if (algo == "direct") return op == CollectiveOp::all_to_all || op == CollectiveOp::send_recv;
    return false;
}

Bytes ceil_div(Bytes size, std::uint64_t parts) { return Bytes{(size.value + parts - 1) / parts}; }

int tree_depth(int n) {
    int depth = 0;
    while ((2 << depth) <= n) ++depth;  // floor(log2(n))
    return depth;
}

}  // namespace

struct CollectiveEngine::Impl {
    Simulation& sim;
    FlowNetwork& flows;
    const Topology& topo;
    std::vector<Instance> instances;
    std::vector<std::uint32_t> free_instances;
    std::size_t live = 0;

    Impl(Simulation& s, FlowNetwork& f, const Topology& t) : sim(s), flows(f), topo(t) {}

    // Ranks grouped by node in rank order; empty when nodes hold different counts.
    std::vector<std::vector<int>> by_node(const std::vector<int>& gpus) const {
        std::map<int, std::vector<int>> groups;
        for (int g : gpus) groups[topo.node_of(g)].push_back(g);
        std::vector<std::vector<int>> out;
        for (auto& [node, ranks] : groups) out.push_back(std::move(ranks));
        for (const auto& r : out)
            if (r.size() != out.front().size()) return {};
        return out;
    }

    bool in_switch_possible(const std::vector<int>& gpus, std::string* why) const {
        const auto say = [&](std::string s) {
            if (why) *why = std::move(s);
            return false;
        };
        if (topo.spec().intra_node != IntraNode::nvswitch) return say("the cluster has no NVSwitch");
        if (!topo.spec().in_switch_reduction) return say("the cluster's NVSwitch has no in-switch reduction");
        const int node = topo.node_of(gpus.front());
        for (int g : gpus)
            if (topo.node_of(g) != node) return say("the group spans several nodes");
        return true;
    }

    std::string resolve(const CollectiveRequest& req) const;
    CollectiveChoice choose(const CollectiveRequest& req) const;
    void validate(const CollectiveRequest& req) const;
    void plan(Instance& inst, const CollectiveRequest& req, const std::string& algo) const;
    // The request as it runs with `protocol` (its share, latencies).
    static CollectiveRequest with_protocol(const CollectiveRequest& req, const Protocol& protocol);
    // Contention-free time of a planned instance: per step, the phase's
    // latency + the longest route latency + the most loaded link's bytes /
    // (efficiency x bandwidth).
    Time estimate(const Instance& inst) const;
    // The rings a ring collective over `g` runs: one, or one per local rank
    // when the group spans nodes with the same number of ranks on each.
    std::vector<std::vector<int>> rings(const std::vector<int>& g) const;

    using ChoiceKey = std::tuple<int, std::uint64_t, std::string, std::vector<int>>;
    mutable std::map<ChoiceKey, CollectiveChoice> choices;
    void launch(std::uint32_t slot);
    void flow_done(std::uint32_t slot);
    void finish_step(std::uint32_t slot);
};

void CollectiveEngine::Impl::validate(const CollectiveRequest& req) const {
    if (req.gpus.empty()) throw ModelError(fmt::format("{}: the group has no GPUs", to_string(req.op)));
    std::vector<int> sorted = req.gpus;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 0; i < sorted.size(); ++i) {
        if (sorted[i] < 0 || sorted[i] >= topo.gpu_count())
            throw ModelError(fmt::format("{}: GPU {} is not in the cluster of {} GPUs", to_string(req.op), sorted[i],
                                         topo.gpu_count()));
        if (i > 0 && sorted[i] == sorted[i - 1])
            throw ModelError(fmt::format("{}: GPU {} appears twice in the group", to_string(req.op), sorted[i]));
    }
    if (req.op == CollectiveOp::send_recv && req.gpus.size() != 2)
        throw ModelError(fmt::format("send-recv needs exactly 2 GPUs (sender, receiver), got {}", req.gpus.size()));
    const auto bad_eff = [](double e) { return !(e > 0.0 && e <= 1.0); };
    if (bad_eff(req.protocol_efficiency) || bad_eff(req.in_switch_efficiency) ||
        (req.network_efficiency != 0.0 && bad_eff(req.network_efficiency)))
        throw ModelError(fmt::format("{}: efficiencies must be in (0, 1]", to_string(req.op)));
}

std::string CollectiveEngine::Impl::resolve(const CollectiveRequest& req) const {
    validate(req);
    const std::string& algo = req.algorithm;
    if (std::find(std::begin(kAlgorithms), std::end(kAlgorithms), algo) == std::end(kAlgorithms)) {
        std::string list;
        for (const char* a : kAlgorithms) list += (list.empty() ? "" : ", ") + std::string(a);
        throw ModelError(fmt::format("unknown collective algorithm '{}' (known: {})", algo, list));
    }
    if (!implements(algo, req.op))
        throw ModelError(fmt::format("algorithm '{}' does not implement {}", algo, to_string(req.op)));
    const int n = static_cast<int>(req.gpus.size());
    if (algo == "in-switch") {
        std::string why;
        if (!in_switch_possible(req.gpus, &why)) throw ModelError("in-switch all-reduce is not possible here: " + why);
    }
    if (algo == "hierarchical" && by_node(req.gpus).empty())
        throw ModelError("hierarchical all-reduce needs the same number of ranks on every node of the group");
    if (algo != "auto") return algo;

    switch (req.op) {
        case CollectiveOp::all_reduce:
            if (n > 4 && in_switch_possible(req.gpus, nullptr)) return "in-switch";
            if (by_node(req.gpus).size() > 1) return "hierarchical";
            return "ring";
        case CollectiveOp::reduce_scatter:
        case CollectiveOp::all_gather:
        case CollectiveOp::broadcast: return "ring";
        case CollectiveOp::all_to_all:
        case CollectiveOp::send_recv: return "direct";
    }
    return "ring";
}

void CollectiveEngine::Impl::plan(Instance& inst, const CollectiveRequest& req, const std::string& algo) const {
    inst.flows.clear();
    inst.phases.clear();
    inst.initial = Time{};
    const double net_eff = req.network_efficiency > 0.0 ? req.network_efficiency : req.protocol_efficiency;
    const auto add = [&](int src, int dst, Bytes size) {
        const double e = topo.node_of(src) == topo.node_of(dst) ? req.protocol_efficiency : net_eff;
        inst.flows.push_back(PlannedFlow{src, dst, size, e, Path::gpu_to_gpu});
    };
    const bool spans_nodes = [&] {
        for (int gpu : req.gpus)
            if (topo.node_of(gpu) != topo.node_of(req.gpus.front())) return true;
        return false;
    }();
    // Per-step latency of a phase whose flows stay in a node, or cross nodes.
    const Time net_step = req.network_step_latency > Time{} ? req.network_step_latency : req.step_latency;
    const auto open_phase = [&](std::uint32_t repeat, Time latency) {
        const auto at = static_cast<std::uint32_t>(inst.flows.size());
        inst.phases.push_back(Phase{at, at, repeat, latency});
    };
    const auto close_phase = [&] {
        inst.phases.back().end = static_cast<std::uint32_t>(inst.flows.size());
        if (inst.phases.back().end == inst.phases.back().begin) inst.phases.pop_back();
    };
    // The group's rings (one per rail across nodes), each carrying its share, in one phase.
    const auto channel_rings = [&](Bytes size, std::uint32_t repeat) {
        const auto rs = rings(req.gpus);
        const auto n = static_cast<std::uint64_t>(req.gpus.size());
        if (n < 2 || repeat == 0) return;
        const Bytes chunk = ceil_div(size, n * rs.size());
        open_phase(repeat, spans_nodes ? net_step : req.step_latency);
        for (const auto& r : rs)
            for (std::size_t i = 0; i < r.size(); ++i) add(r[i], r[(i + 1) % r.size()], chunk);
        close_phase();
    };
    // Binary tree over `ranks` in heap order: parent of position p is (p-1)/2.
    const auto tree_edges = [&](const std::vector<int>& ranks, bool reduce, Bytes size) {
        for (std::size_t p = 1; p < ranks.size(); ++p) {
            const int child = ranks[p], parent = ranks[(p - 1) / 2];
            if (reduce) add(child, parent, size);
            add(parent, child, size);
        }
    };

    const std::vector<int>& g = req.gpus;
    const auto n = static_cast<std::uint32_t>(g.size());
    const Bytes s = req.size;
    switch (req.op) {
        case CollectiveOp::all_reduce:
            if (algo == "ring") {
                channel_rings(s, 2 * (n - 1));
            } else if (algo == "hierarchical") {
                const auto nodes = by_node(g);
                const auto k = static_cast<std::uint32_t>(nodes.front().size());
                const auto m = static_cast<std::uint32_t>(nodes.size());
                // reduce-scatter inside each node (all nodes in the same steps)
                if (k > 1) {
                    open_phase(k - 1, req.step_latency);
                    for (const auto& ranks : nodes)
                        for (std::size_t i = 0; i < k; ++i) add(ranks[i], ranks[(i + 1) % k], ceil_div(s, k));
                    close_phase();
                }
                // all-reduce of each shard across nodes: one ring per local rank (rail)
                if (m > 1) {
                    open_phase(2 * (m - 1), net_step);
                    for (std::uint32_t j = 0; j < k; ++j)
                        for (std::uint32_t i = 0; i < m; ++i) add(nodes[i][j], nodes[(i + 1) % m][j], ceil_div(s, k * m));
                    close_phase();
                }
                if (k > 1) {
                    open_phase(k - 1, req.step_latency);
                    for (const auto& ranks : nodes)
                        for (std::size_t i = 0; i < k; ++i) add(ranks[i], ranks[(i + 1) % k], ceil_div(s, k));
                    close_phase();
                }
            } else if (algo == "tree") {
                // Double binary tree: the second tree is the first over the
                // ranks in reverse, so leaves of one are inner nodes of the other.
                const int depth = tree_depth(static_cast<int>(n));
                Time fill;
                for (int i = 0; i < 2 * depth; ++i) fill += req.step_latency;
                open_phase(1, fill);
                const Bytes half = ceil_div(s, 2);
                tree_edges(g, true, half);
                std::vector<int> mirrored(g.rbegin(), g.rend());
                tree_edges(mirrored, true, half);
                close_phase();
            } else if (algo == "in-switch") {
                // Multimem reduce of this rank's shard + multicast store: each
                // rank's link carries size + size/n in each direction.
                const Bytes per_rank = ceil_div(Bytes{s.value * (n + 1)}, n);
                const double e = req.protocol_efficiency * req.in_switch_efficiency;
                open_phase(1, req.in_switch_latency);
                for (int gpu : g) {
                    inst.flows.push_back(PlannedFlow{gpu, gpu, per_rank, e, Path::gpu_to_switch});
                    inst.flows.push_back(PlannedFlow{gpu, gpu, per_rank, e, Path::switch_to_gpu});
                }
                close_phase();
            }
            break;
        case CollectiveOp::reduce_scatter:
        case CollectiveOp::all_gather: channel_rings(s, n - 1); break;
        case CollectiveOp::all_to_all:
            open_phase(1, spans_nodes ? net_step : req.step_latency);
            for (std::uint32_t i = 0; i < n; ++i)
                for (std::uint32_t j = 0; j < n; ++j)
                    if (i != j) add(g[i], g[j], ceil_div(s, n));
            close_phase();
            break;
        case CollectiveOp::broadcast: {
            // Pipelined: every hop carries the whole buffer at once; the fill
            // costs one step latency per level (chain: n-1 levels).
            const int levels = algo == "tree" ? tree_depth(static_cast<int>(n)) : static_cast<int>(n) - 1;
            Time fill;
            for (int i = 0; i < levels; ++i) fill += req.step_latency;
            open_phase(1, fill);
            if (algo == "tree") {
                tree_edges(g, false, s);
            } else {
                for (std::uint32_t i = 0; i + 1 < n; ++i) add(g[i], g[i + 1], s);
            }
            close_phase();
            break;
        }
        case CollectiveOp::send_recv:
            open_phase(1, spans_nodes ? net_step : req.step_latency);
            add(g[0], g[1], s);
            close_phase();
            break;
    }
}

void CollectiveEngine::Impl::launch(std::uint32_t slot) {
    Instance& inst = instances[slot];
    const Phase& ph = inst.phases[inst.phase];
    inst.outstanding = ph.end - ph.begin;
    const Callback done = [this, slot] { flow_done(slot); };
    for (std::uint32_t i = ph.begin; i < ph.end; ++i) {
        // Copy: starting a flow never runs callbacks, but keep no reference across calls.
        const PlannedFlow f = instances[slot].flows[i];
        switch (f.path) {
            case Path::gpu_to_gpu: flows.start(f.src, f.dst, f.size, done, f.efficiency); break;
            case Path::gpu_to_switch: flows.start_on(topo.to_switch(f.src), f.size, done, f.efficiency); break;
            case Path::switch_to_gpu: flows.start_on(topo.from_switch(f.dst), f.size, done, f.efficiency); break;
        }
    }
}

void CollectiveEngine::Impl::flow_done(std::uint32_t slot) {
    Instance& inst = instances[slot];
    check(inst.outstanding > 0, "collective: more flow completions than flows");
    if (--inst.outstanding == 0) finish_step(slot);
}

void CollectiveEngine::Impl::finish_step(std::uint32_t slot) {
    Instance& inst = instances[slot];
    if (++inst.step >= inst.phases[inst.phase].repeat) {
        inst.step = 0;
        ++inst.phase;
    }
    if (inst.phase < inst.phases.size()) {
        sim.schedule_after(inst.phases[inst.phase].latency, [this, slot] { launch(slot); });
        return;
    }
    Callback cb = inst.on_done;
    inst.busy = false;
    inst.on_done = Callback{};
    free_instances.push_back(slot);
    --live;
    if (cb) cb();
}

CollectiveEngine::CollectiveEngine(Simulation& sim, FlowNetwork& flows, const Topology& topo)
    : impl_(std::make_unique<Impl>(sim, flows, topo)) {}
CollectiveEngine::~CollectiveEngine() = default;

void CollectiveEngine::start(const CollectiveRequest& req, Callback on_done) {
    const CollectiveChoice choice = impl_->choose(req);
    const std::string& algo = choice.algorithm;
    if (req.gpus.size() == 1) {
        impl_->sim.schedule_after(Time{}, on_done);
        return;
    }
    std::uint32_t slot;
    if (!impl_->free_instances.empty()) {
        slot = impl_->free_instances.back();
        impl_->free_instances.pop_back();
    } else {
        slot = static_cast<std::uint32_t>(impl_->instances.size());
        impl_->instances.emplace_back();
    }
    Instance& inst = impl_->instances[slot];
    if (choice.protocol.empty()) {
        impl_->plan(inst, req, algo);
    } else {
        const auto p = std::find_if(req.protocols.begin(), req.protocols.end(),
                                    [&](const Protocol& q) { return q.name == choice.protocol; });
        impl_->plan(inst, Impl::with_protocol(req, *p), algo);
        if (algo != "in-switch") inst.initial = p->base_latency;
    }
    inst.phase = 0;
    inst.step = 0;
    inst.outstanding = 0;
    inst.on_done = on_done;
    inst.busy = true;
    ++impl_->live;
    check(!inst.phases.empty(), "collective: a plan of a multi-rank collective has no flows");
    impl_->sim.schedule_after(inst.initial + inst.phases[0].latency, [impl = impl_.get(), slot] { impl->launch(slot); });
}

std::vector<std::string> CollectiveEngine::algorithms() const {
    return std::vector<std::string>(std::begin(kAlgorithms), std::end(kAlgorithms));
}

std::string CollectiveEngine::resolve(const CollectiveRequest& req) const { return impl_->resolve(req); }

CollectiveChoice CollectiveEngine::choose(const CollectiveRequest& req) const { return impl_->choose(req); }

std::vector<std::vector<int>> CollectiveEngine::Impl::rings(const std::vector<int>& g) const {
    const auto nodes = by_node(g);
    if (nodes.size() < 2 || nodes.front().size() < 2) return {g};
    const std::size_t k = nodes.front().size();
    std::vector<std::vector<int>> out(k);
    for (std::size_t j = 0; j < k; ++j)
        for (const auto& ranks : nodes)
            for (std::size_t t = 0; t < k; ++t) out[j].push_back(ranks[(j + t) % k]);
    return out;
}

CollectiveRequest CollectiveEngine::Impl::with_protocol(const CollectiveRequest& req, const Protocol& p) {
    CollectiveRequest r = req;
    r.protocol_efficiency = req.protocol_efficiency * p.bandwidth_share;
    if (req.network_efficiency > 0.0) r.network_efficiency = req.network_efficiency * p.bandwidth_share;
    r.step_latency = p.step_latency;
    r.network_step_latency = p.network_step_latency;
    r.protocols.clear();
    return r;
}

Time CollectiveEngine::Impl::estimate(const Instance& inst) const {
    double total = inst.initial.seconds();
    std::unordered_map<LinkId, double> load;  // seconds of wire time per link
    for (const Phase& ph : inst.phases) {
        load.clear();
        Time longest{};
        for (std::uint32_t i = ph.begin; i < ph.end; ++i) {
            const PlannedFlow& f = inst.flows[i];
            const std::vector<LinkId>* links = nullptr;
            switch (f.path) {
                case Path::gpu_to_gpu: links = &topo.route(f.src, f.dst); break;
                case Path::gpu_to_switch: links = &topo.to_switch(f.src); break;
                case Path::switch_to_gpu: links = &topo.from_switch(f.dst); break;
            }
            Time latency{};
            for (LinkId l : *links) {
                latency += topo.link(l).latency;
                load[l] += f.size.as_double() / (f.efficiency * topo.link(l).bandwidth.bytes_per_s);
            }
            longest = std::max(longest, latency);
        }
        double step = 0;
        for (const auto& [l, t] : load) step = std::max(step, t);
        total += static_cast<double>(ph.repeat) * (ph.latency.seconds() + longest.seconds() + step);
    }
    return Time::from_seconds_ceil(total);
}

CollectiveChoice CollectiveEngine::Impl::choose(const CollectiveRequest& req) const {
    const std::string rule = resolve(req);  // validates
    if (req.protocols.empty() || req.gpus.size() < 2) return CollectiveChoice{rule, "", Time{}};
    ChoiceKey key{static_cast<int>(req.op), req.size.value, req.algorithm, req.gpus};
    if (auto it = choices.find(key); it != choices.end()) return it->second;
    std::vector<std::string> algos;
    if (req.algorithm != "auto") {
        algos.push_back(req.algorithm);
    } else if (req.op == CollectiveOp::all_reduce) {
        if (req.gpus.size() > 4 && in_switch_possible(req.gpus, nullptr)) algos.push_back("in-switch");
        if (by_node(req.gpus).size() > 1) algos.push_back("hierarchical");
        algos.push_back("ring");
    } else {
        algos.push_back(rule);
    }
    CollectiveChoice best;
    Instance scratch;
    for (const auto& a : algos) {
        for (const Protocol& p : req.protocols) {
            // NVLS runs the Simple protocol only; direct transfers have no protocol choice in NCCL's tuner
            // either, but their cost still depends on it, so they choose like the others.
            if (a == "in-switch" && p.name != "Simple") continue;
            plan(scratch, with_protocol(req, p), a);
            if (scratch.phases.empty()) continue;
            if (a != "in-switch") scratch.initial = p.base_latency;
            const Time t = estimate(scratch);
            if (best.algorithm.empty() || t < best.predicted) best = CollectiveChoice{a, p.name, t};
        }
    }
    if (best.algorithm.empty()) best = CollectiveChoice{rule, req.protocols.back().name, Time{}};
    choices.emplace(std::move(key), best);
    return best;
}

std::size_t CollectiveEngine::active() const { return impl_->live; }

const char* to_string(CollectiveOp op) {
    switch (op) {
        case CollectiveOp::all_reduce: return "all-reduce";
        case CollectiveOp::reduce_scatter: return "reduce-scatter";
        case CollectiveOp::all_gather: return "all-gather";
        case CollectiveOp::all_to_all: return "all-to-all";
        case CollectiveOp::broadcast: return "broadcast";
        case CollectiveOp::send_recv: return "send-recv";
    }
    return "?";
}

double bus_bandwidth(CollectiveOp op, Bytes size, int n, Time t) {
    if (t.count_ps() == 0 || n < 1) return 0.0;
    const double algbw = size.as_double() / t.seconds();
    switch (op) {
        case CollectiveOp::all_reduce: return algbw * 2.0 * (n - 1) / n;
        case CollectiveOp::reduce_scatter:
        case CollectiveOp::all_gather:
        case CollectiveOp::all_to_all: return algbw * (n - 1) / n;
        case CollectiveOp::broadcast:
        case CollectiveOp::send_recv: return algbw;
    }
    return algbw;
}

Time simulate_collective(const Topology& topo, const CollectiveRequest& req) {
    Simulation sim;
    FlowNetwork net(sim, topo);
    CollectiveEngine engine(sim, net, topo);
    Time end;
    bool done = false;
    engine.start(req, [t = &end, d = &done, s = &sim] {
        *t = s->now();
        *d = true;
    });
    sim.run();
    check(done, "simulate_collective: the collective never completed");
    return end;
}

}  // namespace sim::net
