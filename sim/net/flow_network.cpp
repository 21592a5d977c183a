// Max-min fair flows over the topology's directed links (see flow_network.h).
//
// Each flow slot keeps its payload bytes left at `updated` and its payload
// rate; bytes move lazily, and are booked on the links whenever the rate
// changes or the flow ends. Slots, per-link flow lists and the filling
// scratch are reused, so a steady-state run allocates nothing per flow.
//
// Repeated steps (flow_network.h): a group runs a phase's steps. While a
// step runs, each rate given to one of its flows is recorded as a segment
// (offset from the step's launch, bytes left, rate, completion offset), and
// each link it makes busy or idle as a link event. A step none of whose
// flows ever shared a rate computation with another flow is a template:
// later steps alone repeat it exactly, shifted. Splitting a window rebuilds
// the step in progress from those records: what happened strictly before
// the split instant has happened, what is due at it is still scheduled.
#include "sim/net/flow_network.h"

#include "sim/core/checked.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

namespace sim::net {

namespace {

enum class FlowState : std::uint8_t { free, latency, active };

constexpr std::uint32_t kNoGroup = std::numeric_limits<std::uint32_t>::max();

struct FlowSlot {
    const std::vector<LinkId>* route = nullptr;
    std::vector<std::uint32_t> pos;  // index of this flow in each route link's list
    double remaining = 0.0;          // payload bytes left at `updated`
    double rate = 0.0;               // payload bytes per second
    double efficiency = 1.0;
    double new_wire = 0.0;           // filling scratch: < 0 while unfrozen
    Time updated;
    EventId done_event;
    bool has_event = false;
    Callback on_done;
    std::uint32_t generation = 0;
    std::uint32_t mark = 0;
    std::uint32_t group = kNoGroup;  //, or the repeated-steps group it belongs to
    std::uint32_t index = 0;  // its position in the group's flows
    FlowState state = FlowState::free;
};

struct LinkState {
    std::vector<std::uint32_t> flows;  // active flows (past their latency)
    double capacity = 0.0;
    double bytes = 0.0;
    Time busy;
    Time busy_since;
    double max_load = 0.0;
    // filling scratch
    double rem = 0.0;
    std::uint32_t unfrozen = 0;
    std::uint32_t mark = 0;
    // repeated steps
    std::uint32_t held = kNoGroup;  //, or the group whose window holds the link
    Time ff_since;           // scratch: busy-since offset while replaying link events
    bool ff_open = false;
};

// A rate given to a group flow, as offsets from its step's launch.
struct Segment {
    std::uint32_t flow;
    Time off;
    double remaining;
    double rate;
    Time done_off;
};

// A link of a group's routes becoming busy (up) or idle.
struct LinkEvent {
    LinkId link;
    Time off;
    bool up;
};

struct Group {
    std::vector<FlowNetwork::StepFlow> flows;
    std::vector<LinkId> links;  // distinct links of the routes (only when steps repeat)
    std::uint32_t left = 0;     // steps not yet launched
    std::uint32_t outstanding = 0;
    Time gap, launched;
    Callback on_done;
    bool contended = false;     // a flow of the step shared a rate computation with another
    bool live = false;
    std::vector<Segment> segs, template_segs;
    std::vector<LinkEvent> events, template_events;
    Time template_length;
    // window of skipped steps: `steps` steps of `period` from `start`
    bool window = false;
    Time start, period;
    std::uint32_t steps = 0;
    EventId end_event;
};

// Relative change below which a recomputed rate counts as unchanged (keeps
// completion events, and hand-computable times, stable under float noise).
constexpr double kRateTolerance = 1e-12;

}  // namespace

struct FlowNetwork::Impl {
    Simulation& sim;
    const Topology& topo;
    std::vector<FlowSlot> flows;
    std::vector<std::uint32_t> free_slots;
    std::vector<LinkState> links;
    std::vector<LinkId> dirty;
    std::vector<LinkId> comp_links;
    std::vector<std::uint32_t> comp_flows;
    std::vector<std::pair<double, LinkId>> heap;
    std::uint32_t epoch = 0;
    bool recompute_pending = false;
    std::size_t live = 0;
    double max_load = 0.0;
    std::uint64_t recomputes = 0;
    std::uint64_t rerated = 0;
    bool sampling = false;
    std::vector<ClassSample> samples;
    std::vector<Group> groups;
    std::vector<std::uint32_t> free_groups;
    std::vector<std::int64_t> last_seg;  // split scratch
    bool skip_steps = true;
    std::size_t windows_open = 0;
    std::uint64_t skipped = 0;
    std::uint64_t splits = 0;

