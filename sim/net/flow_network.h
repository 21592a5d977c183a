// Flow-level network: each transfer is a flow on a route; concurrent flows
// share every directed link max-min fairly, and rates are recomputed when a
// flow starts or ends. A flow first waits its route latency, then drains at
// its fair rate. Per-link bytes and busy time are recorded for utilisation.
//
// Efficiency: a flow with efficiency e moves e payload bytes per byte of link
// capacity it holds (protocol overhead), so alone on a link it drains at
// e x bandwidth. Max-min fairness is computed on link capacity ("wire rate"):
// progressive filling raises every unfrozen flow's wire rate equally until a
// link saturates, freezes the flows crossing it, and repeats. Payload rate =
// e x wire rate. Completion times are rounded up to the picosecond.
//
// Rates are recomputed once per instant at which flows start or end, and
// only for the connected component (flows linked through shared links) that
// the change touches; flows whose rate is unchanged keep their completion
// event. The FlowNetwork must outlive the events it scheduled.
//
// Repeated steps (run_steps): a collective's phase is `repeat` barrier-
// separated steps of the same flows. A step whose flows never shared a rate
// computation with any other flow ran alone, so every later step alone runs
// the same, shifted in time: the network then skips the remaining steps as
// one window of `repeat x (gap + step)` and books their bytes and busy time
// at its end, holding the steps' links. A flow that reaches a held link, a
// query of link counters, or utilisation sampling ends the window first: the
// step in progress is rebuilt exactly from the recorded step (each flow's
// bytes left, rate and completion time) and runs on as ordinary flows.
// docs/network-model.md, "Repeated steps", gives the cost and the exactness
// argument.
//
// Reused steps (run_steps with `reuse`): a step that ran alone is also kept
// as a template for later calls with the same flows (same routes, latencies,
// sizes, efficiencies): such a call whose links are idle opens its window at
// once, first step included. Callers ask for it where identical steps recur
// many times (an MoE layer's dispatch and combine, docs/moe.md section 3d).
#pragma once

#include "sim/core/callback.h"
#include "sim/core/simulation.h"
#include "sim/net/topology.h"

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace sim::net {

using FlowId = std::uint32_t;

// Instantaneous utilisation of each link class (used wire bandwidth over the
// class's total capacity), from a rate change on.
struct ClassSample {
    Time at;
    std::array<double, kLinkClassCount> utilization{};
};

class FlowNetwork {
public:
    FlowNetwork(Simulation& sim, const Topology& topo);
    ~FlowNetwork();

    // Starts a transfer of `size` from GPU `src` to GPU `dst`; `on_done` runs
    // when the last byte arrives. `efficiency` (0, 1] scales the bandwidth the
    // flow can use on each link (protocol efficiency, e.g. NCCL's).
    FlowId start(int src, int dst, Bytes size, Callback on_done, double efficiency = 1.0);
    // Same on an explicit list of links (e.g. a GPU's link up to its NVSwitch);
    // the flow waits the sum of their latencies. `links` must outlive the flow.
    FlowId start_on(const std::vector<LinkId>& links, Bytes size, Callback on_done, double efficiency = 1.0);

    // One flow of a repeated step: its links (which must outlive the steps),
    // the latency it waits first, its payload and efficiency.
    struct StepFlow {
        const std::vector<LinkId>* route = nullptr;
        Time latency;
        Bytes size;
        double efficiency = 1.0;
    };
    // Runs `repeat` >= 1 steps of `flows`: the first now, each later one
    // `gap` after the previous step's last flow ended; `on_done` runs when
    // the last step ends. Same times as starting each step's flows by hand.
    // `reuse`: keep a step that ran alone as a template for later calls with
    // the same flows, and replay one kept before (see above).
    //
    // `memo` (with reuse; may be null): the caller's record of this flow
    // list's kept-step lookup, so that a call repeated many times with the
    // same list skips hashing and comparing its flows, O(flows), and costs
    // O(1) until a template is kept anywhere (at most kMaxKeptSteps times a
    // run). The lookup's answer is the one the comparison would give. A memo
    // serves one network and one list, which must not change while the memo
    // lives (the collective engine's kept plans).
    struct StepMemo {
        const void* network = nullptr;                      // the network it was filled by
        std::uint64_t hash = 0;                             // the list's key hash
        std::size_t kept_count = 0;                         // templates kept when `kept` was looked up
        std::uint32_t kept = 0;                             // the kept template's index, or `none`
        static constexpr std::uint32_t none = 0xffffffffu;  // no kept template matched
    };
    void run_steps(const std::vector<StepFlow>& flows, std::uint32_t repeat, Time gap, Callback on_done,
                   bool reuse = false, StepMemo* memo = nullptr);
    // Off: every step runs flow by flow (tests compare both ways).
    void set_skip_repeated_steps(bool on);
    // How many steps were skipped inside windows, and windows ended early.
    std::uint64_t steps_skipped() const;
    std::uint64_t windows_split() const;
    // How many reused steps opened their window from a kept template, and
    // how many templates are kept.
    std::uint64_t steps_reused() const;
    std::size_t templates_kept() const;
    // How many reused calls looked their flows up by hashing and comparing
    // them (every call without a memo; with one, only after a new template).
    std::uint64_t kept_lookups() const;

    std::size_t active_flows() const;
    // Bytes carried so far by each link, and time each link had at least one flow.
    double link_bytes(LinkId id) const;
    Time link_busy_time(LinkId id) const;
    // Bytes and busy time summed over the links of a class.
    double class_bytes(LinkClass c) const;
    // Average utilisation of the class's links over [0, horizon]: carried
    // bytes / (bandwidth x horizon), averaged over links that carried anything.
    double class_utilization(LinkClass c, Time horizon) const;
    // Largest rate ever assigned to a link divided by its capacity (an
    // invariant: never above 1 + 1e-9).
    double max_link_load() const;
    // Records a ClassSample whenever rates change (for trace counters; off by default).
    void record_class_utilization(bool on);
    const std::vector<ClassSample>& class_utilization_samples() const;
    double link_max_load(LinkId id) const;
    // How many times the fair shares were recomputed (one per batch of
    // starts/ends at the same instant) and how many flows that touched.
    std::uint64_t recomputations() const;
    std::uint64_t flows_rerated() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace sim::net
