// Radix heap of (time, insertion order) with inline callbacks.
#include "sim/core/event_queue.h"

#include "sim/core/error.h"

#include <bit>

namespace sim {

EventQueue::EventQueue() { reserve(1024); }

void EventQueue::reserve(std::size_t n) {
    buckets_[0].reserve(n);
    generation_.reserve(n);
    cancelled_.reserve(n / 64 + 1);
    free_slots_.reserve(n);
}

std::size_t EventQueue::bucket_for(std::uint64_t t, std::uint64_t last) {
    const std::uint64_t diff = t ^ last;
    return diff == 0 ? 0 : 64 - static_cast<std::size_t>(std::countl_zero(diff));
}

EventId EventQueue::push(Time at, Callback cb) {
    const std::uint64_t t = at.count_ps();
    if (t < last_)
        throw InternalError(fmt::format("event at {} ps pushed after the queue reached {} ps", t, last_));
    std::uint32_t slot;
    if (!free_slots_.empty()) {
        slot = free_slots_.back();
        free_slots_.pop_back();
    } else {
        if (generation_.size() >= UINT32_MAX) throw InternalError("more than 2^32 events pending at once");
        slot = static_cast<std::uint32_t>(generation_.size());
        generation_.push_back(0);
        if ((slot & 63) == 0) cancelled_.push_back(0);
    }
    append(bucket_for(t, last_), Entry{t, slot, cb});
    ++live_;
    return EventId{slot, generation_[slot]};
}

bool EventQueue::cancel(EventId id) {
    if (id.slot >= generation_.size()) return false;
    if (generation_[id.slot] != id.generation || is_cancelled(id.slot)) return false;
    // A slot whose event already ran has a newer generation, so reaching here
    // means the event is still queued.
    cancelled_[id.slot >> 6] |= 1ULL << (id.slot & 63);
    --live_;
    return true;
}

void EventQueue::release(std::uint32_t slot) {
    cancelled_[slot >> 6] &= ~(1ULL << (slot & 63));
    ++generation_[slot];
    free_slots_.push_back(slot);
}

bool EventQueue::front_live() {
    auto& b0 = buckets_[0];
    while (head0_ < b0.size()) {
        const std::uint32_t slot = b0[head0_].slot;
        if (!is_cancelled(slot)) return true;
        release(slot);
        ++head0_;
    }
    b0.clear();
    head0_ = 0;
    return false;
}

std::size_t EventQueue::lowest_bucket() const {
    return occupied_ == 0 ? 0 : static_cast<std::size_t>(std::countr_zero(occupied_)) + 1;
}

void EventQueue::append(std::size_t b, Entry&& e) {
    if (b > 0) {
        const std::uint64_t bit = 1ULL << (b - 1);
        if (!(occupied_ & bit) || e.time_ps < bucket_min_[b]) bucket_min_[b] = e.time_ps;
        occupied_ |= bit;
    }
    buckets_[b].push_back(std::move(e));
}

void EventQueue::redistribute(std::size_t b) {
    last_ = bucket_min_[b];
    occupied_ &= ~(1ULL << (b - 1));
    auto& v = buckets_[b];
    for (Entry& e : v) {
        if (is_cancelled(e.slot)) {
            release(e.slot);
            continue;
        }
        append(bucket_for(e.time_ps, last_), std::move(e));  // always a lower bucket than b
    }
    v.clear();
}

Time EventQueue::top_time() {
    check(live_ > 0, "top_time() on an empty event queue");
    for (;;) {
        if (front_live()) return Time::ps(buckets_[0][head0_].time_ps);
        const std::size_t b = lowest_bucket();
        check(b != 0, "event queue lost track of a live event");
        // Scan without moving anything: last_ may only advance on a pop.
        std::uint64_t t = UINT64_MAX;
        bool any = false;
        for (const Entry& e : buckets_[b])
            if (!is_cancelled(e.slot) && e.time_ps < t) t = e.time_ps, any = true;
        if (any) return Time::ps(t);
        redistribute(b);  // all cancelled: dropping them is safe
    }
}

bool EventQueue::pop_until(Time limit, Time& at, Callback& out) {
    if (live_ == 0) return false;
    while (!front_live()) {
        const std::size_t b = lowest_bucket();
        check(b != 0, "event queue lost track of a live event");
        // Redistributing moves last_ forward to the bucket's minimum; only do
        // it when that minimum may be popped now, so later pushes at times
        // >= now stay >= last_.
        if (bucket_min_[b] > limit.count_ps()) return false;
        redistribute(b);
    }
    Entry& e = buckets_[0][head0_];
    if (e.time_ps > limit.count_ps()) return false;
    ++head0_;
    out = e.callback;
    release(e.slot);
    --live_;
    at = Time::ps(e.time_ps);
    return true;
}

}  // namespace sim