    Impl(Simulation& s, const Topology& t) : sim(s), topo(t), links(t.link_count()) {
        for (LinkId id = 0; id < links.size(); ++id) links[id].capacity = t.link(id).bandwidth.bytes_per_s;
    }

    FlowId start(const std::vector<LinkId>& route, Time latency, Bytes size, Callback on_done, double efficiency,
                 std::uint32_t group = kNoGroup, std::uint32_t index = 0);
    std::uint32_t alloc_slot();
    void schedule_activation(std::uint32_t slot, Time at);
    void schedule_completion(std::uint32_t slot, Time at);
    void run_steps(const std::vector<StepFlow>& step, std::uint32_t repeat, Time gap, Callback on_done);
    void launch_step(std::uint32_t g);
    void group_flow_done(std::uint32_t g);
    void finish_group(std::uint32_t g);
    bool can_hold(const Group& g) const;
    void open_window(std::uint32_t g, std::uint64_t total_ps);
    void close_window(std::uint32_t g);
    void hold(Group& g, std::uint32_t who);
    void commit(Group& g, std::uint64_t steps);
    void split(std::uint32_t g);
    void rebuild_step(std::uint32_t g, Time launched, Time offset);
    void settle() {
        if (windows_open == 0) return;
        for (std::uint32_t g = 0; g < groups.size(); ++g)
            if (groups[g].window) split(g);
    }
    void activate(std::uint32_t slot);
    void complete(std::uint32_t slot);
    void book_progress(FlowSlot& f);
    void request_recompute();
    void recompute();
    void recompute_rates();
    void take_sample();
    void fill();
    void freeze(LinkState& l, double share);
    void release(std::uint32_t slot);
};

std::uint32_t FlowNetwork::Impl::alloc_slot() {
    if (!free_slots.empty()) {
        const std::uint32_t slot = free_slots.back();
        free_slots.pop_back();
        return slot;
    }
    flows.emplace_back();
    return static_cast<std::uint32_t>(flows.size() - 1);
}

void FlowNetwork::Impl::schedule_activation(std::uint32_t slot, Time at) {
    const std::uint32_t gen = flows[slot].generation;
    sim.schedule_at(at, [this, slot, gen] {
        if (flows[slot].generation == gen) activate(slot);
    });
}

void FlowNetwork::Impl::schedule_completion(std::uint32_t slot, Time at) {
    const std::uint32_t gen = flows[slot].generation;
    flows[slot].done_event = sim.schedule_at(at, [this, slot, gen] {
        if (flows[slot].generation == gen) complete(slot);
    });
    flows[slot].has_event = true;
}

FlowId FlowNetwork::Impl::start(const std::vector<LinkId>& route, Time latency, Bytes size, Callback on_done,
                                double efficiency, std::uint32_t group, std::uint32_t index) {
    if (!(efficiency > 0.0 && efficiency <= 1.0))
        throw InternalError(fmt::format("flow efficiency {} is outside (0, 1]", efficiency));
    const std::uint32_t slot = alloc_slot();
    FlowSlot& f = flows[slot];
    f.route = &route;
    f.pos.resize(route.size());
    f.remaining = size.as_double();
    f.rate = 0.0;
    f.efficiency = efficiency;
    f.on_done = on_done;
    f.has_event = false;
    f.state = FlowState::latency;
    f.group = group;
    f.index = index;
    ++live;
    schedule_activation(slot, sim.now() + latency);
    return slot;
}

void FlowNetwork::Impl::activate(std::uint32_t slot) {
    // A window holding one of the links ends first: its step in progress
    // becomes ordinary flows, which this flow then shares the links with.
    for (LinkId id : *flows[slot].route)
        if (links[id].held != kNoGroup) split(links[id].held);
    FlowSlot& f = flows[slot];
    if (f.remaining <= 0.0 || f.route->empty()) {
        release(slot);
        return;
    }
    f.state = FlowState::active;
    f.updated = sim.now();
    const auto& route = *f.route;
    for (std::size_t i = 0; i < route.size(); ++i) {
        LinkState& l = links[route[i]];
        f.pos[i] = static_cast<std::uint32_t>(l.flows.size());
        l.flows.push_back(slot);
        if (l.flows.size() == 1) {
            l.busy_since = sim.now();
            if (f.group != kNoGroup && groups[f.group].left > 0)
                groups[f.group].events.push_back(LinkEvent{route[i], sim.now() - groups[f.group].launched, true});
        }
        dirty.push_back(route[i]);
    }
    request_recompute();
}

void FlowNetwork::Impl::book_progress(FlowSlot& f) {
    const Time now = sim.now();
    if (now > f.updated && f.rate > 0.0) {
        const double moved = std::min(f.remaining, f.rate * (now - f.updated).seconds());
        for (LinkId id : *f.route) links[id].bytes += moved;
        f.remaining -= moved;
    }
    f.updated = now;
}

void FlowNetwork::Impl::complete(std::uint32_t slot) {
    FlowSlot& f = flows[slot];
    f.has_event = false;
    // The rest of the payload arrives now (the event time was rounded up).
    for (LinkId id : *f.route) links[id].bytes += std::max(0.0, f.remaining);
    f.remaining = 0.0;
    const auto& route = *f.route;
    for (std::size_t i = 0; i < route.size(); ++i) {
        LinkState& l = links[route[i]];
        const std::uint32_t at = f.pos[i];
        const std::uint32_t moved = l.flows.back();
        l.flows[at] = moved;
        l.flows.pop_back();
        if (moved != slot) {
            FlowSlot& m = flows[moved];
            const auto& mr = *m.route;
            for (std::size_t j = 0; j < mr.size(); ++j)
                if (mr[j] == route[i]) m.pos[j] = at;
        }
        if (l.flows.empty()) {
            l.busy += sim.now() - l.busy_since;
            if (f.group != kNoGroup && groups[f.group].left > 0)
                groups[f.group].events.push_back(LinkEvent{route[i], sim.now() - groups[f.group].launched, false});
        }
        dirty.push_back(route[i]);
    }
    request_recompute();
    release(slot);
}

void FlowNetwork::Impl::release(std::uint32_t slot) {
    FlowSlot& f = flows[slot];
    Callback cb = f.on_done;
    f.state = FlowState::free;
    f.route = nullptr;
    f.on_done = Callback{};
    f.group = kNoGroup;
    ++f.generation;
    free_slots.push_back(slot);
    --live;
    if (cb) cb();
}

void FlowNetwork::Impl::request_recompute() {
    if (recompute_pending) return;
    recompute_pending = true;
    sim.schedule_after(Time{}, [this] { recompute(); });
}

void FlowNetwork::Impl::recompute() {
    recompute_rates();
    if (sampling) take_sample();
}

void FlowNetwork::Impl::take_sample() {
    std::array<double, kLinkClassCount> used{}, capacity{};
    for (LinkId id = 0; id < links.size(); ++id) {
        const auto c = static_cast<std::size_t>(topo.link(id).cls);
        capacity[c] += links[id].capacity;
        for (std::uint32_t fs : links[id].flows) used[c] += flows[fs].rate / flows[fs].efficiency;
    }
    ClassSample sample{sim.now(), {}};
    for (std::size_t c = 0; c < kLinkClassCount; ++c) sample.utilization[c] = capacity[c] > 0 ? used[c] / capacity[c] : 0.0;
    if (!samples.empty() && samples.back().utilization == sample.utilization) return;
    if (!samples.empty() && samples.back().at == sample.at) samples.back() = sample;
    else samples.push_back(sample);
}

void FlowNetwork::Impl::recompute_rates() {
    recompute_pending = false;
    ++recomputes;
    if (++epoch == 0) {
        for (auto& l : links) l.mark = 0;
        for (auto& f : flows) f.mark = 0;
        epoch = 1;
    }

    // The connected component of the changed links: links -> flows -> links.
    comp_links.clear();
    comp_flows.clear();
    for (LinkId id : dirty) {
        if (links[id].mark == epoch) continue;
        links[id].mark = epoch;
        comp_links.push_back(id);
    }
    dirty.clear();
    for (std::size_t i = 0; i < comp_links.size(); ++i) {
        for (std::uint32_t fs : links[comp_links[i]].flows) {
            FlowSlot& f = flows[fs];
            if (f.mark == epoch) continue;
            f.mark = epoch;
            f.new_wire = -1.0;
            comp_flows.push_back(fs);
            for (LinkId id : *f.route) {
                if (links[id].mark == epoch) continue;
                links[id].mark = epoch;
                comp_links.push_back(id);
            }
        }
    }
    if (comp_flows.empty()) return;
    // A group's step is a template only if its flows never shared a rate
    // computation with another flow (conservative: the batch, not each
    // connected component, is checked).
    const std::uint32_t first_group = flows[comp_flows.front()].group;
    for (std::uint32_t fs : comp_flows) {
        if (flows[fs].group == first_group) continue;
        for (std::uint32_t gs : comp_flows)
            if (flows[gs].group != kNoGroup) groups[flows[gs].group].contended = true;
        break;
    }

    for (LinkId id : comp_links) {
        LinkState& l = links[id];
        l.rem = l.capacity;
        l.unfrozen = static_cast<std::uint32_t>(l.flows.size());
    }
    fill();
    for (LinkId id : comp_links) {
        LinkState& l = links[id];
        if (l.flows.empty() || l.capacity <= 0.0) continue;
        const double load = (l.capacity - l.rem) / l.capacity;
        l.max_load = std::max(l.max_load, load);
        max_load = std::max(max_load, load);
    }

    // New rates: only flows whose rate changed get a new completion event.
    for (std::uint32_t fs : comp_flows) {
        FlowSlot& f = flows[fs];
        const double rate = f.new_wire * f.efficiency;
        if (f.has_event && std::abs(rate - f.rate) <= kRateTolerance * f.rate) continue;
        book_progress(f);
        f.rate = rate;
        if (f.has_event) sim.cancel(f.done_event);
        check(rate > 0.0, "flow network: a flow got no bandwidth");
        const Time left = Time::from_seconds_ceil(std::max(0.0, f.remaining) / rate);
        schedule_completion(fs, sim.now() + left);
        if (f.group != kNoGroup && groups[f.group].left > 0) {
            Group& g = groups[f.group];
            const Time off = sim.now() - g.launched;
            g.segs.push_back(Segment{f.index, off, f.remaining, rate, off + left});
        }
        ++rerated;
    }
}

// Freezes every unfrozen flow crossing `l` at wire rate `share`.
void FlowNetwork::Impl::freeze(LinkState& l, double share) {
    for (std::uint32_t fs : l.flows) {
        FlowSlot& f = flows[fs];
        if (f.new_wire >= 0.0) continue;
        f.new_wire = share;
        for (LinkId other : *f.route) {
            links[other].rem -= share;
            --links[other].unfrozen;
        }
    }
}

// Progressive filling over comp_links (rem and unfrozen initialised). A
// link's fair share rem/unfrozen only grows as flows freeze elsewhere.
// Collectives have few bottleneck levels, so first scan level by level,
// O(links) each: find the smallest share, freeze the links at it (within
// tolerance), drop the finished links. After kLevelScans levels switch to a
// min-heap with lazy re-insertion, O(log links) per freeze.
void FlowNetwork::Impl::fill() {
    constexpr int kLevelScans = 8;
    heap.clear();
    for (LinkId id : comp_links)
        if (links[id].unfrozen > 0) heap.emplace_back(0.0, id);  // the scan's working list
    for (int level = 0; level < kLevelScans && !heap.empty(); ++level) {
        double least = std::numeric_limits<double>::infinity();
        for (const auto& [key, id] : heap) least = std::min(least, std::max(0.0, links[id].rem) / links[id].unfrozen);
        const double limit = least * (1.0 + kRateTolerance);
        for (const auto& [key, id] : heap) {
            LinkState& l = links[id];
            if (l.unfrozen == 0) continue;
            const double share = std::max(0.0, l.rem) / l.unfrozen;
            if (share <= limit) freeze(l, share);
        }
        std::erase_if(heap, [this](const auto& e) { return links[e.second].unfrozen == 0; });
    }
    if (heap.empty()) return;

    const auto later = std::greater<std::pair<double, LinkId>>();
    for (auto& [key, id] : heap) key = std::max(0.0, links[id].rem) / links[id].unfrozen;
    std::make_heap(heap.begin(), heap.end(), later);
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), later);
        const auto [key, id] = heap.back();
        heap.pop_back();
        LinkState& l = links[id];
        if (l.unfrozen == 0) continue;
        const double share = std::max(0.0, l.rem) / l.unfrozen;
        if (share > key * (1.0 + kRateTolerance)) {
            heap.emplace_back(share, id);
            std::push_heap(heap.begin(), heap.end(), later);
            continue;
        }
        freeze(l, share);
    }
}

