// Running collectives: CollectiveEngine resolves a request to a registered
// algorithm (sim/net/collective/, one file each), has it plan the request as
// phases of flows, and runs the plan. Running a plan is a small state
// machine per collective: wait the phase's step latency, hand the phase's
// steps to the flow network (FlowNetwork::run_steps, which may skip repeated
// steps that run alone), move on. Instances and their vectors are reused.
#include "sim/net/collective.h"

#include "sim/net/collective/i_collective.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <map>
#include <memory>
#include <string_view>
#include <tuple>
#include <unordered_map>

namespace sim::net {

namespace {

// A plan with each phase's flows as the network runs them (routes resolved).
struct ResolvedPlan {
    CollectivePlan plan;
    std::vector<std::vector<FlowNetwork::StepFlow>> steps;  // per phase
    // Per phase, the network's kept-step lookup of `steps` (kept plans only:
    // their steps never change, and each is replayed thousands of times);
    // a cache, so filled through a const plan.
    mutable std::vector<FlowNetwork::StepMemo> memos;
};

struct Instance {
    CollectivePlan plan;
    std::size_t phase = 0;
    std::vector<FlowNetwork::StepFlow> step;  // the phase's flows, as the network runs them
    const ResolvedPlan* kept = nullptr;       // a kept plan (reuses_steps(op)), used instead of plan and step
    const ResolvedPlan* shared = nullptr;     // a shared plan (not reuses_steps(op)), likewise
    Callback on_done;
    bool busy = false;
    const CollectivePlan& current() const { return kept ? kept->plan : shared ? shared->plan : plan; }
};

// A flow between nodes in a phase whose step latency is the library's
// GPU-to-GPU latency between nodes: that latency already holds the wire
// (NCCL's hwLat NET), so the flow does not wait its route's link latencies
// too (docs/network-model.md §5, "Route latency").
bool wire_in_step(const Topology& topo, const PlanPhase& ph, const PlannedFlow& f) {
    return ph.wire_in_latency && (f.path == FlowPath::gpu_to_gpu || f.path == FlowPath::through_nics) &&
           topo.node_of(f.src) != topo.node_of(f.dst);
}

// What a plan depends on, for algorithms whose plans are kept
// (reuses_steps(op)): the request as planned (protocol applied) and the
// algorithm. Every field of CollectiveRequest that plan() may read is here
// except the protocol table, which with_protocol has already applied.
using PlanKey = std::tuple<std::string, int, std::vector<int>, std::uint64_t, std::array<int, 4>, std::array<double, 4>,
                           std::array<std::uint64_t, 6>>;

// The same fields as references, to look a request up without copying its
// group or the algorithm's name (shared plans are looked up at every start).
using PlanRef = std::tuple<std::string_view, int, const std::vector<int>&, std::uint64_t, std::array<int, 4>,
                           std::array<double, 4>, std::array<std::uint64_t, 6>>;

// PlanKey's efficiencies and latencies, the planned request's fields that
// a protocol sets (with_protocol) or that the protocol table leaves as given.
struct PlanTuning {
    std::array<double, 4> efficiencies{};
    std::array<std::uint64_t, 6> latencies{};
    bool operator==(const PlanTuning&) const = default;
};

PlanTuning plan_tuning(const CollectiveRequest& r, Time initial) {
    return {{r.protocol_efficiency, r.network_efficiency, r.in_switch_efficiency, r.in_switch_fill},
            {r.step_latency.count_ps(), r.network_step_latency.count_ps(), r.in_switch_latency.count_ps(),
             initial.count_ps(), r.in_switch_chunk.value, static_cast<std::uint64_t>(r.in_switch_channels)}};
}

// What running `req` with protocol `p` sets: the protocol's share of the
// efficiencies (a network efficiency of 0, "not given", stays as given) and its
// step latencies. with_protocol applies it; start() compares its tuning
// with a shared plan's without building the planned request.
void apply_protocol(CollectiveRequest& r, const CollectiveRequest& req, const Protocol& p) {
    r.protocol_efficiency = req.protocol_efficiency * p.bandwidth_share;
    r.network_efficiency =
        req.network_efficiency > 0.0 ? req.network_efficiency * p.bandwidth_share : req.network_efficiency;
    r.step_latency = p.step_latency;
    r.network_step_latency = p.network_step_latency;
}

PlanRef plan_ref(std::string_view algorithm, const CollectiveRequest& r, Time initial) {
    const TokenRouting& t = r.tokens;
    const PlanTuning tuning = plan_tuning(r, initial);
    return {algorithm,
            static_cast<int>(r.op),
            r.gpus,
            r.size.value,
            {t.top_k, t.experts, t.groups, t.group_limit},
            tuning.efficiencies,
            tuning.latencies};
}

// Transparent hashing and equality for a key tuple K, looked up by R, the
// same fields as views and references (no copy of a group or a name per
// lookup). Hashed: a tree of keys compared group by group missed the cache
// at every level of every start's lookup.
void mix_field(std::uint64_t& h, std::uint64_t v) { h = (h ^ v) * 0x100000001B3ULL; }
void mix_field(std::uint64_t& h, int v) { mix_field(h, static_cast<std::uint64_t>(static_cast<std::uint32_t>(v))); }
void mix_field(std::uint64_t& h, double v) { mix_field(h, std::bit_cast<std::uint64_t>(v)); }
void mix_field(std::uint64_t& h, std::string_view v) { mix_field(h, std::hash<std::string_view>{}(v)); }
template <class Range>
void mix_field(std::uint64_t& h, const Range& r) {
    for (const auto& v : r) mix_field(h, v);
}

template <class R, class K>
R ref_of(const K& k) {
    return std::apply([](const auto&... f) { return R(f...); }, k);
}

template <class K, class R>
struct RefHash {
    using is_transparent = void;
    std::size_t operator()(const K& k) const { return (*this)(ref_of<R>(k)); }
    std::size_t operator()(const R& r) const {
        std::uint64_t h = 1469598103934665603ULL;
        std::apply([&h](const auto&... f) { (mix_field(h, f), ...); }, r);
        return static_cast<std::size_t>(h ^ (h >> 29));
    }
};

template <class K, class R>
struct RefEq {
    using is_transparent = void;
    static R ref(const K& k) { return ref_of<R>(k); }
    static const R& ref(const R& r) { return r; }
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
        return ref(a) == ref(b);
    }
};

PlanKey plan_key(std::string_view algorithm, const CollectiveRequest& r, Time initial) {
    return std::apply([](const auto&... f) { return PlanKey(f...); }, plan_ref(algorithm, r, initial));
}

// Kept plans are few (one per distinct MoE exchange of a run); past this
// many, new ones are planned per call as for other algorithms.
constexpr std::size_t kMaxKeptPlans = 1024;
// Shared plans (plans of algorithms that do not reuse steps): one per
// distinct request, a few thousand in a large training run (each TP group's
// few sizes); past either bound, new ones are planned per call as before.
constexpr std::size_t kMaxSharedPlans = 16384;
constexpr std::size_t kMaxSharedFlows = std::size_t{1} << 22;

}  // namespace

