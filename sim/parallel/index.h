// Tables indexed by a pipeline stage, virtual stage, model chunk or
// micro-batch number. Those numbers are ints on purpose: they take part in
// signed arithmetic (vs - 1, (s + p - 1) % p, chunk * p + s) and are ints in
// Task and ScheduleItem. The one conversion to a vector index is here,
// checked, instead of a static_cast at every subscript of the plan builder.
#pragma once

#include "sim/core/error.h"

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace sim::parallel {

// A stage, chunk or micro-batch number as an index; a negative one is a bug.
inline std::size_t as_index(int i) {
    if (i < 0) throw InternalError("negative stage or micro-batch index " + std::to_string(i));
    return static_cast<std::size_t>(i);
}

// A vector with one element per stage (or virtual stage, chunk,
// micro-batch), subscripted by that number.
template <class T>
class PerIndex {
public:
    PerIndex() = default;
    explicit PerIndex(int n, const T& init = T{}) : v_(as_index(n), init) {}
    explicit PerIndex(std::vector<T> v) : v_(std::move(v)) {}

    T& operator[](int i) { return v_.at(as_index(i)); }
    const T& operator[](int i) const { return v_.at(as_index(i)); }
    std::size_t size() const { return v_.size(); }
    bool empty() const { return v_.empty(); }
    const T& front() const { return v_.front(); }
    auto begin() const { return v_.begin(); }
    auto end() const { return v_.end(); }

private:
    std::vector<T> v_;
};

}  // namespace sim::parallel
