// 1F1B (PipeDream-Flush, Megatron-LM's non-interleaved schedule): stage s
// warms up with p - s - 1 forwards, then alternates one forward and one
// backward, then drains the backwards. A stage holds at most p - s
// micro-batches' activations.
#include "sim/parallel/schedule/i_schedule.h"

#include <algorithm>

namespace sim::parallel::schedules {

namespace {

class OneFOneB final : public IPipelineSchedule {
public:
    std::string_view name() const override { return "1f1b"; }
    std::string_view description() const override {
        return "one forward, one backward after a warm-up of pp - stage - 1 forwards";
    }
    std::vector<ScheduleItem> items(const PipelineShape& shape, int stage) const override {
        const int m = shape.microbatches;
        const int warmup = std::min(shape.stages - stage - 1, m);
        std::vector<ScheduleItem> out;
        int f = 0, b = 0;
        for (; f < warmup; ++f) out.push_back({true, f, 0});
        while (f < m) {
            out.push_back({true, f++, 0});
            out.push_back({false, b++, 0});
        }
        while (b < m) out.push_back({false, b++, 0});
        return out;
    }
    std::int64_t chunks_in_flight(const PipelineShape& shape, int stage) const override {
        return std::min(shape.microbatches, shape.stages - stage);
    }
};

}  // namespace

const IPipelineSchedule& one_f_one_b() {
    static const OneFOneB instance;
    return instance;
}

}  // namespace sim::parallel::schedules
