// The event queue's rare paths: new slots, cancellation, redistribution.
#include "sim/core/event_queue.h"

#include "sim/core/error.h"

#include <algorithm>
#include <bit>

namespace sim {

namespace {
// Above this many handle slots (768 KiB of callbacks) the callback table
// outgrows the core's L1 and L2, and redistribution prefetches callbacks.
constexpr std::size_t kPrefetchSlots = 1U << 14;
}  // namespace

EventQueue::EventQueue() { reserve(1024); }

void EventQueue::Bucket::reserve(std::size_t n) {
    if (n <= capacity_) return;
    Entry* bigger = new Entry[n];
    std::copy(data_, data_ + size_, bigger);
    delete[] data_;
    data_ = bigger;
    capacity_ = n;
}

void EventQueue::Bucket::release() {
    delete[] data_;
    data_ = nullptr;
    capacity_ = 0;
}

void EventQueue::Bucket::grow() { reserve(capacity_ < 8 ? 16 : capacity_ * 2); }

void EventQueue::reserve(std::size_t n) {
    callbacks_.reserve(n);
    generation_.reserve(n);
    cancelled_.reserve(n / 64 + 1);
    free_slots_.reserve(n);
}

EventId EventQueue::push_new_slot(std::uint64_t t, const Callback& cb) {
    if (t < last_) throw InternalError(fmt::format("event at {} ps pushed after the queue reached {} ps", t, last_));
    if (generation_.size() >= UINT32_MAX) throw InternalError("more than 2^32 events pending at once");
    const auto slot = static_cast<std::uint32_t>(generation_.size());
    generation_.push_back(0);
    callbacks_.emplace_back();
    if ((slot & 63) == 0) cancelled_.push_back(0);
    return place(t, slot, cb);
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

void EventQueue::drop_cancelled(std::uint64_t slot) {
    cancelled_[slot >> 6] &= ~(1ULL << (slot & 63));
    recycle(slot);
}

bool EventQueue::redistribute_lowest(std::size_t b, Time limit) {
    Bucket& from = buckets_[b];
    // The new last_ is the bucket's smallest time (cancelled entries included:
    // a cancelled minimum only makes last_ smaller than needed). Redistributing
    // moves last_ forward; only do it when that minimum may be popped now, so
    // later pushes at times >= now stay >= last_.
    const std::uint64_t new_last = std::ranges::min(from, {}, &Entry::time_ps).time_ps;
    if (new_last > limit.count_ps()) return false;
    last_ = new_last;
    unmark(b);
    // An entry that lands in level 0 is served within a few pops: fetch its
    // callback now when the table is too big to be in cache.
    const std::size_t prefetch_below = callbacks_.size() > kPrefetchSlots ? kDigitValues : 0;
    for (const Entry& e : from) {
        if (is_cancelled(e.slot)) {
            drop_cancelled(e.slot);
            --entries_;
            continue;
        }
        const std::size_t to = bucket_for(e.time_ps, new_last);  // always a lower level than b's
        if (to < prefetch_below) __builtin_prefetch(&callbacks_[e.slot]);
        if (buckets_[to].push(e)) mark(to);
    }
    from.clear();
    return true;
}

}  // namespace sim
