// Work in a fixed order whose tail may become unwanted (the best-first
// simulations of a plan search, the points of a sweep), and the executor
// that runs it on this process's threads. An executor hands positions out
// in increasing order to whoever is free (dynamic balancing: runs differ
// 1000x in cost), so it may run several at once; the work decides from the
// results recorded so far whether the next position is still wanted. The
// MPI scale-out (apps/scaleout.h) is a second executor of the same work:
// results travel as bytes, which is why run() returns them.
#pragma once

#include <cstddef>
#include <string>

namespace sim::search {

class OrderedWork {
public:
    virtual ~OrderedWork() = default;
    virtual std::size_t size() const = 0;
    // Whether position k (handed out after 0..k-1) is still wanted given the
    // results accepted so far. Once false, no later position is wanted either
    // (the executor stops handing out). Called serialised with accept().
    virtual bool wanted(std::size_t k) = 0;
    // Does position k and returns its result's bytes. Thread-safe, and the
    // same bytes in any process of the same build. May throw.
    virtual std::string run(std::size_t k) const = 0;
    // Records position k's result (from run(), here or in another process).
    // Called serialised with wanted().
    virtual void accept(std::size_t k, const std::string& result) = 0;
};

// Runs `work` on `threads` threads of this process (0: the hardware's count).
// The first exception of a run() (in position order) is rethrown after every
// started run has finished; nothing is handed out after it.
void run_local(OrderedWork& work, int threads);

}  // namespace sim::search