struct CollectiveEngine::Impl {
    Simulation& sim;
    FlowNetwork& flows;
    const Topology& topo;
    std::vector<Instance> instances;
    std::vector<std::uint32_t> free_instances;
    std::size_t live = 0;

    Impl(Simulation& s, FlowNetwork& f, const Topology& t) : sim(s), flows(f), topo(t) {}

    // The algorithm `req` runs with ("auto" resolved); ModelError as start() says.
    const ICollectiveAlgorithm& resolve(const CollectiveRequest& req) const;
    // auto's candidates for `req`, most preferred first (ties: registry order).
    std::vector<const ICollectiveAlgorithm*> auto_candidates(const CollectiveRequest& req) const;
    CollectiveChoice choose(const CollectiveRequest& req) const;
    void validate(const CollectiveRequest& req) const;
    static void validate_efficiencies(const CollectiveRequest& req);
    void plan(CollectivePlan& out, const CollectiveRequest& req, const ICollectiveAlgorithm& algo) const {
        PlanBuilder b(topo, req, out);
        algo.plan(b);
    }
    // The request as it runs with `protocol` (its share, latencies).
    static CollectiveRequest with_protocol(const CollectiveRequest& req, const Protocol& protocol);
    // The same into `out`, whose vectors and strings keep their storage
    // (start() runs for every collective; a copy would allocate each time).
    static void set_with_protocol(CollectiveRequest& out, const CollectiveRequest& req, const Protocol& protocol);
    CollectiveRequest protocol_request;  // start()'s, reused
    CollectiveRequest tuning_request;    // start()'s: only the fields plan_tuning reads
    // Contention-free time of a plan: per step, the phase's latency + the
    // longest route latency + the most loaded link's bytes / (efficiency x
    // bandwidth).
    Time estimate(const CollectivePlan& plan) const;

