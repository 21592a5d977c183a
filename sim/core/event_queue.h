// The pending-event set: a radix heap (a monotone priority queue) with 8-bit
// digits, ordered by (time, insertion sequence), so events at equal times run
// in the order they were scheduled.
//
// Why a radix heap: simulated time never goes backwards, so every new key is
// >= the last key popped (`last_`). An event's bucket is named by the highest
// 8-bit digit in which its time differs from `last_` (the level) and by its
// own value in that digit: 8 levels of 256 buckets, numbered 256 * level +
// digit, so that every event in a lower-numbered bucket is earlier than every
// event in a higher one. An event equal to `last_` gets level 0 and last_'s
// own low digit, a bucket no other event can reach (a level-0 event differs
// from last_ in the low digit and is later), so the lowest non-empty bucket
// (two count-trailing-zeros over an occupancy bitmap and its summary word) is
// always the next to serve:
//   - a level-0 bucket holds events of one time only: it is served in place,
//     as a FIFO;
//   - a higher bucket holding one event is served in place too;
//   - any other bucket is redistributed around its smallest time, and its
//     events move to lower levels.
// A push is O(1); an event moves at most 7 times in its life, and once or
// twice for a spread of a few microseconds (docs/performance.md has the
// measurements behind the digit width).
//
// Each bucket keeps its events in insertion order (a bucket is only refilled
// by redistribution while all lower buckets are empty, and pushes append later
// sequences), so ties run in insertion order with no sequence number compared.
//
// Entries are 16 bytes (time, slot); callbacks live in a table indexed by
// slot, so a move copies 16 bytes. Slots are reused last-freed-first, so at
// steady state a pop and the push its callback makes touch the same table
// entry; when the table outgrows the caches, an event's callback is
// prefetched as it moves to level 0, a few pops before it runs, and a pop
// from a level-0 bucket requests the next entry's callback. Arrays are
// reused and a bucket gives back only an unusually large one, so a
// steady-state run allocates nothing per event.
//
// push() and pop_until() are defined here, inline, because they are the
// engine's per-event path; the rare paths (new slots, redistribution, errors)
// are out of line.
//
// Cancellation is by tombstone: cancel() sets the slot's bit, and the entry
// is dropped when it is next touched (served or redistributed). size()
// counts live events only.
#pragma once

#include "sim/core/callback.h"
#include "sim/core/units.h"

#include <array>
#include <bit>
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
    EventId push(Time at, const Callback& cb) {
        const std::uint64_t t = at.count_ps();
        if (t < last_ || free_slots_.empty()) [[unlikely]]
            return push_new_slot(t, cb);
        const std::uint32_t slot = free_slots_.back();
        free_slots_.pop_back();
        return place(t, slot, cb);
    }
    // True when the event was pending and is now cancelled.
    bool cancel(EventId id);
    bool empty() const { return live_ == 0; }
    std::size_t size() const { return live_; }
    // Removes the earliest live event if its time is <= `limit`; returns
    // false (and changes nothing observable) otherwise.
    bool pop_until(Time limit, Time& at, Callback& out) {
        for (;;) {
            if (entries_ == 0) return false;
            const std::size_t b = lowest_bucket();
            Bucket& bucket = buckets_[b];
            std::uint64_t t;
            std::uint64_t slot;
            if (b < kDigitValues) {
                // Level 0: every entry has the same time, last_ with its low digit replaced.
                t = (last_ & ~std::uint64_t{kDigitValues - 1}) | b;
                if (t > limit.count_ps()) return false;
                slot = bucket[head_++].slot;
                if (head_ == bucket.size()) {
                    bucket.clear();
                    unmark(b);
                    head_ = 0;
                } else {
                    // The next pop serves the next entry: its callback, often
                    // out of cache in a large table, is fetched while this
                    // event runs.
                    __builtin_prefetch(&callbacks_[bucket[head_].slot]);
                }
            } else if (bucket.size() == 1) {
                // A lone entry is the earliest: serve it where it is.
                t = bucket[0].time_ps;
                if (t > limit.count_ps()) return false;
                slot = bucket[0].slot;
                bucket.clear();
                unmark(b);
            } else {
                if (!redistribute_lowest(b, limit)) return false;
                continue;
            }
            last_ = t;
            --entries_;
            if (is_cancelled(slot)) [[unlikely]] {
                drop_cancelled(slot);
                continue;
            }
            out = callbacks_[slot];
            recycle(slot);
            --live_;
            at = Time::ps(t);
            return true;
        }
    }
    void reserve(std::size_t n);