void FlowNetwork::Impl::run_steps(const std::vector<StepFlow>& step, std::uint32_t repeat, Time gap,
                                  Callback on_done) {
    check(repeat >= 1 && !step.empty(), "flow network: repeated steps need flows and at least one step");
    std::uint32_t g;
    if (!free_groups.empty()) {
        g = free_groups.back();
        free_groups.pop_back();
    } else {
        g = static_cast<std::uint32_t>(groups.size());
        groups.emplace_back();
    }
    Group& G = groups[g];
    G.flows.assign(step.begin(), step.end());
    G.links.clear();
    if (repeat > 1) {
        for (const StepFlow& f : step) G.links.insert(G.links.end(), f.route->begin(), f.route->end());
        std::sort(G.links.begin(), G.links.end());
        G.links.erase(std::unique(G.links.begin(), G.links.end()), G.links.end());
    }
    G.left = repeat - 1;
    G.gap = gap;
    G.on_done = on_done;
    G.live = true;
    G.window = false;
    launch_step(g);
}

void FlowNetwork::Impl::launch_step(std::uint32_t g) {
    Group& G = groups[g];
    G.launched = sim.now();
    G.contended = false;
    G.segs.clear();
    G.events.clear();
    G.outstanding = static_cast<std::uint32_t>(G.flows.size());
    for (std::uint32_t i = 0; i < G.flows.size(); ++i) {
        const StepFlow& f = groups[g].flows[i];
        start(*f.route, f.latency, f.size, [this, g] { group_flow_done(g); }, f.efficiency, g, i);
    }
}

