// Max-min fair flows over the topology's directed links (see flow_network.h).
//
// Each flow slot keeps its payload bytes left at `updated` and its payload
// rate; bytes move lazily, and are booked on the links whenever the rate
// changes or the flow ends. Slots, per-link flow lists and the filling
// scratch are reused, so a steady-state run allocates nothing per flow.
#include "sim/net/flow_network_impl.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>

namespace sim::net {

using namespace flow_detail;

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
            if (records(f.group))
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
            if (records(f.group))
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
    for (std::size_t c = 0; c < kLinkClassCount; ++c)
        sample.utilization[c] = capacity[c] > 0 ? used[c] / capacity[c] : 0.0;
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
    // computation with another flow: when the batch mixes flows, each
    // connected component is checked.
    const std::uint32_t first_group = flows[comp_flows.front()].group;
    for (std::uint32_t fs : comp_flows)
        if (flows[fs].group != first_group) {
            mark_contended();
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
        if (records(f.group)) {
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

FlowNetwork::FlowNetwork(Simulation& sim, const Topology& topo) : impl_(std::make_unique<Impl>(sim, topo)) {}
FlowNetwork::~FlowNetwork() = default;

FlowId FlowNetwork::start(int src, int dst, Bytes size, Callback on_done, double efficiency) {
    Time latency;
    const std::vector<LinkId>& links = impl_->topo.route(src, dst, latency);
    return impl_->start(links, latency, size, on_done, efficiency);
}

FlowId FlowNetwork::start_on(const std::vector<LinkId>& links, Bytes size, Callback on_done, double efficiency) {
    Time latency;
    for (LinkId id : links) latency += impl_->topo.link(id).latency;
    return impl_->start(links, latency, size, on_done, efficiency);
}

void FlowNetwork::run_steps(const std::vector<StepFlow>& flows, std::uint32_t repeat, Time gap, Callback on_done,
                            bool reuse, StepMemo* memo) {
    impl_->run_steps(flows, repeat, gap, on_done, reuse, memo);
}
void FlowNetwork::set_skip_repeated_steps(bool on) {
    impl_->settle();
    impl_->skip_steps = on;
}
std::uint64_t FlowNetwork::steps_skipped() const { return impl_->skipped; }
std::uint64_t FlowNetwork::windows_split() const { return impl_->splits; }
std::uint64_t FlowNetwork::steps_reused() const { return impl_->reused; }
std::size_t FlowNetwork::templates_kept() const { return impl_->kept.size(); }
std::uint64_t FlowNetwork::kept_lookups() const { return impl_->lookups; }

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
