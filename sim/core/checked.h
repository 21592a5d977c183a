// Checked integer products. Sizes read from a scenario (GPU counts,
// parallel degrees, model and GEMM dimensions) are each bounded, but their
// products are not: a wrapped product is undefined behaviour for signed
// integers and, in practice, a divisor of zero or a count that comes round to
// a plausible value. Every product of sizes goes through checked_mul, which
// says that it does not fit instead of wrapping; the caller turns that into
// an error located at the input it came from.
#pragma once

#include <concepts>
#include <optional>

namespace sim {

// a x b x ... in the type of the first factor, or nullopt when the product
// (or a partial product) does not fit it. The factors may be of any integer
// types: each step is computed exactly, then checked against T.
template <std::integral T, std::integral U, std::integral... More>
constexpr std::optional<T> checked_mul(T a, U b, More... more) {
    T product{};
    if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
    if constexpr (sizeof...(more) == 0) return product;
    else return checked_mul(product, more...);
}

}  // namespace sim
