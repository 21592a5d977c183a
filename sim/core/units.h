// Strong types for the quantities a simulator mixes up most easily: simulated
// time (integer picoseconds), data sizes (bytes), bandwidths (bytes per second)
// and work (floating-point operations). Conversions happen here, at the edges,
// and the rounding rule is written down next to each conversion.
#pragma once

#include <compare>
#include <cstdint>
#include <limits>
#include <string>

namespace sim {

// Simulated time or duration, an integer count of picoseconds. 2^64 ps is about
// 213 days of simulated time. Arithmetic is checked: overflow throws
// InternalError rather than wrapping silently.
class Time {
public:
    constexpr Time() = default;
    static constexpr Time ps(std::uint64_t v) { return Time(v); }
    static constexpr Time ns(std::uint64_t v) { return Time(v * 1000ULL); }
    static constexpr Time us(std::uint64_t v) { return Time(v * 1000000ULL); }
    static constexpr Time max() { return Time(std::numeric_limits<std::uint64_t>::max()); }
    // Seconds -> picoseconds, rounded up: a modelled duration is never shortened.
    static Time from_seconds_ceil(double seconds);

    constexpr std::uint64_t count_ps() const { return ps_; }
    constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }
    constexpr double ms() const { return static_cast<double>(ps_) * 1e-9; }
    constexpr double us_f() const { return static_cast<double>(ps_) * 1e-6; }

    Time operator+(Time o) const {
        if (ps_ > std::numeric_limits<std::uint64_t>::max() - o.ps_) [[unlikely]]
            overflowed();
        return Time(ps_ + o.ps_);
    }
    Time operator-(Time o) const {  // throws when the result would be negative
        if (o.ps_ > ps_) [[unlikely]]
            negative(o);
        return Time(ps_ - o.ps_);
    }
    Time& operator+=(Time o) { return *this = *this + o; }
    constexpr auto operator<=>(const Time&) const = default;

private:
    constexpr explicit Time(std::uint64_t v) : ps_(v) {}
    [[noreturn]] static void overflowed();
    [[noreturn]] void negative(Time o) const;
    std::uint64_t ps_ = 0;
};

// A size in bytes. Fractional sizes do not exist in the hardware; callers that
// derive sizes from formulas round up with Bytes::ceil. Addition is checked
// like Time's: a sum past 2^64 bytes throws InternalError rather than wrapping
// to a small size (which would pass a capacity check).
struct Bytes {
    std::uint64_t value = 0;
    static Bytes ceil(double b);
    constexpr double as_double() const { return static_cast<double>(value); }
    constexpr auto operator<=>(const Bytes&) const = default;
    Bytes operator+(Bytes o) const {
        if (value > std::numeric_limits<std::uint64_t>::max() - o.value) [[unlikely]]
            overflowed(o);
        return Bytes{value + o.value};
    }
    Bytes& operator+=(Bytes o) { return *this = *this + o; }
    [[noreturn]] void overflowed(Bytes o) const;
};

// Bandwidth in bytes per second (GB/s = 1e9 B/s; Gb/s = 1e9/8 B/s).
struct Bandwidth {
    double bytes_per_s = 0.0;
    constexpr auto operator<=>(const Bandwidth&) const = default;
};

// A count of floating-point (or integer tensor) operations.
struct Flops {
    double value = 0.0;
    constexpr auto operator<=>(const Flops&) const = default;
};

// Throughput of a compute unit, in operations per second.
struct FlopRate {
    double per_s = 0.0;
};

// Time to move `size` at `bw`, rounded up to the next picosecond. A zero
// bandwidth is a modelling error (InternalError), not an infinite time.
Time transfer_time(Bytes size, Bandwidth bw);
// Time to do `work` at `rate`, rounded up to the next picosecond.
Time compute_time(Flops work, FlopRate rate);

// Human-readable renderings for reports and messages ("1.50 ms", "80.0 GB").
std::string format_time(Time t);
std::string format_bytes(double bytes);

}  // namespace sim