    using ChoiceKey = std::tuple<int, std::uint64_t, std::string, std::vector<int>, std::array<int, 4>>;
    // The same fields as references, to look a request up without copying
    // its group (a collective starts thousands of times per run).
    using ChoiceRef = std::tuple<int, std::uint64_t, std::string_view, const std::vector<int>&, std::array<int, 4>>;
    // A memoised choice, and what start() ran for it last: the algorithm,
    // and the shared plan with the planned request's fields that are not in
    // the key (PlanKey's efficiencies and latencies), which a later start
    // compares before running the same plan.
    struct ChoiceEntry {
        CollectiveChoice choice;
        const ICollectiveAlgorithm* algo = nullptr;
        const ResolvedPlan* shared = nullptr;
        PlanTuning tuning{};
    };
    static ChoiceRef choice_ref(const CollectiveRequest& req) {
        const TokenRouting& tr = req.tokens;
        return {static_cast<int>(req.op), req.size.value, req.algorithm, req.gpus,
                std::array<int, 4>{tr.top_k, tr.experts, tr.groups, tr.group_limit}};
    }
    mutable std::unordered_map<ChoiceKey, ChoiceEntry, RefHash<ChoiceKey, ChoiceRef>, RefEq<ChoiceKey, ChoiceRef>>
        choices;
    // choose()'s memo entry of `req` (added by choose() if new; a hit checks
    // the efficiencies as choose() does), or nullptr where choose() does not
    // memoise (no protocol table, or one GPU).
    ChoiceEntry* choose_memo(const CollectiveRequest& req) {
        if (req.protocols.empty() || req.gpus.size() < 2) return nullptr;
        if (const auto it = choices.find(choice_ref(req)); it != choices.end()) {
            validate_efficiencies(req);
            return &it->second;
        }
        choose(req);
        return &choices.find(choice_ref(req))->second;
    }
    std::map<PlanKey, std::unique_ptr<ResolvedPlan>> kept_plans;
    // Plans of algorithms that do not reuse steps, with their routes
    // resolved, shared by every start of the same request: a plan and its
    // routes are functions of the key (PlanKey says why), so a start that
    // finds one runs the same flows as one that plans anew, without planning
    // and resolving them again. Bounded like the kept plans.
    std::unordered_map<PlanKey, std::unique_ptr<ResolvedPlan>, RefHash<PlanKey, PlanRef>, RefEq<PlanKey, PlanRef>>
        shared_plans;
    std::size_t shared_flows = 0;
    const ResolvedPlan* shared_plan(const CollectiveRequest& r, const ICollectiveAlgorithm& algo, Time initial);
    // `r`'s plan by `algo`, every phase's routes resolved.
    std::unique_ptr<ResolvedPlan> resolved_plan(const CollectiveRequest& r, const ICollectiveAlgorithm& algo,
                                                Time initial, bool reuse_steps) const;
    // Resolves the routes of phase `phase` of `plan` into `out`.
    void resolve_step(const CollectivePlan& plan, std::size_t phase, std::vector<FlowNetwork::StepFlow>& out) const;
    // The kept plan of `r` run by `algo`, planning and keeping it the first
    // time; nullptr when no more plans are kept.
    const ResolvedPlan* kept_plan(const CollectiveRequest& r, const ICollectiveAlgorithm& algo, Time initial);
    void launch(std::uint32_t slot);
    void phase_done(std::uint32_t slot);
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
    validate_efficiencies(req);
}

