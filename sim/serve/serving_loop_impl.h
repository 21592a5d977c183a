// The serving event loop's state (internal to sim/serve): a replica, a
// disaggregated request's KV transfer, and the Loop that runs them on one
// sim::Simulation. Its methods live in three files along their concerns:
// serving_loop.cpp (arrivals, iterations, completion), serving_loop_pp.cpp
// (pipeline parallelism) and serving_loop_handover.cpp (disaggregated
// handover: KV transfers and landing on a decode replica).
#pragma once

#include "sim/core/simulation.h"
#include "sim/net/flow_network.h"
#include "sim/net/topology.h"
#include "sim/serve/engine_state.h"
#include "sim/serve/front_end.h"
#include "sim/serve/serving_loop.h"

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

namespace sim::serve::loop_detail {

enum class Role { both, prefill, decode };

struct Replica {
    EngineState st;
    Role role = Role::both;
    int first_gpu = 0, tp = 1;
    // Data-parallel attention: the engine's first replica and its ranks
    // (a replica on its own: itself and 1).
    std::size_t engine = 0;
    int ranks = 1;
    IterationCost* cost = nullptr;
    const KvPool* pool = nullptr;
    bool busy = false, kick_pending = false;
    bool prefix_cached = false;  // the shared prefix's blocks are held by this replica
    Time start{}, busy_time{};
    std::vector<Work> work;              // the iteration in flight
    std::deque<std::uint32_t> incoming;  // decode: handed-off requests waiting for KV blocks here
    std::deque<std::uint32_t> landed;    // decode: caches here, waiting for a place in the batch (max_batch)
    // Async scheduling: requests that arrived while the step in flight ran
    // (`deferred_now`) and while the one before it ran (`deferred_next`, for
    // the next step); Loop::schedule_step.
    std::vector<std::uint32_t> deferred_now, deferred_next;
    ReplicaStats stats;
    // Pipeline parallelism (pp > 1): up to pp batches in flight, each in a
    // slot; each stage runs one batch at a time, in the order they reach it.
    struct Slot {
        std::vector<Work> work;
        Time start{};
        bool busy = false;
        std::vector<Time> stage_time;  // its part on each stage
        Bytes send{};                  // activations each TP rank sends across a boundary
        int flows_left = 0;
    };
    std::vector<Slot> slots;
    std::vector<char> stage_busy;
    std::vector<std::vector<std::size_t>> stage_queue;  // slots waiting for the stage, in arrival order
    std::vector<std::uint32_t> held;                    // scratch: running sequences in flight
    int in_flight = 0;
    Time busy_since{};
};

// A disaggregated request's KV cache between its prefill and decode replicas.
struct Transfer {
    Time handed{}, start{};  // the decode replica has the request (its prefill's end, or its dispatch's); first byte
    std::int64_t src_blocks = 0;  // held on the prefill replica until the last byte arrives
    int flows_left = 0;
    // P2pNcclConnector: the request joins the decode engine's queue once it
    // has both the request (its dispatch) and the cache (in its buffer).
    bool at_decode = false, landed = false;
};

class Loop {
public:
    Loop(const LoopSetup& setup, const std::vector<Request>& requests, ServeResult& res);
    void run();

private:
    bool disaggregated() const { return setup_.prefill_replicas > 0; }
    // Open-loop arrivals not yet delivered (each kicks its replica).
    bool arrivals_pending() const { return !closed_ && arrived_ < requests_.size(); }
    std::size_t route(std::size_t first, std::size_t count, std::uint64_t& routed);
    void arrive(std::uint32_t id);
    void kick(std::size_t r);
    void start(std::size_t r);
    void finish(std::size_t r);
    bool schedule_work(Replica& rep);
    bool schedule_step(Replica& rep);
    void start_engine(std::size_t first);
    void finish_engine(std::size_t first);
    void settle(std::size_t r, const std::vector<Work>& work, Time started);
    void start_pp(std::size_t r);
    void enter_stage(std::size_t r, std::size_t k, int s);
    void stage_done(std::size_t r, std::size_t k, int s);
    void finish_pp(std::size_t r, std::size_t k);
    int stage_gpu(const Replica& rep, int s, int i) const;
    void complete(Replica& rep, std::uint32_t id, Time client);
    void hand_off(std::uint32_t id);
    void accept_transfers(std::size_t d);
    void start_flows(std::uint32_t id, std::size_t d);
    void at_decode(std::uint32_t id, std::size_t d);
    void receive(std::uint32_t id, std::size_t d);
    Time kv_copy_time(Replica& rep);
    // vLLM's P2pNcclConnector: the prefill pushes the cache, and the decode
    // engine keeps it in a buffer of its own until it schedules the request.
    bool pushes_cache() const {
        return disaggregated() && !setup_.prefilled && sv_.kv_connector == config::ServingSpec::KvConnector::p2p_nccl;
    }
    void flow_done(std::uint32_t id);
    void land(std::uint32_t id, std::size_t d);
    void admit_landed(std::size_t d);
    void keep_point(std::size_t r, const TimelinePoint& point);
    Time swap_time(Replica& rep);
    std::int64_t apply_prefix(std::uint32_t id);
    void cache_prefix(Replica& rep, std::uint32_t id);

    const LoopSetup& setup_;
    const config::ServingSpec& sv_;
    const std::vector<Request>& requests_;
    ServeResult& res_;
    Simulation sim_;
    std::unique_ptr<net::Topology> topo_;  // disaggregated only
    std::unique_ptr<net::FlowNetwork> net_;
    std::vector<Sequence> seqs_;
    std::vector<Replica> reps_;
    std::vector<Time> arrival_, last_token_;
    std::vector<char> in_flight_;  // pp > 1: the sequence is in a batch in flight
    std::vector<Transfer> transfers_;
    std::vector<Time> posted_until_;  // disaggregated: each GPU's worker posts transfer descriptors until then
    // Serial dispatch: each decode engine's own front end (by engine), which
    // takes a handed-over request in as the first front end takes arrivals.
    std::vector<std::unique_ptr<FrontEnd>> decode_front_;
    std::vector<std::int64_t> load_;  // route()'s scratch
    std::vector<std::uint32_t> handoffs_;
    parallel::IterationBatch batch_;
    std::vector<parallel::IterationGroup> prefills_;
    const bool closed_;
    std::int64_t prefix_blocks_ = 0;  // whole blocks of the shared prefix (0: no prefix caching)
    std::size_t released_ = 0, arrived_ = 0, done_ = 0;
    std::uint64_t routed_front_ = 0, routed_decode_ = 0;
    // The host work around the engine's steps: request intake, token
    // streaming and the host time per step (front_end.h).
    FrontEnd front_;
    // Replica 0's timeline (simulator.h says how it thins).
    std::vector<TimelinePoint> timeline_;
    std::uint64_t stride_ = 1;
    TimelinePoint last_point_;
    double batch_sum_ = 0;
};

}  // namespace sim::serve::loop_detail
