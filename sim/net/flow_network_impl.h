// The flow network's state, shared by flow_network.cpp (flows and max-min
// rates) and flow_steps.cpp (repeated steps); nothing outside sim/net
// includes it.
#pragma once

#include "sim/net/flow_network.h"

#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

namespace sim::net {

namespace flow_detail {

enum class FlowState : std::uint8_t { free, latency, active };

constexpr std::uint32_t kNoGroup = std::numeric_limits<std::uint32_t>::max();

struct FlowSlot {
    const std::vector<LinkId>* route = nullptr;
    std::vector<std::uint32_t> pos;  // index of this flow in each route link's list
    double remaining = 0.0;          // payload bytes left at `updated`
    double rate = 0.0;               // payload bytes per second
    double efficiency = 1.0;
    double new_wire = 0.0;  // filling scratch: < 0 while unfrozen
    Time updated;
    EventId done_event;
    bool has_event = false;
    Callback on_done;
    std::uint32_t generation = 0;
    std::uint32_t mark = 0;
    std::uint32_t label = 0;         // component labelling scratch (mark_contended)
    std::uint32_t group = kNoGroup;  //, or the repeated-steps group it belongs to
    std::uint32_t index = 0;         // its position in the group's flows
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
    std::uint32_t label = 0;        // component labelling scratch (mark_contended)
    Time ff_since;                  // scratch: busy-since offset while replaying link events
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
    bool contended = false;  // a flow of the step shared a rate computation with another
    bool live = false;
    std::vector<Segment> segs, template_segs;
    std::vector<LinkEvent> events, template_events;
    Time template_length;
    bool reuse = false;             // replay a kept template, keep one (run_steps)
    std::uint32_t kept = kNoGroup;  // the kept step it replays: flows, links and template are read there
    bool keep = false;              // the step in progress becomes a kept template if it runs alone
    // window of skipped steps: `steps` steps of `period` from `start`, less
    // `head` of the first period already elapsed when it opened (a reused
    // template's window opens at its first launch: head = gap)
    bool window = false;
    Time start, period, head;
    std::uint32_t steps = 0;
    EventId end_event;
};

// A step kept for reuse (run_steps with reuse): its flows (the key), the
// distinct links of their routes, and the template recorded when it ran alone.
struct KeptStep {
    std::vector<FlowNetwork::StepFlow> flows;
    std::vector<LinkId> links;    // sorted
    std::vector<double> payload;  // one step's bytes on each of `links`
    std::vector<Segment> segs;
    std::vector<LinkEvent> events;
    Time length;
};

// Bounds on the kept templates: a run whose reused steps are all different
// stops keeping new ones there (the first ones kept stay, so the choice is
// deterministic).
constexpr std::size_t kMaxKeptSteps = 4096;
constexpr std::size_t kMaxKeptFlows = std::size_t{1} << 22;

// Relative change below which a recomputed rate counts as unchanged (keeps
// completion events, and hand-computable times, stable under float noise).
constexpr double kRateTolerance = 1e-12;

}  // namespace flow_detail

struct FlowNetwork::Impl {
    using FlowSlot = flow_detail::FlowSlot;
    using LinkState = flow_detail::LinkState;
    using Group = flow_detail::Group;
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
    std::vector<flow_detail::KeptStep> kept;
    std::unordered_multimap<std::uint64_t, std::uint32_t> kept_index;  // hash of the flows -> kept
    std::size_t kept_flows = 0;
    std::uint64_t reused = 0;
    std::uint64_t lookups = 0;           // find_kept calls
    std::vector<std::int64_t> last_seg;  // split scratch
    std::vector<std::uint32_t> bfs;      // mark_contended scratch
    std::uint32_t label_epoch = 0;
    bool skip_steps = true;
    std::size_t windows_open = 0;
    std::uint64_t skipped = 0;
    std::uint64_t splits = 0;

    Impl(Simulation& s, const Topology& t) : sim(s), topo(t), links(t.link_count()) {
        for (LinkId id = 0; id < links.size(); ++id) links[id].capacity = t.link(id).bandwidth.bytes_per_s;
    }

    FlowId start(const std::vector<LinkId>& route, Time latency, Bytes size, Callback on_done, double efficiency,
                 std::uint32_t group = flow_detail::kNoGroup, std::uint32_t index = 0);
    std::uint32_t alloc_slot();
    void schedule_activation(std::uint32_t slot, Time at);
    void schedule_completion(std::uint32_t slot, Time at);
    void run_steps(const std::vector<StepFlow>& step, std::uint32_t repeat, Time gap, Callback on_done, bool reuse,
                   StepMemo* memo);
    void launch_step(std::uint32_t g);
    static std::uint64_t step_hash(const std::vector<StepFlow>& step);
    // The kept template of `step`, or nullptr.
    const flow_detail::KeptStep* find_kept(const std::vector<StepFlow>& step, std::uint64_t hash) const;
    // find_kept's answer for `step`, through `memo` when given (run_steps).
    const flow_detail::KeptStep* lookup_kept(const std::vector<StepFlow>& step, StepMemo* memo);
    void keep(const Group& g);
    // A group's flows, distinct links and template: its own, or those of the
    // kept step it replays.
    const std::vector<StepFlow>& step_flows(const Group& g) const {
        return g.kept == flow_detail::kNoGroup ? g.flows : kept[g.kept].flows;
    }
    const std::vector<LinkId>& step_links(const Group& g) const {
        return g.kept == flow_detail::kNoGroup ? g.links : kept[g.kept].links;
    }
    const std::vector<flow_detail::Segment>& template_segs(const Group& g) const {
        return g.kept == flow_detail::kNoGroup ? g.template_segs : kept[g.kept].segs;
    }
    const std::vector<flow_detail::LinkEvent>& template_events(const Group& g) const {
        return g.kept == flow_detail::kNoGroup ? g.template_events : kept[g.kept].events;
    }
    // Whether the step in progress of `group` records its rates and link
    // events (a later step may repeat it, or it may be kept).
    bool records(std::uint32_t group) const {
        return group != flow_detail::kNoGroup && (groups[group].left > 0 || groups[group].keep);
    }
    void group_flow_done(std::uint32_t g);
    void finish_group(std::uint32_t g);
    bool can_hold(const Group& g) const;
    void open_window(std::uint32_t g, std::uint64_t total_ps);
    void close_window(std::uint32_t g);
    void hold(Group& g, std::uint32_t who);
    void commit(Group& g, std::uint64_t steps);
    void split(std::uint32_t g);
    void rebuild_step(std::uint32_t g, Time launched, Time offset);
    void mark_contended();
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

}  // namespace sim::net
