// A growable array of trivially copyable values whose growth is realloc:
// for the plan's task and dependency arrays (hundreds of MB at thousands of
// GPUs). A std::vector grows by allocating a new block, copying and freeing
// the old one, so every doubling touches fresh pages (a page fault each) and
// copies the whole array; glibc's realloc of a block that large (mmap'd)
// remaps its pages instead (mremap), so growing costs neither the copy nor
// the faults of a second copy. The interface is the subset of std::vector
// the plan's users need (size, indexing, iteration, push_back, reserve).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <type_traits>

namespace sim {

template <class T>
class PodVector {
    static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                  "PodVector moves its values with realloc: trivially copyable types only");

public:
    using value_type = T;
    using size_type = std::size_t;
    using iterator = T*;
    using const_iterator = const T*;

    PodVector() = default;
    PodVector(std::initializer_list<T> init) {
        reserve(init.size());
        for (const T& v : init) push_back(v);
    }
    PodVector(const PodVector& o) { *this = o; }
    PodVector(PodVector&& o) noexcept : data_(o.data_), size_(o.size_), cap_(o.cap_) {
        o.data_ = nullptr;
        o.size_ = o.cap_ = 0;
    }
    PodVector& operator=(const PodVector& o) {
        if (this == &o) return *this;
        size_ = 0;
        reserve(o.size_);
        if (o.size_ > 0) std::memcpy(static_cast<void*>(data_), o.data_, o.size_ * sizeof(T));
        size_ = o.size_;
        return *this;
    }
    PodVector& operator=(PodVector&& o) noexcept {
        if (this == &o) return *this;
        std::free(data_);
        data_ = o.data_;
        size_ = o.size_;
        cap_ = o.cap_;
        o.data_ = nullptr;
        o.size_ = o.cap_ = 0;
        return *this;
    }
    ~PodVector() { std::free(data_); }

    std::size_t size() const { return size_; }
    std::size_t capacity() const { return cap_; }
    bool empty() const { return size_ == 0; }
    T* data() { return data_; }
    const T* data() const { return data_; }
    T& operator[](std::size_t i) { return data_[i]; }
    const T& operator[](std::size_t i) const { return data_[i]; }
    T& front() { return data_[0]; }
    const T& front() const { return data_[0]; }
    T& back() { return data_[size_ - 1]; }
    const T& back() const { return data_[size_ - 1]; }
    T* begin() { return data_; }
    T* end() { return data_ + size_; }
    const T* begin() const { return data_; }
    const T* end() const { return data_ + size_; }

    void push_back(const T& v) {
        if (size_ == cap_) grow(size_ + 1);
        data_[size_++] = v;
    }
    void pop_back() { --size_; }
    void clear() { size_ = 0; }
    // New values are value-initialised (zero for the plan's types).
    void resize(std::size_t n) {
        if (n > cap_) grow(n);
        for (std::size_t i = size_; i < n; ++i) new (static_cast<void*>(data_ + i)) T();
        size_ = n;
    }
    void reserve(std::size_t n) {
        if (n > cap_) reallocate(n);
    }
    // Gives back the capacity beyond the size.
    void shrink_to_fit() {
        if (size_ == 0) {
            std::free(data_);
            data_ = nullptr;
            cap_ = 0;
        } else if (cap_ > size_) {
            reallocate(size_);
        }
    }

private:
    void grow(std::size_t at_least) { reallocate(std::max<std::size_t>({at_least, 2 * cap_, 16})); }
    void reallocate(std::size_t n) {
        if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
        void* p = std::realloc(static_cast<void*>(data_), n * sizeof(T));
        if (p == nullptr) throw std::bad_alloc();
        data_ = static_cast<T*>(p);
        cap_ = n;
    }

    T* data_ = nullptr;
    std::size_t size_ = 0, cap_ = 0;
};

}  // namespace sim
