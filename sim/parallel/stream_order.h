// The program order of every simulated GPU's streams (task ids per GPU and
// stream kind), stored the way the executor reads it.
//
// At thousands of GPUs the GPUs of a pipeline stage run the same sequence at
// about the same time, and the plan emits their tasks side by side: the GPUs
// that append (while building) or finish (while running) position h of a
// stream do so one after another. One vector per GPU and stream puts each of
// those accesses on a line and page of its own, evicted since that GPU's
// previous visit thousands of other GPUs ago. So from kInterleaveGpus GPUs a
// stream kind is stored position-major: cell h * gpus + slot holds position
// h of the GPU in column `slot` (columns in the order GPUs first appear),
// padded with kNone past a GPU's length (docs/performance.md, part 8).
// Rows are appended as the longest stream grows; a kind whose padding would
// pass 4x its entries plus kSlackRows rows (streams of very different
// lengths: the host stream of the first stage, a pipeline whose first stage
// is emitted far ahead) becomes one vector per GPU, for good. Readers see
// either layout through View, which is what `streams[gpu][s]` gives.
#pragma once

#include "sim/core/pod_vector.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

namespace sim::parallel {

// One per StreamKind (plan.h asserts it): compute, tp_comm, dp_comm, p2p, host, ep_comm.
inline constexpr std::size_t kStreamCount = 6;

class StreamOrder {
public:
    static constexpr std::uint32_t kEmpty = UINT32_MAX;  // padding, and a GPU without a column
    // Below this many GPUs every order is one vector per GPU: a plan that
    // small keeps them in cache anyway, and is often built and run many times
    // (serving prices iterations with such plans).
    static constexpr std::size_t kInterleaveGpus = 32;
    // Rows of padding beyond 4x a kind's entries before it becomes one vector per GPU.
    static constexpr std::size_t kSlackRows = 4096;

    // One GPU's stream: its task ids in program order.
    class View {
    public:
        class iterator {
        public:
            using iterator_category = std::forward_iterator_tag;
            using value_type = std::uint32_t;
            using difference_type = std::ptrdiff_t;
            using pointer = const std::uint32_t*;
            using reference = std::uint32_t;
            iterator() = default;
            iterator(const std::uint32_t* base, std::size_t stride, std::size_t i)
                : base_(base), stride_(stride), i_(i) {}
            std::uint32_t operator*() const { return base_[i_ * stride_]; }
            iterator& operator++() {
                ++i_;
                return *this;
            }
            iterator operator++(int) {
                iterator old = *this;
                ++i_;
                return old;
            }
            bool operator==(const iterator& o) const { return i_ == o.i_; }
            bool operator!=(const iterator& o) const { return i_ != o.i_; }

        private:
            const std::uint32_t* base_ = nullptr;
            std::size_t stride_ = 1;
            std::size_t i_ = 0;
        };
        View() = default;
        View(const std::uint32_t* base, std::size_t stride, std::size_t size)
            : base_(base), stride_(stride), size_(size) {}
        std::size_t size() const { return size_; }
        bool empty() const { return size_ == 0; }
        std::uint32_t operator[](std::size_t i) const { return base_[i * stride_]; }
        std::uint32_t front() const { return base_[0]; }
        std::uint32_t back() const { return base_[(size_ - 1) * stride_]; }
        // Index-based, so no pointer is formed past the cells.
        iterator begin() const { return iterator(base_, stride_, 0); }
        iterator end() const { return iterator(base_, stride_, size_); }

    private:
        const std::uint32_t* base_ = nullptr;
        std::size_t stride_ = 1;
        std::size_t size_ = 0;
    };

    // A GPU's streams, indexed by stream_index(kind).
    class Gpu {
    public:
        Gpu(const StreamOrder& o, std::size_t gpu) : o_(o), gpu_(gpu) {}
        View operator[](std::size_t s) const { return o_.view(gpu_, s); }

    private:
        const StreamOrder& o_;
        std::size_t gpu_;
    };

    // Sets the number of simulated GPUs; only before the first push.
    void resize(std::size_t gpus);
    std::size_t size() const { return gpus_; }
    Gpu operator[](std::size_t gpu) const { return Gpu(*this, gpu); }
    View view(std::size_t gpu, std::size_t s) const;

    // Appends task `id` to stream s of `gpu`.
    void push(std::uint32_t gpu, std::size_t s, std::uint32_t id);

    // The layout, for readers that follow it (the executor).
    // Whether kind s is stored position-major.
    bool interleaved(std::size_t s) const { return kinds_[s].interleaved; }
    // Rows of an interleaved kind, and its cells (row-major, gpus() columns).
    std::size_t rows(std::size_t s) const { return kinds_[s].rows; }
    const std::uint32_t* cells(std::size_t s) const { return kinds_[s].cells.begin(); }
    // A GPU's column (kEmpty if no task of it has been added), and the GPUs
    // in column order (those with a column).
    std::uint32_t slot(std::size_t gpu) const { return slot_[gpu]; }
    const std::vector<std::uint32_t>& by_slot() const { return by_slot_; }
    std::size_t length(std::size_t gpu, std::size_t s) const {
        return kinds_[s].interleaved ? kinds_[s].len[gpu] : kinds_[s].per_gpu[gpu].size();
    }

private:
    struct Kind {
        bool interleaved = false;
        PodVector<std::uint32_t> cells;  // interleaved: rows x gpus
        std::size_t rows = 0;
        std::size_t total = 0;                            // entries (interleaved)
        std::vector<std::uint32_t> len;                   // interleaved: each GPU's length
        std::vector<std::vector<std::uint32_t>> per_gpu;  // otherwise
    };
    void add_row(Kind& k);
    void to_per_gpu(Kind& k);

    std::size_t gpus_ = 0;
    std::vector<std::uint32_t> slot_, by_slot_;
    std::array<Kind, kStreamCount> kinds_;
};

}  // namespace sim::parallel
