// The pending-event set: a radix heap (a monotone priority queue) ordered by
// (time, insertion sequence), so events at equal times run in the order they
// were scheduled.
//
// Why a radix heap: simulated time never goes backwards, so every new key is
// >= the last key popped. Buckets hold events by the highest bit in which
// their time differs from the last popped time; a push is O(1) and an event
// moves down at most 64 buckets in its life. Each bucket keeps its events in
// insertion order (a bucket is only refilled by redistribution while all
// lower buckets are empty, and pushes append later sequences), so bucket 0,
// the events at exactly the last popped time, is a FIFO: ties run in
// insertion order with no sequence number compared.
//
// Entries carry their callback inline, so moving an event between buckets is
// a sequential copy and popping one touches no other memory; the only side
// tables are a generation count per handle slot and a bit per slot for
// cancellation, both compact enough to stay in cache. Vectors are reused, so
// a steady-state run allocates nothing per event. (A byte-wise radix heap,
// with fewer moves per event, measured slower here: docs/performance.md.)
//
// Cancellation is by tombstone: cancel() sets the slot's bit, and the entry
// is dropped when it is next touched (popped or redistributed). pending()
// counts live events only.
#pragma once

#include "sim/core/callback.h"
#include "sim/core/units.h"

#include <array>
#include <cstdint>
#include <vector>

namespace sim {

// Handle of a scheduled event; stays valid (and harmless to cancel) after the
// event ran or was cancelled, thanks to the generation count.
struct EventId {
    std::uint32_t slot = 0;
    std::uint32_t generation = 0;
};

class EventQueue {
public:
    EventQueue();

    // `at` must not be earlier than the last popped time (InternalError).
    EventId push(Time at, Callback cb);
    // True when the event was pending and is now cancelled.
    bool cancel(EventId id);
    bool empty() const { return live_ == 0; }
    std::size_t size() const { return live_; }
    // Time of the earliest live event; the queue must not be empty.
    Time top_time();
    // Removes the earliest live event if its time is <= `limit`; returns
    // false (and changes nothing observable) otherwise.
    bool pop_until(Time limit, Time& at, Callback& out);
    void reserve(std::size_t n);

private:
    struct Entry {
        std::uint64_t time_ps;
        std::uint32_t slot;
        Callback callback;
    };
    static constexpr std::size_t kBuckets = 65;

    static std::size_t bucket_for(std::uint64_t t, std::uint64_t last);
    bool is_cancelled(std::uint32_t slot) const { return (cancelled_[slot >> 6] >> (slot & 63)) & 1U; }
    void release(std::uint32_t slot);
    // Drops cancelled entries at the front of bucket 0; true if a live one remains.
    bool front_live();
    // Index of the lowest non-empty bucket above 0, or 0 if there is none.
    std::size_t lowest_bucket() const;
    void append(std::size_t b, Entry&& e);
    // Moves bucket b's entries down around its smallest time (cancelled ones
    // included: a cancelled minimum only makes last_ smaller than needed).
    void redistribute(std::size_t b);

    std::array<std::vector<Entry>, kBuckets> buckets_;
    std::size_t head0_ = 0;       // FIFO read position in bucket 0
    std::uint64_t occupied_ = 0;  // bit b-1 set when bucket b (b >= 1) is non-empty
    std::array<std::uint64_t, kBuckets> bucket_min_{};  // smallest time in each non-empty bucket
    std::uint64_t last_ = 0;
    std::vector<std::uint32_t> generation_;  // per handle slot
    std::vector<std::uint64_t> cancelled_;   // one bit per handle slot
    std::vector<std::uint32_t> free_slots_;
    std::size_t live_ = 0;
};

}  // namespace sim
