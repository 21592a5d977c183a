// GPipe: every stage runs all forwards, then all backwards, so each stage
// holds every micro-batch's activations at the turn.
#include "sim/parallel/schedule/i_schedule.h"

namespace sim::parallel::schedules {

namespace {

class GPipe final : public IPipelineSchedule {
public:
    std::string_view name() const override { return "gpipe"; }
    std::string_view description() const override { return "all forwards, then all backwards"; }
    std::vector<ScheduleItem> items(const PipelineShape& shape, int) const override {
        std::vector<ScheduleItem> out;
        for (int j = 0; j < shape.microbatches; ++j) out.push_back({true, j, 0});
        for (int j = 0; j < shape.microbatches; ++j) out.push_back({false, j, 0});
        return out;
    }
    std::int64_t chunks_in_flight(const PipelineShape& shape, int) const override { return shape.microbatches; }
};

}  // namespace

const IPipelineSchedule& gpipe() {
    static const GPipe instance;
    return instance;
}

}  // namespace sim::parallel::schedules
