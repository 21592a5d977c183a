// Megatron-LM's interleaved 1F1B: each rank holds v model chunks (virtual
// stages); the k-th forward on a rank runs chunk (k / p) % v of micro-batch
// (k / (p v)) p + k % p, backwards mirror it with the chunks in reverse. The
// warm-up is (p - s - 1) x 2 + (v - 1) x p forwards, so a rank holds up to
// that plus one chunks' activations.
#include "sim/parallel/schedule/i_schedule.h"

#include "sim/core/checked.h"

#include <algorithm>
#include <cstdint>

namespace sim::parallel::schedules {

namespace {

class Interleaved final : public IPipelineSchedule {
public:
    std::string_view name() const override { return "interleaved-1f1b"; }
    std::string_view description() const override {
        return "1F1B over virtual_stages model chunks per GPU (Megatron-LM order)";
    }
    bool uses_virtual_stages() const override { return true; }
    std::vector<ScheduleItem> items(const PipelineShape& shape, int stage) const override {
        const int p = shape.stages, m = shape.microbatches, v = shape.virtual_stages;
        const int total = m * v;
        const int warmup = std::min(total, (p - stage - 1) * 2 + (v - 1) * p);
        const auto fwd = [&](int k) { return ScheduleItem{true, (k / (p * v)) * p + k % p, (k / p) % v}; };
        const auto bwd = [&](int k) { return ScheduleItem{false, (k / (p * v)) * p + k % p, v - 1 - (k / p) % v}; };
        std::vector<ScheduleItem> out;
        int f = 0, b = 0;
        for (; f < warmup; ++f) out.push_back(fwd(f));
        while (f < total) {
            out.push_back(fwd(f++));
            out.push_back(bwd(b++));
        }
        while (b < total) out.push_back(bwd(b++));
        return out;
    }
    std::int64_t chunks_in_flight(const PipelineShape& shape, int stage) const override {
        const int p = shape.stages, v = shape.virtual_stages;
        // Up to 2^30 micro-batches x 1024 virtual stages: past an int.
        return std::min<std::int64_t>(checked_mul(std::int64_t{shape.microbatches}, v).value_or(INT64_MAX),
                                      (p - stage - 1) * 2 + (v - 1) * p + 1);
    }
};

}  // namespace

const IPipelineSchedule& interleaved_one_f_one_b() {
    static const Interleaved instance;
    return instance;
}

}  // namespace sim::parallel::schedules
