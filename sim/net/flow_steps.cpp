// Repeated steps of the flow network (flow_network.h, run_steps): a group
// runs a phase's steps. While a step runs, each rate given to one of its flows is recorded as a segment
// (offset from the step's launch, bytes left, rate, completion offset), and
// each link it makes busy or idle as a link event. A step none of whose
// flows ever shared a rate computation with another flow is a template:
// later steps alone repeat it exactly, shifted. Splitting a window rebuilds
// the step in progress from those records: what happened strictly before
// the split instant has happened, what is due at it is still scheduled.
// Reused steps (run_steps with reuse): a template is also kept across calls,
// keyed by the step's flows, and a later call with the same flows opens its
// window at its first launch (the window's head is the gap not waited).
#include "sim/net/flow_network_impl.h"

#include "sim/core/checked.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <optional>

namespace sim::net {

using namespace flow_detail;

// Labels the connected components of comp_flows (through shared links) and
// marks the groups of every component that holds flows of more than one
// group (or ungrouped flows) as contended.
void FlowNetwork::Impl::mark_contended() {
    if (++label_epoch == 0) {
        for (auto& l : links) l.label = 0;
        for (auto& f : flows) f.label = 0;
        label_epoch = 1;
    }
    for (std::uint32_t seed : comp_flows) {
        if (flows[seed].label == label_epoch) continue;
        flows[seed].label = label_epoch;
        bfs.assign(1, seed);
        const std::uint32_t g0 = flows[seed].group;
        bool mixed = false;
        for (std::size_t i = 0; i < bfs.size(); ++i) {
            const FlowSlot& f = flows[bfs[i]];
            mixed = mixed || f.group != g0;
            for (LinkId id : *f.route) {
                if (links[id].label == label_epoch) continue;
                links[id].label = label_epoch;
                for (std::uint32_t o : links[id].flows)
                    if (flows[o].label != label_epoch) {
                        flows[o].label = label_epoch;
                        bfs.push_back(o);
                    }
            }
        }
        if (mixed)
            for (std::uint32_t fs : bfs)
                if (flows[fs].group != kNoGroup) groups[flows[fs].group].contended = true;
    }
}

void FlowNetwork::Impl::run_steps(const std::vector<StepFlow>& step, std::uint32_t repeat, Time gap, Callback on_done,
                                  bool reuse, StepMemo* memo) {
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
    G.kept = kNoGroup;
    G.left = repeat - 1;
    G.gap = gap;
    G.on_done = on_done;
    G.live = true;
    G.window = false;
    G.reuse = reuse;
    G.keep = false;
    if (reuse) {
        const KeptStep* k = lookup_kept(step, memo);
        if (!k) {
            G.keep = kept.size() < kMaxKeptSteps && kept_flows + step.size() <= kMaxKeptFlows;
        } else if (skip_steps && !sampling) {
            // The kept step ran alone: if its links are idle now, this call's
            // steps are its repeats, the first one included (head = gap: the
            // first period's gap is not waited, the step launches now).
            G.kept = static_cast<std::uint32_t>(k - kept.data());
            const std::uint64_t gap_ps = gap.count_ps(), length_ps = k->length.count_ps();
            const auto period =
                gap_ps <= Time::max().count_ps() - length_ps ? std::optional(gap_ps + length_ps) : std::nullopt;
            const auto whole = period && *period > 0 ? checked_mul(*period, repeat) : std::nullopt;
            if (whole && length_ps > 0 && *whole - gap_ps <= Time::max().count_ps() - sim.now().count_ps() &&
                can_hold(G)) {
                // The group reads its flows, links and template from the kept step.
                G.period = Time::ps(*period);
                G.left = repeat;
                G.head = gap;
                ++reused;
                open_window(g, *whole - gap_ps);
                return;
            }
            G.kept = kNoGroup;
        }
    }
    G.flows.assign(step.begin(), step.end());
    G.links.clear();
    if (repeat > 1) {
        for (const StepFlow& f : step) G.links.insert(G.links.end(), f.route->begin(), f.route->end());
        std::sort(G.links.begin(), G.links.end());
        G.links.erase(std::unique(G.links.begin(), G.links.end()), G.links.end());
    }
    launch_step(g);
}

std::uint64_t FlowNetwork::Impl::step_hash(const std::vector<StepFlow>& step) {
    // FNV-1a over each flow's route identity, latency, size and efficiency.
    std::uint64_t h = 1469598103934665603ULL;
    const auto mix = [&h](std::uint64_t v) {
        h ^= v;
        h *= 1099511628211ULL;
    };
    for (const StepFlow& f : step) {
        mix(reinterpret_cast<std::uintptr_t>(f.route));
        mix(f.latency.count_ps());
        mix(f.size.value);
        mix(std::bit_cast<std::uint64_t>(f.efficiency));
    }
    return h;
}

// kept only grows, and find_kept's answer for a list depends only on the
// list and on kept: while kept.size() is what it was at the memo's lookup,
// the memo's answer is the one find_kept would give now.
const KeptStep* FlowNetwork::Impl::lookup_kept(const std::vector<StepFlow>& step, StepMemo* memo) {
    if (!memo) {
        ++lookups;
        return find_kept(step, step_hash(step));
    }
    if (memo->network != this) {
        *memo = StepMemo{};
        memo->network = this;
        memo->hash = step_hash(step);
        memo->kept_count = std::numeric_limits<std::size_t>::max();
    }
    if (memo->kept_count != kept.size()) {
        ++lookups;
        const KeptStep* k = find_kept(step, memo->hash);
        memo->kept = k ? static_cast<std::uint32_t>(k - kept.data()) : StepMemo::none;
        memo->kept_count = kept.size();
    }
    return memo->kept == StepMemo::none ? nullptr : &kept[memo->kept];
}

const KeptStep* FlowNetwork::Impl::find_kept(const std::vector<StepFlow>& step, std::uint64_t hash) const {
    const auto same = [](const StepFlow& a, const StepFlow& b) {
        return a.route == b.route && a.latency == b.latency && a.size == b.size && a.efficiency == b.efficiency;
    };
    const auto [lo, hi] = kept_index.equal_range(hash);
    for (auto it = lo; it != hi; ++it) {
        const KeptStep& k = kept[it->second];
        if (std::equal(step.begin(), step.end(), k.flows.begin(), k.flows.end(), same)) return &k;
    }
    return nullptr;
}

// Keeps G's step that just ended alone (its recorded rates and link events).
void FlowNetwork::Impl::keep(const Group& G) {
    KeptStep k;
    k.flows = G.flows;
    for (const StepFlow& f : G.flows) k.links.insert(k.links.end(), f.route->begin(), f.route->end());
    std::sort(k.links.begin(), k.links.end());
    k.links.erase(std::unique(k.links.begin(), k.links.end()), k.links.end());
    k.segs = G.segs;
    k.events = G.events;
    k.length = sim.now() - G.launched;
    // One step's payload per link (whole bytes, so the sum is exact below
    // 2^53): a window books k x it, as commit books k x each flow's.
    k.payload.assign(k.links.size(), 0.0);
    for (const StepFlow& f : G.flows)
        for (LinkId id : *f.route) {
            const auto at = std::lower_bound(k.links.begin(), k.links.end(), id) - k.links.begin();
            k.payload[static_cast<std::size_t>(at)] += f.size.as_double();
        }
    kept_flows += k.flows.size();
    kept_index.emplace(step_hash(k.flows), static_cast<std::uint32_t>(kept.size()));
    kept.push_back(std::move(k));
}

void FlowNetwork::Impl::launch_step(std::uint32_t g) {
    Group& G = groups[g];
    G.launched = sim.now();
    G.contended = false;
    G.segs.clear();
    G.events.clear();
    const std::uint32_t n = static_cast<std::uint32_t>(step_flows(G).size());
    G.outstanding = n;
    for (std::uint32_t i = 0; i < n; ++i) {
        const StepFlow f = step_flows(groups[g])[i];
        start(
            *f.route, f.latency, f.size, [this, g] { group_flow_done(g); }, f.efficiency, g, i);
    }
}

void FlowNetwork::Impl::group_flow_done(std::uint32_t g) {
    Group& G = groups[g];
    check(G.outstanding > 0, "flow network: more flow completions than flows in a step");
    if (--G.outstanding > 0) return;
    if (G.keep) {
        G.keep = false;
        if (!G.contended) keep(G);
    }
    if (G.left == 0) {
        finish_group(g);
        return;
    }
    if (skip_steps && !sampling && !G.contended && can_hold(G)) {
        const Time length = sim.now() - G.launched;
        const std::uint64_t gap_ps = G.gap.count_ps(), length_ps = length.count_ps();
        const auto period =
            gap_ps <= Time::max().count_ps() - length_ps ? std::optional(gap_ps + length_ps) : std::nullopt;
        const auto total = period && *period > 0 ? checked_mul(*period, G.left) : std::nullopt;
        if (total && *total <= Time::max().count_ps() - sim.now().count_ps()) {
            std::swap(G.template_segs, G.segs);
            std::swap(G.template_events, G.events);
            G.template_length = length;
            G.period = Time::ps(*period);
            G.head = Time{};
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
    for (LinkId id : step_links(G))
        if (!links[id].flows.empty() || links[id].held != kNoGroup) return false;
    return true;
}

void FlowNetwork::Impl::hold(Group& G, std::uint32_t who) {
    for (LinkId id : step_links(G)) links[id].held = who;
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
    if (G.kept != kNoGroup) {
        const KeptStep& ks = kept[G.kept];
        for (std::size_t i = 0; i < ks.links.size(); ++i) links[ks.links[i]].bytes += k * ks.payload[i];
    } else {
        for (const StepFlow& f : G.flows)
            for (LinkId id : *f.route) links[id].bytes += k * f.size.as_double();
    }
    for (const LinkEvent& e : template_events(G)) {
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
    // Periods count from G.start - G.head (the head of the first one had
    // elapsed when the window opened).
    const std::uint64_t elapsed = (sim.now() - G.start).count_ps() + G.head.count_ps();
    const std::uint64_t period = G.period.count_ps();
    const std::uint64_t done = elapsed / period;
    const std::uint64_t into = elapsed % period;
    commit(G, done);
    skipped += done;
    const auto rest = static_cast<std::uint32_t>(G.steps - done);
    // The last whole step's end, plus the gap: the next launch.
    const Time next_launch = G.start + Time::ps(done * period) + G.gap - G.head;
    if (into == 0 || into < G.gap.count_ps()) {
        if (rest == 0) {  // the window's end is due now
            sim.schedule_after(Time{}, [this, g] { finish_group(g); });
            return;
        }
        G.left = rest - 1;
        sim.schedule_at(next_launch, [this, g] { launch_step(g); });
        return;
    }
    G.left = rest - 1;
    rebuild_step(g, next_launch, Time::ps(into) - G.gap);
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
    const auto n = static_cast<std::uint32_t>(step_flows(G).size());
    last_seg.assign(n, -1);
    {
        const auto& segs = template_segs(G);
        for (std::size_t k = 0; k < segs.size(); ++k)
            if (segs[k].off < offset) last_seg[segs[k].flow] = static_cast<std::int64_t>(k);
    }
    for (std::uint32_t i = 0; i < n; ++i) {
        const StepFlow sf = step_flows(groups[g])[i];
        const auto& route = *sf.route;
        const std::int64_t k = last_seg[i];
        const Segment* seg = k >= 0 ? &template_segs(groups[g])[static_cast<std::size_t>(k)] : nullptr;
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
    for (const LinkEvent& e : template_events(groups[g])) {
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
    for (LinkId id : step_links(groups[g])) {
        LinkState& l = links[id];
        if (!l.ff_open) continue;
        l.ff_open = false;
        l.busy_since = launched + l.ff_since;
        check(!l.flows.empty(), "flow network: a rebuilt step left a busy link without flows");
    }
    check(groups[g].outstanding > 0, "flow network: a rebuilt step has no flow left");
}

}  // namespace sim::net
