// DeepSeek-V3's DualPipe (arXiv:2412.19437 section 3.2.1, Figure 5; the
// order of github:deepseek-ai/DualPipe dualpipe/dualpipe.py, DualPipe.step).
// The model is cut into pp virtual stages; rank s holds two of them: chunk 0
// is virtual stage s, run by the micro-batches that enter at rank 0
// (direction 0), chunk 1 is virtual stage pp - 1 - s, run by those that
// enter at rank pp - 1 (direction 1). Half the micro-batches go each way
// (direction d's k-th is micro-batch d x m/2 + k). Each rank runs the eight
// steps of DualPipe.step, with "near" the direction that enters on its half
// of the pipeline and "far" the other, h = min(s, pp - 1 - s), H = pp / 2:
//   1. 2(H - h - 1) forwards near
//   2. h + 1 times: forward near, forward far
//   3. H - h - 1 times: input-gradient backward far, its weight gradient,
//      forward far
//   4. m/2 - pp + h + 1 times: (forward near & backward far), (forward far
//      & backward near), each pair overlapped (the middle ranks run their
//      very first pair unoverlapped)
//   5. H - h - 1 times: backward far, (forward far & backward near)
//   6. h + 1 times: backward far, backward near; from the middle of this
//      step on, input-gradient only (the weight gradients wait)
//   7. H - h - 1 times: a waiting weight gradient, then an input-gradient
//      backward near
//   8. h + 1 waiting weight gradients
// Weight gradients run first in, first out (WeightGradStore is a queue).
#include "sim/parallel/schedule/i_schedule.h"

#include <algorithm>
#include <deque>

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
        const int p = shape.stages, half = shape.microbatches / 2, big_h = p / 2;
        const int h = std::min(stage, p - 1 - stage);
        const int near = stage < big_h ? 0 : 1, far = 1 - near;
        int fwd_done[2] = {0, 0}, bwd_done[2] = {0, 0};
        std::deque<ScheduleItem> weights;  // input-gradient backwards whose weight gradient waits
        std::vector<ScheduleItem> out;
        const auto f = [&](int d, bool paired = false) {
            out.push_back({true, d * half + fwd_done[d]++, d, BackwardPart::all, paired});
        };
        const auto b = [&](int d, bool zero_bubble = false) {
            const ScheduleItem it{false, d * half + bwd_done[d]++, d,
                                  zero_bubble ? BackwardPart::input : BackwardPart::all, false};
            out.push_back(it);
            if (zero_bubble) weights.push_back({false, it.mb, d, BackwardPart::weight, false});
        };
        const auto w = [&] {
            out.push_back(weights.front());
            weights.pop_front();
        };
        const auto fb = [&](int df, int db) {  // an overlapped pair: forward df with backward db
            f(df, true);
            b(db);
        };
        for (int i = 0; i < 2 * (big_h - h - 1); ++i) f(near);  // 1
        for (int i = 0; i < h + 1; ++i) {                       // 2
            f(near);
            f(far);
        }
        for (int i = 0; i < big_h - h - 1; ++i) {  // 3
            b(far, true);
            w();
            f(far);
        }
        for (int i = 0; i < half - p + h + 1; ++i) {  // 4
            if (i == 0 && h == big_h - 1) {
                f(near);
                b(far);
            } else {
                fb(near, far);
            }
            fb(far, near);
        }
        for (int i = 0; i < big_h - h - 1; ++i) {  // 5
            b(far);
            fb(far, near);
        }
        bool zero_bubble = false;  // 6
        for (int i = 0; i < h + 1; ++i) {
            if (i == (h + 1) / 2 && h % 2 == 1) zero_bubble = true;
            b(far, zero_bubble);
            if (i == (h + 1) / 2 && h % 2 == 0) zero_bubble = true;
            b(near, zero_bubble);
        }
        for (int i = 0; i < big_h - h - 1; ++i) {  // 7
            w();
            b(near, true);
        }
        while (!weights.empty()) w();  // 8: h + 1 of them
        return out;
    }
    // The most forwards not yet freed by their (input-gradient) backward,
    // counting a pair's forward before its backward (the forward's
    // activations are made while the backward's are freed). Table 2 of the
    // report gives pp + 1; the unit tests compare.
    std::int64_t chunks_in_flight(const PipelineShape& shape, int stage) const override {
        std::int64_t held = 0, peak = 0;
        for (const auto& it : items(shape, stage)) {
            if (it.forward) ++held;
            else if (it.part != BackwardPart::weight) --held;
            peak = std::max(peak, held);
        }
        return peak;
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
