// The state a serving scheduler sees and changes: every request's progress
// (tokens in the KV cache, tokens generated), the waiting queue, the running
// set, and the paged KV block manager. The rules that every scheduler shares
// (allocating blocks for the tokens an iteration feeds, preemption by
// recompute) live here so that the schedulers differ only in their policy.
#pragma once

#include "sim/serve/kv_blocks.h"

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace sim::serve {

// One request inside the engine.
struct Sequence {
    std::int64_t prompt = 0, output = 0;  // target lengths (tokens)
    std::int64_t computed = 0;            // tokens whose K/V are in the cache
    std::int64_t generated = 0;           // output tokens sampled so far
    std::int64_t blocks = 0;              // KV blocks held
    std::uint32_t preemptions = 0;
    bool swapped = false;  // its cache (computed tokens) is in host memory
    // The first of its blocks are the replica's cached shared prefix: counted
    // in `blocks`, owned by the prefix cache (never returned to the pool).
    std::int64_t shared_blocks = 0;
    std::uint64_t admitted = 0;  // admission stamp: the running set's order
    // Disaggregated decode with vLLM's P2pNcclConnector: the prompt tokens
    // (all but the last) whose K and V wait in the engine's receive buffer,
    // outside the paged pool, for as long as the request lives; a preemption
    // by recompute keeps them (the connector loads them again) and `load`
    // marks that its next step copies them into its blocks.
    std::int64_t received = 0;
    bool load = false;
    // Known tokens not yet fed through the model: the prompt and every
    // generated token, less what the cache holds. A decode step feeds 1.
    std::int64_t unfed() const { return prompt + generated - computed; }
    // Still in prefill (first pass, or the recompute after a preemption).
    bool prefilling() const { return generated == 0 || unfed() > 1; }
};

// One sequence's share of an iteration.
struct Work {
    std::uint32_t seq = 0;
    std::int64_t tokens = 0;
};

struct EngineState {
    std::span<Sequence> seqs;            // by request index (shared by the replicas of a run)
    std::deque<std::uint32_t> waiting;   // arrival order; preempted requests return to the front
    std::vector<std::uint32_t> running;  // admission order
    BlockManager kv;
    std::int64_t max_batch = 1;   // sequences per iteration
    std::int64_t max_tokens = 1;  // tokens fed per iteration
    std::uint64_t preemptions = 0;
    std::uint64_t admissions = 0;  // stamps handed out by admit_front
    // Tokens this engine still has to feed for the requests it holds,
    // sum of unfed + (output - generated) (the router's load measure): the
    // serving loop adds a request's share when it is routed here and takes
    // off what each iteration feeds; a preemption adds back what it drops.
    std::int64_t outstanding = 0;
    // Preemption by swap instead of recompute, and the tokens of cache moved
    // out to host memory and back in since the serving loop last took them.
    bool swap = false;
    std::int64_t swapped_out = 0, swapped_in = 0;

    // Allocates the blocks `seq` needs to hold `tokens` more tokens; false
    // (nothing allocated) when the pool has too few free blocks. A swapped
    // sequence's first allocation also brings its cache back (swapped_in).
    bool grow(std::uint32_t seq, std::int64_t tokens);
    // Preemption: the latest admitted running sequence loses its blocks and
    // goes back to the front of the queue. By recompute its cache is dropped
    // and its prompt and generated tokens are prefilled again when it is
    // readmitted, less the tokens it holds in a receive buffer (`received`,
    // loaded again instead); by swap its cache goes to host memory (swapped_out) and
    // comes back when it is readmitted. Returns the sequence preempted.
    std::uint32_t preempt_latest();
    // A queue that nothing running will ever drain: with no sequence
    // running, the front waits for blocks that queued sequences hold (a
    // disaggregated decode engine's received caches, queued for their
    // first-token step). The latest queued holder drops its cache, as
    // preemption by recompute does, so that the front can run. False when
    // no queued sequence holds blocks of its own.
    bool drop_latest_queued_cache();
    // Makes room for one more token of every running decode, preempting the
    // latest admitted sequences while blocks are short; appends a work item
    // of 1 token for each decode that stays.
    void schedule_decodes(std::vector<Work>& out);
    // Moves the front of the queue to the running set.
    void admit_front();
};

}  // namespace sim::serve
