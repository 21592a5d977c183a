// A fixed-size, allocation-free callable for events. Captures must be
// trivially copyable (pointers, indices, small values) and fit in
// kCallbackBytes; heavier state belongs in the component, and the event
// carries its index. This is what keeps the engine's hot path free of heap
// allocation.
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace sim {

inline constexpr std::size_t kCallbackBytes = 40;

class Callback {
public:
    Callback() = default;

    template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Callback>>>
    Callback(F&& f) {  // NOLINT(google-explicit-constructor): lambdas convert implicitly by design
        using Fn = std::decay_t<F>;
        static_assert(sizeof(Fn) <= kCallbackBytes, "event callback captures too much; capture an index instead");
        static_assert(std::is_trivially_copyable_v<Fn> && std::is_trivially_destructible_v<Fn>,
                      "event callbacks must capture only trivially copyable values");
        static_assert(alignof(Fn) <= alignof(std::max_align_t), "over-aligned callback");
        ::new (static_cast<void*>(storage_)) Fn(std::forward<F>(f));
        invoke_ = [](void* p) { (*static_cast<Fn*>(p))(); };
    }

    void operator()() { invoke_(storage_); }
    explicit operator bool() const { return invoke_ != nullptr; }

private:
    alignas(std::max_align_t) unsigned char storage_[kCallbackBytes];  // set by the converting constructor
    void (*invoke_)(void*) = nullptr;
};

}  // namespace sim