void CollectiveEngine::Impl::validate_efficiencies(const CollectiveRequest& req) {
    const auto bad_eff = [](double e) { return !(e > 0.0 && e <= 1.0); };
    if (bad_eff(req.protocol_efficiency) || bad_eff(req.in_switch_efficiency) ||
        (req.network_efficiency != 0.0 && bad_eff(req.network_efficiency)))
        throw ModelError(fmt::format("{}: efficiencies must be in (0, 1]", to_string(req.op)));
    if (req.in_switch_channels < 0 || !(req.in_switch_fill >= 0.0 && req.in_switch_fill <= 1e3) ||
        (req.in_switch_channels > 0 && req.in_switch_chunk.value == 0))
        throw ModelError(
            fmt::format("{}: in-switch pipeline needs channels >= 0, fill rounds in [0, 1000] and a "
                        "chunk when it has channels",
                        to_string(req.op)));
}

const ICollectiveAlgorithm& CollectiveEngine::Impl::resolve(const CollectiveRequest& req) const {
    validate(req);
    if (req.algorithm == "auto") {
        const auto candidates = auto_candidates(req);
        check(!candidates.empty(), "collective: no registered algorithm is auto's candidate for the operation");
        return *candidates.front();
    }
    const ICollectiveAlgorithm* algo = find_collective_algorithm(req.algorithm);
    if (!algo)
        throw ModelError(fmt::format("unknown collective algorithm '{}' (known: auto, {})", req.algorithm,
                                     fmt::join(collective_algorithm_names(), ", ")));
    if (!algo->implements(req.op))
        throw ModelError(fmt::format("algorithm '{}' does not implement {}", req.algorithm, to_string(req.op)));
    if (algo->needs_token_routing() && req.tokens.top_k <= 0)
        throw ModelError(
            fmt::format("algorithm '{}' runs only MoE token exchanges (dispatch and combine)", req.algorithm));
    if (std::string why = algo->infeasible(topo, req.gpus); !why.empty()) throw ModelError(why);
    return *algo;
}

std::vector<const ICollectiveAlgorithm*> CollectiveEngine::Impl::auto_candidates(const CollectiveRequest& req) const {
    std::vector<std::pair<int, const ICollectiveAlgorithm*>> ranked;
    for (const auto* a : collective_algorithms())
        if (a->implements(req.op) && (!a->needs_token_routing() || req.tokens.top_k > 0))
            if (const auto rank = a->auto_rank(topo, req.op, req.gpus)) ranked.emplace_back(*rank, a);
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<const ICollectiveAlgorithm*> out;
    for (const auto& [rank, a] : ranked) out.push_back(a);
    return out;
}