void FlowNetwork::Impl::group_flow_done(std::uint32_t g) {
    Group& G = groups[g];
    check(G.outstanding > 0, "flow network: more flow completions than flows in a step");
    if (--G.outstanding > 0) return;
    if (G.left == 0) {
        finish_group(g);
        return;
    }
    if (skip_steps && !sampling && !G.contended && can_hold(G)) {
        const Time length = sim.now() - G.launched;
        const std::uint64_t gap_ps = G.gap.count_ps(), length_ps = length.count_ps();
        const auto period = gap_ps <= Time::max().count_ps() - length_ps ? std::optional(gap_ps + length_ps)
                                                                          : std::nullopt;
        const auto total = period && *period > 0 ? checked_mul(*period, G.left) : std::nullopt;
        if (total && *total <= Time::max().count_ps() - sim.now().count_ps()) {
            std::swap(G.template_segs, G.segs);
            std::swap(G.template_events, G.events);
            G.template_length = length;
            G.period = Time::ps(*period);
            open_window(g, *total);
            return;
        }
    }
    --G.left;
    sim.schedule_after(G.gap, [this, g] { launch_step(g); });
}

void FlowNetwork::Impl::finish_group(std::uint32_t g) {
    Group& G = groups[g];
    Callback cb = G.on_done;
    G.on_done = Callback{};
    G.live = false;
    free_groups.push_back(g);
    if (cb) cb();
}

