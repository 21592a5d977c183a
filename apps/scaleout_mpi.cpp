// ScaleOut over MPI (scaleout.h). Rank 0 coordinates from its main thread
// (the only thread that calls MPI: MPI_THREAD_FUNNELED) and simulates on
// its own worker threads; every other rank asks rank 0 for a position,
// runs it, and sends its result's bytes with the next request:
//   rank r -> 0, tag kRequest: empty (first request), or
//                              [u64 position][u8 status][bytes]
//                              status 0: the result; 1 or 2: an error
//                              (input / internal) and its message
//   0 -> rank r, tag kReply:   u64 position, or kStop
// Rank 0 polls with MPI_Iprobe and a short sleep rather than a blocking
// receive, which in Open MPI spins and would take a core from the workers.
#include "apps/scaleout.h"

#include "sim/core/error.h"

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace parasim_cli {

namespace {

constexpr int kRequest = 1, kReply = 2;
constexpr std::uint64_t kStop = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint8_t kOk = 0, kInputError = 1, kInternalError = 2;

// Started by a launcher: mpirun (Open MPI) or srun / another PMI(x) one.
bool launched() {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
        if (std::getenv(v)) return true;
    return false;
}

std::string header(std::uint64_t k, std::uint8_t status) {
    std::string h(sizeof k + 1, '\0');
    std::memcpy(h.data(), &k, sizeof k);
    h[sizeof k] = static_cast<char>(status);
    return h;
}

// A helper rank: request, run, send the result with the next request.
void serve(sim::search::OrderedWork& work) {
    std::string msg;
    for (;;) {
        MPI_Send(msg.data(), static_cast<int>(msg.size()), MPI_BYTE, 0, kRequest, MPI_COMM_WORLD);
        std::uint64_t k = kStop;
        MPI_Recv(&k, 1, MPI_UINT64_T, 0, kReply, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (k == kStop) return;
        try {
            msg = header(k, kOk) + work.run(static_cast<std::size_t>(k));
        } catch (const sim::ConfigError& e) {
            msg = header(k, kInputError) + e.what();
        } catch (const sim::ModelError& e) {
            msg = header(k, kInputError) + e.what();
        } catch (const std::exception& e) {
            msg = header(k, kInternalError) + e.what();
        }
    }
}

// Rank 0's shared state: the next position, and the first failure by position.
class Coordinator {
public:
    explicit Coordinator(sim::search::OrderedWork& work) : work_(work) {}

    // The next wanted position, or kStop.
    std::uint64_t take() {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopped_ || next_ >= work_.size()) return kStop;
        if (!work_.wanted(next_)) {
            stopped_ = true;
            return kStop;
        }
        return next_++;
    }
    void accept(std::size_t k, const std::string& bytes) {
        std::lock_guard<std::mutex> lock(mu_);
        try {
            work_.accept(k, bytes);
        } catch (...) {
            fail_locked(k, std::current_exception());
        }
    }
    void fail(std::size_t k, std::exception_ptr e) {
        std::lock_guard<std::mutex> lock(mu_);
        fail_locked(k, std::move(e));
    }
    void rethrow() const {
        if (failure_) std::rethrow_exception(failure_);
    }

private:
    void fail_locked(std::size_t k, std::exception_ptr e) {
        stopped_ = true;
        if (!failure_ || k < failed_at_) {
            failed_at_ = k;
            failure_ = std::move(e);
        }
    }
    sim::search::OrderedWork& work_;
    std::mutex mu_;
    std::size_t next_ = 0, failed_at_ = 0;
    bool stopped_ = false;
    std::exception_ptr failure_;
};

void coordinate(sim::search::OrderedWork& work, int threads, int ranks) {
    Coordinator co(work);
    std::vector<std::thread> local;
    for (int i = 0; i < std::max(1, threads); ++i)
        local.emplace_back([&co, &work] {
            for (std::uint64_t k = co.take(); k != kStop; k = co.take()) {
                std::string bytes;
                try {
                    bytes = work.run(static_cast<std::size_t>(k));
                } catch (...) {
                    co.fail(static_cast<std::size_t>(k), std::current_exception());
                    continue;
                }
                co.accept(static_cast<std::size_t>(k), bytes);
            }
        });
    int helpers = ranks - 1;
    std::string buf;
    while (helpers > 0) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, kRequest, MPI_COMM_WORLD, &flag, &st);
        if (!flag) {
            std::this_thread::sleep_for(std::chrono::microseconds(100));
            continue;
        }
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        buf.assign(static_cast<std::size_t>(count), '\0');
        MPI_Recv(buf.data(), count, MPI_BYTE, st.MPI_SOURCE, kRequest, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (buf.size() > sizeof(std::uint64_t)) {
            std::uint64_t k = 0;
            std::memcpy(&k, buf.data(), sizeof k);
            const auto status = static_cast<std::uint8_t>(buf[sizeof k]);
            const std::string body = buf.substr(sizeof k + 1);
            const auto at = static_cast<std::size_t>(k);
            if (status == kOk) co.accept(at, body);
            else if (status == kInputError) co.fail(at, std::make_exception_ptr(sim::ModelError(body)));
            else co.fail(at, std::make_exception_ptr(std::runtime_error(body)));
        }
        const std::uint64_t next = co.take();
        MPI_Send(&next, 1, MPI_UINT64_T, st.MPI_SOURCE, kReply, MPI_COMM_WORLD);
        if (next == kStop) --helpers;
    }
    for (auto& t : local) t.join();
    co.rethrow();
}

}  // namespace

ScaleOut::ScaleOut() {
    if (!launched()) return;
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    mpi_ = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks_);
}

ScaleOut::~ScaleOut() {
    if (mpi_) MPI_Finalize();
}

bool ScaleOut::run(sim::search::OrderedWork& work, int threads) {
    if (!mpi_ || ranks_ == 1) {
        sim::search::run_local(work, threads);
        return true;
    }
    if (rank_ != 0) {
        serve(work);
        return false;
    }
    coordinate(work, threads, ranks_);
    return true;
}

}  // namespace parasim_cli