void CollectiveEngine::Impl::resolve_step(const CollectivePlan& plan, std::size_t phase,
                                          std::vector<FlowNetwork::StepFlow>& out) const {
    const PlanPhase& ph = plan.phases[phase];
    out.clear();
    for (std::uint32_t i = ph.begin; i < ph.end; ++i) {
        const PlannedFlow& f = plan.flows[i];
        FlowNetwork::StepFlow s{nullptr, Time{}, f.size, f.efficiency};
        switch (f.path) {
            case FlowPath::gpu_to_gpu: s.route = &topo.route(f.src, f.dst, s.latency); break;
            case FlowPath::gpu_to_switch: s.route = &topo.to_switch(f.src); break;
            case FlowPath::switch_to_gpu: s.route = &topo.from_switch(f.dst); break;
            case FlowPath::through_nics: s.route = &topo.route_through_nics(f.src, f.dst, s.latency); break;
        }
        if (f.path == FlowPath::gpu_to_switch || f.path == FlowPath::switch_to_gpu)
            for (LinkId id : *s.route) s.latency += topo.link(id).latency;
        if (wire_in_step(topo, ph, f)) s.latency = Time{};
        out.push_back(s);
    }
}

std::unique_ptr<ResolvedPlan> CollectiveEngine::Impl::resolved_plan(const CollectiveRequest& r,
                                                                    const ICollectiveAlgorithm& algo, Time initial,
                                                                    bool reuse_steps) const {
    auto rp = std::make_unique<ResolvedPlan>();
    plan(rp->plan, r, algo);
    rp->plan.initial = initial;
    rp->plan.reuse_steps = reuse_steps;
    rp->steps.resize(rp->plan.phases.size());
    for (std::size_t p = 0; p < rp->plan.phases.size(); ++p) resolve_step(rp->plan, p, rp->steps[p]);
    if (reuse_steps) rp->memos.resize(rp->steps.size());
    return rp;
}

const ResolvedPlan* CollectiveEngine::Impl::kept_plan(const CollectiveRequest& r, const ICollectiveAlgorithm& algo,
                                                      Time initial) {
    PlanKey key = plan_key(algo.name(), r, initial);
    if (auto it = kept_plans.find(key); it != kept_plans.end()) return it->second.get();
    if (kept_plans.size() >= kMaxKeptPlans) return nullptr;
    return kept_plans.emplace(std::move(key), resolved_plan(r, algo, initial, true)).first->second.get();
}

const ResolvedPlan* CollectiveEngine::Impl::shared_plan(const CollectiveRequest& r, const ICollectiveAlgorithm& algo,
                                                        Time initial) {
    if (auto it = shared_plans.find(plan_ref(algo.name(), r, initial)); it != shared_plans.end())
        return it->second.get();
    if (shared_plans.size() >= kMaxSharedPlans || shared_flows >= kMaxSharedFlows) return nullptr;
    auto rp = resolved_plan(r, algo, initial, false);
    shared_flows += rp->plan.flows.size();
    return shared_plans.emplace(plan_key(algo.name(), r, initial), std::move(rp)).first->second.get();
}

void CollectiveEngine::Impl::launch(std::uint32_t slot) {
    Instance& inst = instances[slot];
    const CollectivePlan& plan = inst.current();
    const PlanPhase& ph = plan.phases[inst.phase];
    const auto done = [this, slot] { phase_done(slot); };
    if (inst.kept) {
        flows.run_steps(inst.kept->steps[inst.phase], ph.repeat, ph.latency, done, true, &inst.kept->memos[inst.phase]);
        return;
    }
    if (inst.shared) {
        flows.run_steps(inst.shared->steps[inst.phase], ph.repeat, ph.latency, done, false);
        return;
    }
    resolve_step(plan, inst.phase, inst.step);
    flows.run_steps(inst.step, ph.repeat, ph.latency, done, plan.reuse_steps);
}