private:
    struct Entry {
        std::uint64_t time_ps;
        std::uint64_t slot;
    };

    // A growable array of entries whose append is a store and an increment;
    // growth (rare once a run reaches its steady population) is out of line.
    class Bucket {
    public:
        Bucket() = default;
        Bucket(const Bucket&) = delete;
        Bucket& operator=(const Bucket&) = delete;
        ~Bucket() { delete[] data_; }
        // True when the bucket was empty before.
        bool push(const Entry& e) {
            if (size_ == capacity_) [[unlikely]]
                grow();
            data_[size_++] = e;
            return size_ == 1;
        }
        std::size_t size() const { return size_; }
        // Empties the bucket; a large array is given back, so the memory kept
        // stays near the population whatever the history of each bucket.
        void clear() {
            size_ = 0;
            if (capacity_ > kKeepEntries) [[unlikely]]
                release();
        }
        void reserve(std::size_t n);
        const Entry& operator[](std::size_t i) const { return data_[i]; }
        const Entry* begin() const { return data_; }
        const Entry* end() const { return data_ + size_; }

    private:
        static constexpr std::size_t kKeepEntries = 1024;
        void grow();
        void release();
        Entry* data_ = nullptr;
        std::size_t size_ = 0;
        std::size_t capacity_ = 0;
    };

    static constexpr unsigned kDigitBits = 8;
    static constexpr std::size_t kDigitValues = 1U << kDigitBits;
    static constexpr std::size_t kLevels = (64 + kDigitBits - 1) / kDigitBits;
    static constexpr std::size_t kBuckets = kLevels * kDigitValues;
    static constexpr std::size_t kOccupancyWords = (kBuckets + 63) / 64;
    static_assert(kOccupancyWords <= 64, "the summary word has a bit per occupancy word");

    static std::size_t bucket_for(std::uint64_t t, std::uint64_t last) {
        // t == last gives level 0 and last's own low digit.
        const auto level = static_cast<unsigned>(63 - std::countl_zero((t ^ last) | 1)) / kDigitBits;
        return level * kDigitValues + ((t >> (level * kDigitBits)) & (kDigitValues - 1));
    }
    // The rare paths of push: a time before last_ (an error) or no free slot.
    EventId push_new_slot(std::uint64_t t, const Callback& cb);
    EventId place(std::uint64_t t, std::uint32_t slot, const Callback& cb) {
        callbacks_[slot] = cb;
        const std::size_t b = bucket_for(t, last_);
        if (buckets_[b].push(Entry{t, slot})) mark(b);
        ++entries_;
        ++live_;
        return EventId{slot, generation_[slot]};
    }
    bool is_cancelled(std::uint64_t slot) const { return (cancelled_[slot >> 6] >> (slot & 63)) & 1U; }
    void recycle(std::uint64_t slot) {
        ++generation_[slot];
        free_slots_.push_back(static_cast<std::uint32_t>(slot));
    }
    // Forgets a cancelled entry already taken out of its bucket.
    void drop_cancelled(std::uint64_t slot);
    // Redistributes bucket b (above level 0) if its smallest time is <= limit;
    // false otherwise.
    bool redistribute_lowest(std::size_t b, Time limit);
    // The lowest non-empty bucket; the queue must hold at least one entry.
    std::size_t lowest_bucket() const {
        const auto w = static_cast<std::size_t>(std::countr_zero(summary_));
        return w * 64 + static_cast<std::size_t>(std::countr_zero(occupied_[w]));
    }
    void mark(std::size_t b) {
        occupied_[b >> 6] |= 1ULL << (b & 63);
        summary_ |= 1ULL << (b >> 6);
    }
    void unmark(std::size_t b) {
        occupied_[b >> 6] &= ~(1ULL << (b & 63));
        if (occupied_[b >> 6] == 0) summary_ &= ~(1ULL << (b >> 6));
    }

    std::array<Bucket, kBuckets> buckets_;
    std::size_t head_ = 0;                                   // FIFO read position in the level-0 bucket being served
    std::array<std::uint64_t, kOccupancyWords> occupied_{};  // bit b set when bucket b is non-empty
    std::uint64_t summary_ = 0;                              // bit w set when occupied_[w] != 0
    std::uint64_t last_ = 0;
    std::vector<Callback> callbacks_;        // per handle slot
    std::vector<std::uint32_t> generation_;  // per handle slot
    std::vector<std::uint64_t> cancelled_;   // one bit per handle slot
    std::vector<std::uint32_t> free_slots_;
    std::size_t entries_ = 0;  // queued entries, cancelled ones included
    std::size_t live_ = 0;
};

}  // namespace sim