bool FlowNetwork::Impl::can_hold(const Group& G) const {
    for (LinkId id : G.links)
        if (!links[id].flows.empty() || links[id].held != kNoGroup) return false;
    return true;
}

void FlowNetwork::Impl::hold(Group& G, std::uint32_t who) {
    for (LinkId id : G.links) links[id].held = who;
}

// The remaining G.left steps, alone, end `total` ps from now.
void FlowNetwork::Impl::open_window(std::uint32_t g, std::uint64_t total_ps) {
    Group& G = groups[g];
    G.window = true;
    G.start = sim.now();
    G.steps = G.left;
    G.left = 0;
    hold(G, g);
    ++windows_open;
    G.end_event = sim.schedule_at(sim.now() + Time::ps(total_ps), [this, g] { close_window(g); });
}

void FlowNetwork::Impl::close_window(std::uint32_t g) {
    Group& G = groups[g];
    commit(G, G.steps);
    skipped += G.steps;
    hold(G, kNoGroup);
    G.window = false;
    --windows_open;
    finish_group(g);
}

// Books `steps` whole template steps on the links: each flow's payload, and
// each busy interval.
void FlowNetwork::Impl::commit(Group& G, std::uint64_t steps) {
    if (steps == 0) return;
    const double k = static_cast<double>(steps);
    for (const StepFlow& f : G.flows)
        for (LinkId id : *f.route) links[id].bytes += k * f.size.as_double();
    for (const LinkEvent& e : G.template_events) {
        LinkState& l = links[e.link];
        if (e.up) l.ff_since = e.off;
        else l.busy += Time::ps(checked_mul((e.off - l.ff_since).count_ps(), steps).value());
    }
}