void CollectiveEngine::Impl::phase_done(std::uint32_t slot) {
    Instance& inst = instances[slot];
    ++inst.phase;
    if (inst.phase < inst.current().phases.size()) {
        sim.schedule_after(inst.current().phases[inst.phase].latency, [this, slot] { launch(slot); });
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
    // The memo entry when choose() memoises this request (it keeps what the
    // last start ran, see ChoiceEntry); otherwise a choice of our own.
    Impl::ChoiceEntry* e = impl_->choose_memo(req);
    CollectiveChoice own;
    if (!e) own = impl_->choose(req);
    const CollectiveChoice& choice = e ? e->choice : own;
    if (req.gpus.size() == 1) {
        impl_->sim.schedule_after(Time{}, on_done);
        return;
    }
    const ICollectiveAlgorithm& algo = e && e->algo ? *e->algo : *find_collective_algorithm(choice.algorithm);
    if (e) e->algo = &algo;
    std::uint32_t slot;
    if (!impl_->free_instances.empty()) {
        slot = impl_->free_instances.back();
        impl_->free_instances.pop_back();
    } else {
        slot = static_cast<std::uint32_t>(impl_->instances.size());
        impl_->instances.emplace_back();
    }
    Instance& inst = impl_->instances[slot];
    inst.kept = nullptr;
    inst.shared = nullptr;
    const Protocol* p = nullptr;
    if (!choice.protocol.empty())
        p = &*std::find_if(req.protocols.begin(), req.protocols.end(),
                           [&](const Protocol& q) { return q.name == choice.protocol; });
    const Time initial = p && algo.pays_base_latency() ? p->base_latency : Time{};
    // The planned request's fields outside the memo key (apply_protocol's,
    // without building the planned request): equal to those of the shared
    // plan the entry keeps, the plan's key is equal too, so it is that plan.
    PlanTuning tuning;
    if (p) {
        CollectiveRequest& scratch = impl_->tuning_request;
        scratch.in_switch_efficiency = req.in_switch_efficiency;
        scratch.in_switch_latency = req.in_switch_latency;
        scratch.in_switch_fill = req.in_switch_fill;
        scratch.in_switch_chunk = req.in_switch_chunk;
        scratch.in_switch_channels = req.in_switch_channels;
        apply_protocol(scratch, req, *p);
        tuning = plan_tuning(scratch, initial);
    }
    if (e && p && e->shared && e->tuning == tuning) {
        inst.shared = e->shared;
    } else {
        if (p) Impl::set_with_protocol(impl_->protocol_request, req, *p);
        const CollectiveRequest& planned = p ? impl_->protocol_request : req;
        if (algo.reuses_steps(planned.op)) inst.kept = impl_->kept_plan(planned, algo, initial);
        else inst.shared = impl_->shared_plan(planned, algo, initial);
        if (e && p && inst.shared) {
            e->shared = inst.shared;
            e->tuning = tuning;
        }
        if (!inst.kept && !inst.shared) {
            impl_->plan(inst.plan, planned, algo);
            inst.plan.initial = initial;
            inst.plan.reuse_steps = algo.reuses_steps(planned.op);
        }
    }
    inst.phase = 0;
    inst.on_done = on_done;
    inst.busy = true;
    ++impl_->live;
    const CollectivePlan& plan = inst.current();
    check(!plan.phases.empty(), "collective: a plan of a multi-rank collective has no flows");
    impl_->sim.schedule_after(plan.initial + plan.phases[0].latency,
                              [impl = impl_.get(), slot] { impl->launch(slot); });
}

std::vector<std::string> CollectiveEngine::algorithms() const {
    std::vector<std::string> out{"auto"};
    for (auto& name : collective_algorithm_names()) out.push_back(std::move(name));
    return out;
}

std::string CollectiveEngine::resolve(const CollectiveRequest& req) const {
    return std::string(impl_->resolve(req).name());
}

CollectiveChoice CollectiveEngine::choose(const CollectiveRequest& req) const { return impl_->choose(req); }

CollectiveRequest CollectiveEngine::Impl::with_protocol(const CollectiveRequest& req, const Protocol& p) {
    CollectiveRequest r;
    set_with_protocol(r, req, p);
    return r;
}

void CollectiveEngine::Impl::set_with_protocol(CollectiveRequest& r, const CollectiveRequest& req, const Protocol& p) {
    r = req;
    apply_protocol(r, req, p);
    r.protocols.clear();
}

Time CollectiveEngine::Impl::estimate(const CollectivePlan& plan) const {
    double total = plan.initial.seconds();
    std::unordered_map<LinkId, double> load;  // seconds of wire time per link
    for (const PlanPhase& ph : plan.phases) {
        load.clear();
        Time longest{};
        for (std::uint32_t i = ph.begin; i < ph.end; ++i) {
            const PlannedFlow& f = plan.flows[i];
            const std::vector<LinkId>* links = nullptr;
            switch (f.path) {
                case FlowPath::gpu_to_gpu: links = &topo.route(f.src, f.dst); break;
                case FlowPath::gpu_to_switch: links = &topo.to_switch(f.src); break;
                case FlowPath::switch_to_gpu: links = &topo.from_switch(f.dst); break;
                case FlowPath::through_nics: {
                    Time unused;
                    links = &topo.route_through_nics(f.src, f.dst, unused);
                    break;
                }
            }
            Time latency{};
            for (LinkId l : *links) {
                latency += topo.link(l).latency;
                load[l] += f.size.as_double() / (f.efficiency * topo.link(l).bandwidth.bytes_per_s);
            }
            if (wire_in_step(topo, ph, f)) latency = Time{};
            longest = std::max(longest, latency);
        }
        double step = 0;
        for (const auto& [l, t] : load) step = std::max(step, t);
        total += static_cast<double>(ph.repeat) * (ph.latency.seconds() + longest.seconds() + step);
    }
    return Time::from_seconds_ceil(total);
}

CollectiveChoice CollectiveEngine::Impl::choose(const CollectiveRequest& req) const {
    // A request found in the memo was resolved before with the same key:
    // every check resolve() makes depends only on the key's fields (and the
    // topology), except the efficiencies, checked again here. So a hit
    // neither sorts the group again nor ranks the candidates.
    if (!req.protocols.empty() && req.gpus.size() >= 2)
        if (auto it = choices.find(choice_ref(req)); it != choices.end()) {
            validate_efficiencies(req);
            return it->second.choice;
        }
    const ICollectiveAlgorithm& rule = resolve(req);  // validates
    if (req.protocols.empty() || req.gpus.size() < 2) return CollectiveChoice{std::string(rule.name()), "", Time{}};
    const TokenRouting& tr = req.tokens;
    ChoiceKey key{static_cast<int>(req.op), req.size.value, req.algorithm, req.gpus,
                  std::array<int, 4>{tr.top_k, tr.experts, tr.groups, tr.group_limit}};
    // auto weighs every candidate, as NCCL's tuner does; a named algorithm only its protocols.
    const std::vector<const ICollectiveAlgorithm*> algos =
        req.algorithm == "auto" ? auto_candidates(req) : std::vector<const ICollectiveAlgorithm*>{&rule};
    CollectiveChoice best;
    CollectivePlan scratch;
    for (const ICollectiveAlgorithm* a : algos) {
        for (const Protocol& p : req.protocols) {
            // Direct transfers have no protocol choice in NCCL's tuner, but
            // their cost still depends on it, so they choose like the others.
            if (!a->runs_protocol(p)) continue;
            plan(scratch, with_protocol(req, p), *a);
            if (scratch.phases.empty()) continue;
            if (a->pays_base_latency()) scratch.initial = p.base_latency;
            const Time t = estimate(scratch);
            if (best.algorithm.empty() || t < best.predicted)
                best = CollectiveChoice{std::string(a->name()), p.name, t};
        }
    }
    if (best.algorithm.empty()) best = CollectiveChoice{std::string(rule.name()), req.protocols.back().name, Time{}};
    choices.emplace(std::move(key), ChoiceEntry{best});
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
