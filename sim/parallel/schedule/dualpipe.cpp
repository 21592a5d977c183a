// DeepSeek-V3's DualPipe (arXiv:2412.19437 section 3.2.1, Figure 5; the
// order of github:deepseek-ai/DualPipe dualpipe/dualpipe.py, DualPipe.step).
// The model is cut into pp virtual stages; rank s holds two of them: chunk 0
// is virtual stage s, run by the micro-batches that enter at rank 0
// (direction 0), chunk 1 is virtual stage pp - 1 - s, run by those that
// enter at rank pp - 1 (direction 1). Half the micro-batches go each way
// (direction d's k-th is micro-batch d x m/2 + k). Each rank runs the eight
// steps of DualPipe.step (dual_steps.h) with h = min(s, pp - 1 - s),
// H = pp / 2, m / 2 micro-batches per chunk, and "near" the direction that
// enters on its half of the pipeline (so step 4 runs m/2 - pp + h + 1 times,
// and the middle ranks run their very first pair unoverlapped).
#include "sim/parallel/schedule/dual_steps.h"
#include "sim/parallel/schedule/i_schedule.h"

#include <algorithm>

#include <fmt/format.h>

namespace sim::parallel::schedules {

namespace {

class DualPipe final : public IPipelineSchedule {
public:
    std::string_view name() const override { return "dualpipe"; }
    std::string_view description() const override {
        return "DeepSeek-V3 bidirectional pipeline: two chunks per rank, overlapped forward-backward pairs, "
               "zero-bubble weight gradients";
    }
    std::vector<ScheduleItem> items(const PipelineShape& shape, int stage) const override {
        const int p = shape.stages, half = shape.microbatches / 2;
        DualRank r;
        r.h = std::min(stage, p - 1 - stage);
        r.big_h = p / 2;
        r.per_chunk = half;
        r.near = stage < p / 2 ? 0 : 1;
        r.first_mb[1] = half;  // direction d's k-th is micro-batch d x m/2 + k
        return dual_steps(r);
    }
    // Table 2 of the report gives pp + 1; the unit tests compare.
    std::int64_t chunks_in_flight(const PipelineShape& shape, int stage) const override {
        return dual_steps_peak(items(shape, stage));
    }
    int chunks(const PipelineShape&) const override { return 2; }
    int virtual_stage(const PipelineShape& shape, int stage, int chunk) const override {
        return chunk == 0 ? stage : shape.stages - 1 - stage;
    }
    int stage_of(const PipelineShape& shape, int vs, int chunk) const override {
        return chunk == 0 ? vs : shape.stages - 1 - vs;
    }
    bool names_pairs() const override { return true; }
    bool training_only() const override { return true; }
    // The search's lower bound for it is its busiest rank's work only
    // (sim/search/bound.cpp), too loose to prune: `space.schedule` names it.
    bool searched_by_default() const override { return false; }
    // DualPipe.step asserts both: an even number of ranks (the two halves)
    // and an even number of micro-batches, at least 2 x pp (so step 4 runs
    // m/2 - pp + h + 1 >= 1 times on every rank).
    std::string refusal(const PipelineShape& shape) const override {
        if (shape.stages < 2 || shape.stages % 2 != 0)
            return fmt::format("dualpipe needs an even pp >= 2 (the two halves of the pipeline), not pp={}",
                               shape.stages);
        if (shape.microbatches % 2 != 0 || shape.microbatches < 2 * shape.stages)
            return fmt::format(
                "dualpipe needs an even number of micro-batches, at least 2 x pp = {} (half enter at each end), "
                "not {}",
                2 * shape.stages, shape.microbatches);
        return {};
    }
};

}  // namespace

const IPipelineSchedule& dualpipe() {
    static const DualPipe instance;
    return instance;
}

}  // namespace sim::parallel::schedules