// Ends G's window now: books the whole steps done, then either schedules
// the next launch (between steps) or rebuilds the step in progress.
void FlowNetwork::Impl::split(std::uint32_t g) {
    Group& G = groups[g];
    ++splits;
    sim.cancel(G.end_event);
    hold(G, kNoGroup);
    G.window = false;
    --windows_open;
    const std::uint64_t elapsed = (sim.now() - G.start).count_ps();
    const std::uint64_t period = G.period.count_ps();
    const std::uint64_t done = elapsed / period;
    const std::uint64_t into = elapsed % period;
    commit(G, done);
    skipped += done;
    const auto rest = static_cast<std::uint32_t>(G.steps - done);
    const Time step_start = G.start + Time::ps(done * period);  // the last whole step's end
    if (into == 0 || into < G.gap.count_ps()) {
        if (rest == 0) {  // the window's end is due now
            sim.schedule_after(Time{}, [this, g] { finish_group(g); });
            return;
        }
        G.left = rest - 1;
        sim.schedule_at(step_start + G.gap, [this, g] { launch_step(g); });
        return;
    }
    G.left = rest - 1;
    rebuild_step(g, step_start + G.gap, Time::ps(into) - G.gap);
}

// The template step as it stands `offset` after its launch at `launched`:
// events strictly before the offset have happened, those at it are pending.
void FlowNetwork::Impl::rebuild_step(std::uint32_t g, Time launched, Time offset) {
    Group& G = groups[g];
    G.launched = launched;
    G.contended = true;
    G.segs.clear();
    G.events.clear();
    G.outstanding = 0;
    last_seg.assign(G.flows.size(), -1);
    for (std::size_t k = 0; k < G.template_segs.size(); ++k)
        if (G.template_segs[k].off < offset) last_seg[G.template_segs[k].flow] = static_cast<std::int64_t>(k);
    for (std::uint32_t i = 0; i < G.flows.size(); ++i) {
        const StepFlow sf = groups[g].flows[i];
        const auto& route = *sf.route;
        const std::int64_t k = last_seg[i];
        const Segment* seg = k >= 0 ? &groups[g].template_segs[static_cast<std::size_t>(k)] : nullptr;
        if (sf.latency < offset && (!seg || seg->done_off < offset)) {  // done (or released on activation)
            if (seg)
                for (LinkId id : route) links[id].bytes += sf.size.as_double();
            continue;
        }
        const std::uint32_t slot = alloc_slot();
        FlowSlot& f = flows[slot];
        f.route = &route;
        f.pos.resize(route.size());
        f.efficiency = sf.efficiency;
        f.on_done = [this, g] { group_flow_done(g); };
        f.has_event = false;
        f.group = g;
        f.index = i;
        ++live;
        ++groups[g].outstanding;
        if (sf.latency >= offset) {
            f.remaining = sf.size.as_double();
            f.rate = 0.0;
            f.state = FlowState::latency;
            schedule_activation(slot, launched + sf.latency);
            continue;
        }
        f.remaining = seg->remaining;
        f.rate = seg->rate;
        f.updated = launched + seg->off;
        f.state = FlowState::active;
        for (std::size_t r = 0; r < route.size(); ++r) {
            LinkState& l = links[route[r]];
            f.pos[r] = static_cast<std::uint32_t>(l.flows.size());
            l.flows.push_back(slot);
            l.bytes += sf.size.as_double() - seg->remaining;
        }
        schedule_completion(slot, launched + seg->done_off);
    }
    // Busy intervals of the partial step; links still busy keep their start.
    for (const LinkEvent& e : groups[g].template_events) {
        if (!(e.off < offset)) break;
        LinkState& l = links[e.link];
        if (e.up) {
            l.ff_since = e.off;
            l.ff_open = true;
        } else {
            l.busy += e.off - l.ff_since;
            l.ff_open = false;
        }
    }
    for (LinkId id : groups[g].links) {
        LinkState& l = links[id];
        if (!l.ff_open) continue;
        l.ff_open = false;
        l.busy_since = launched + l.ff_since;
        check(!l.flows.empty(), "flow network: a rebuilt step left a busy link without flows");
    }
    check(groups[g].outstanding > 0, "flow network: a rebuilt step has no flow left");
}

