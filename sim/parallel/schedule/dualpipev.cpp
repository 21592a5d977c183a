// DualPipeV, the "cut-in-half" DualPipe (github:deepseek-ai/DualPipe
// dualpipe/dualpipev.py, DualPipeV.step; the README credits Sea AI Lab's
// "Cut-in-half" post). One copy of the model is cut into 2 x pp virtual
// stages; rank s holds two of them: chunk 0 is virtual stage s, chunk 1 is
// virtual stage 2pp - 1 - s. Every micro-batch enters at rank 0, runs down
// the ranks on chunk 0 and back up on chunk 1 (rank pp - 1 passes it from
// one chunk to the other itself), so the loss, the head and the embedding
// all sit on rank 0. DualPipeV.step is DualPipe.step's eight steps
// (dual_steps.h) with h = s, H = pp, all m micro-batches through each
// chunk, chunk 0 near and chunk 1 far: step 4 runs m - 2pp + s + 1 times,
// and rank pp - 1 runs its very first pair unoverlapped.
#include "sim/parallel/schedule/dual_steps.h"
#include "sim/parallel/schedule/i_schedule.h"

#include <fmt/format.h>

namespace sim::parallel::schedules {

namespace {

class DualPipeV final : public IPipelineSchedule {
public:
    std::string_view name() const override { return "dualpipev"; }
    std::string_view description() const override {
        return "DualPipe cut in half (V shape): one model copy in 2 x pp chunks, two per rank, micro-batches enter "
               "at rank 0 only; DualPipe's overlapped pairs and zero-bubble weight gradients";
    }
    // Two virtual stages per rank whatever the scenario's virtual_stages.
    int virtual_stages_per_rank(int) const override { return 2; }
    std::vector<ScheduleItem> items(const PipelineShape& shape, int stage) const override {
        DualRank r;
        r.h = stage;
        r.big_h = shape.stages;
        r.per_chunk = shape.microbatches;
        r.near = 0;  // chunk c's k-th is micro-batch k (first_mb 0 on both)
        return dual_steps(r);
    }
    // 2pp + 1 on every rank: steps 1 and 2 make 2(pp - s - 1) + 2(s + 1)
    // forwards, step 3 frees one for each it makes, step 4's first pair
    // starts its forward before its backward frees (the README's PP + 1,
    // PP being its 2pp stages). The unit tests compare.
    std::int64_t chunks_in_flight(const PipelineShape& shape, int stage) const override {
        return dual_steps_peak(items(shape, stage));
    }
    int chunks(const PipelineShape&) const override { return 2; }
    int virtual_stage(const PipelineShape& shape, int stage, int chunk) const override {
        return chunk == 0 ? stage : 2 * shape.stages - 1 - stage;
    }
    int stage_of(const PipelineShape& shape, int vs, int) const override {
        return vs < shape.stages ? vs : 2 * shape.stages - 1 - vs;
    }
    bool names_pairs() const override { return true; }
    bool training_only() const override { return true; }
    // As DualPipe's: the search bounds it by its busiest rank only
    // (sim/search/bound.cpp), so it is tried when `space.schedule` names it.
    bool searched_by_default() const override { return false; }
    // DualPipeV.step asserts num_chunks >= 2 x num_ranks (so step 4 runs
    // m - 2pp + s + 1 >= 1 times on every rank); unlike DualPipe it needs
    // neither an even pp nor an even number of micro-batches.
    std::string refusal(const PipelineShape& shape) const override {
        if (shape.microbatches < 2 * shape.stages)
            return fmt::format("dualpipev needs at least 2 x pp = {} micro-batches (DualPipeV.step asserts it), not {}",
                               2 * shape.stages, shape.microbatches);
        return {};
    }
};

}  // namespace

const IPipelineSchedule& dualpipev() {
    static const DualPipeV instance;
    return instance;
}

}  // namespace sim::parallel::schedules
