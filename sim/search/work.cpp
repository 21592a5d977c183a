// The local executor of work.h: a pool of threads pulling the next position
// under one mutex.
#include "sim/search/work.h"

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace sim::search {

void run_local(OrderedWork& work, int threads) {
    const std::size_t n = work.size();
    std::size_t slots =
        threads > 0 ? static_cast<std::size_t>(threads) : std::max(1u, std::thread::hardware_concurrency());
    slots = std::min(slots, std::max<std::size_t>(n, 1));
    std::mutex mu;
    std::size_t next = 0;
    bool stopped = false;
    std::size_t failed_at = n;
    std::exception_ptr failure;
    const auto loop = [&] {
        for (;;) {
            std::size_t k = 0;
            {
                std::lock_guard<std::mutex> lock(mu);
                if (stopped || next >= n) return;
                if (!work.wanted(next)) {
                    stopped = true;
                    return;
                }
                k = next++;
            }
            std::string result;
            try {
                result = work.run(k);
            } catch (...) {
                std::lock_guard<std::mutex> lock(mu);
                stopped = true;
                if (k < failed_at) {
                    failed_at = k;
                    failure = std::current_exception();
                }
                return;
            }
            std::lock_guard<std::mutex> lock(mu);
            work.accept(k, result);
        }
    };
    if (slots <= 1) {
        loop();
    } else {
        std::vector<std::thread> pool;
        for (std::size_t i = 0; i < slots; ++i) pool.emplace_back(loop);
        for (auto& t : pool) t.join();
    }
    if (failure) std::rethrow_exception(failure);
}

}  // namespace sim::search