FlowNetwork::FlowNetwork(Simulation& sim, const Topology& topo) : impl_(std::make_unique<Impl>(sim, topo)) {}
FlowNetwork::~FlowNetwork() = default;

FlowId FlowNetwork::start(int src, int dst, Bytes size, Callback on_done, double efficiency) {
    const Topology& t = impl_->topo;
    return impl_->start(t.route(src, dst), t.route_latency(src, dst), size, on_done, efficiency);
}

FlowId FlowNetwork::start_on(const std::vector<LinkId>& links, Bytes size, Callback on_done, double efficiency) {
    Time latency;
    for (LinkId id : links) latency += impl_->topo.link(id).latency;
    return impl_->start(links, latency, size, on_done, efficiency);
}

void FlowNetwork::run_steps(const std::vector<StepFlow>& flows, std::uint32_t repeat, Time gap, Callback on_done) {
    impl_->run_steps(flows, repeat, gap, on_done);
}
void FlowNetwork::set_skip_repeated_steps(bool on) {
    impl_->settle();
    impl_->skip_steps = on;
}
std::uint64_t FlowNetwork::steps_skipped() const { return impl_->skipped; }
std::uint64_t FlowNetwork::windows_split() const { return impl_->splits; }

std::size_t FlowNetwork::active_flows() const {
    impl_->settle();
    return impl_->live;
}

double FlowNetwork::link_bytes(LinkId id) const {
    check(id < impl_->links.size(), "flow network: link id out of range");
    impl_->settle();
    const LinkState& l = impl_->links[id];
    double bytes = l.bytes;
    const Time now = impl_->sim.now();
    for (std::uint32_t fs : l.flows) {
        const FlowSlot& f = impl_->flows[fs];
        if (now > f.updated) bytes += std::min(f.remaining, f.rate * (now - f.updated).seconds());
    }
    return bytes;
}

Time FlowNetwork::link_busy_time(LinkId id) const {
    check(id < impl_->links.size(), "flow network: link id out of range");
    impl_->settle();
    const LinkState& l = impl_->links[id];
    return l.flows.empty() ? l.busy : l.busy + (impl_->sim.now() - l.busy_since);
}

double FlowNetwork::class_bytes(LinkClass c) const {
    double sum = 0.0;
    for (LinkId id = 0; id < impl_->links.size(); ++id)
        if (impl_->topo.link(id).cls == c) sum += link_bytes(id);
    return sum;
}

double FlowNetwork::class_utilization(LinkClass c, Time horizon) const {
    if (horizon.count_ps() == 0) return 0.0;
    double sum = 0.0;
    int used = 0;
    for (LinkId id = 0; id < impl_->links.size(); ++id) {
        if (impl_->topo.link(id).cls != c) continue;
        const double bytes = link_bytes(id);
        if (bytes <= 0.0) continue;
        sum += bytes / (impl_->links[id].capacity * horizon.seconds());
        ++used;
    }
    return used == 0 ? 0.0 : sum / used;
}

double FlowNetwork::max_link_load() const { return impl_->max_load; }

double FlowNetwork::link_max_load(LinkId id) const {
    check(id < impl_->links.size(), "flow network: link id out of range");
    return impl_->links[id].max_load;
}

void FlowNetwork::record_class_utilization(bool on) {
    impl_->settle();
    impl_->sampling = on;
}
const std::vector<ClassSample>& FlowNetwork::class_utilization_samples() const { return impl_->samples; }

std::uint64_t FlowNetwork::recomputations() const { return impl_->recomputes; }
std::uint64_t FlowNetwork::flows_rerated() const { return impl_->rerated; }

}  // namespace sim::net
