// The pipeline schedule registry: what is registered, lookups, and each
// schedule's item order and activations in flight against hand-computed
// sequences and against the order itself.
#include "sim/core/error.h"
#include "sim/parallel/schedule/i_schedule.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;
using parallel::PipelineShape;
using parallel::ScheduleItem;

namespace {

ScheduleItem F(int mb, int chunk = 0) { return {true, mb, chunk}; }
ScheduleItem B(int mb, int chunk = 0) { return {false, mb, chunk}; }

// The most (micro-batch, chunk) pairs whose forward ran and backward did not:
// the activations a stage holds at its peak when it runs `items` in order.
std::int64_t peak_outstanding(const std::vector<ScheduleItem>& items) {
    std::int64_t now = 0, peak = 0;
    for (const auto& it : items) {
        if (it.part != parallel::BackwardPart::weight) now += it.forward ? 1 : -1;  // the input half frees
        peak = std::max(peak, now);
    }
    return peak;
}

}  // namespace

TEST_CASE("the schedule registry lists gpipe, 1f1b, interleaved-1f1b, dualpipe and dualpipev, each described") {
    CHECK(parallel::pipeline_schedule_names() ==
          std::vector<std::string>{"gpipe", "1f1b", "interleaved-1f1b", "dualpipe", "dualpipev"});
    for (const auto* s : parallel::pipeline_schedules()) {
        CHECK_FALSE(s->description().empty());
        CHECK(parallel::find_pipeline_schedule(s->name()) == s);
    }
    CHECK(parallel::default_pipeline_schedule().name() == "1f1b");
    CHECK(parallel::pipeline_schedule("interleaved-1f1b").uses_virtual_stages());
    CHECK_FALSE(parallel::pipeline_schedule("gpipe").uses_virtual_stages());
    // The plan search tries every schedule unless named, but DualPipe and
    // DualPipeV (bounded by their busiest rank only).
    for (const auto* s : parallel::pipeline_schedules())
        CHECK(s->searched_by_default() == (s->name() != "dualpipe" && s->name() != "dualpipev"));
    // Virtual stages per rank: interleaved's asked count, DualPipeV's 2, else 1.
    CHECK(parallel::pipeline_schedule("interleaved-1f1b").virtual_stages_per_rank(3) == 3);
    CHECK(parallel::pipeline_schedule("dualpipe").virtual_stages_per_rank(3) == 1);
    CHECK(parallel::pipeline_schedule("dualpipev").virtual_stages_per_rank(1) == 2);
}

TEST_CASE("looking up an unknown schedule fails and names the registered ones") {
    CHECK(parallel::find_pipeline_schedule("zero-bubble") == nullptr);
    CHECK_THROWS_WITH_AS(
        parallel::pipeline_schedule("zero-bubble"),
        "unknown pipeline schedule 'zero-bubble' (registered: gpipe, 1f1b, interleaved-1f1b, dualpipe, dualpipev)",
        ModelError);
}

TEST_CASE("1F1B with 4 stages and 8 micro-batches: warm-up p - s - 1 forwards, then alternate") {
    const auto& s = parallel::pipeline_schedule("1f1b");
    const PipelineShape shape{4, 8, 1};
    // Stage 0 warms up with 3 forwards and so holds 4 micro-batches at once.
    CHECK(s.items(shape, 0) == std::vector<ScheduleItem>{F(0), F(1), F(2), F(3), B(0), F(4), B(1), F(5), B(2), F(6),
                                                         B(3), F(7), B(4), B(5), B(6), B(7)});
    CHECK(s.chunks_in_flight(shape, 0) == 4);
    // The last stage has no warm-up: forward, backward, forward, ...
    CHECK(s.items(shape, 3) == std::vector<ScheduleItem>{F(0), B(0), F(1), B(1), F(2), B(2), F(3), B(3), F(4), B(4),
                                                         F(5), B(5), F(6), B(6), F(7), B(7)});
    CHECK(s.chunks_in_flight(shape, 3) == 1);
    // Fewer micro-batches than the warm-up: all of them are in flight.
    CHECK(s.chunks_in_flight(PipelineShape{4, 2, 1}, 0) == 2);
}

TEST_CASE("GPipe runs all forwards, then all backwards, holding every micro-batch") {
    const auto& s = parallel::pipeline_schedule("gpipe");
    CHECK(s.items(PipelineShape{2, 3, 1}, 1) == std::vector<ScheduleItem>{F(0), F(1), F(2), B(0), B(1), B(2)});
    CHECK(s.chunks_in_flight(PipelineShape{2, 3, 1}, 1) == 3);
}

TEST_CASE("interleaved 1F1B with 2 stages, 4 micro-batches, 2 chunks follows Megatron-LM's order") {
    const auto& s = parallel::pipeline_schedule("interleaved-1f1b");
    const PipelineShape shape{2, 4, 2};
    // Stage 0: warm-up (2 - 0 - 1) x 2 + (2 - 1) x 2 = 4 forwards; forwards
    // go chunk 0 for micro-batches 0-1, chunk 1 for 0-1, then 2-3 likewise.
    CHECK(s.items(shape, 0) == std::vector<ScheduleItem>{F(0, 0), F(1, 0), F(0, 1), F(1, 1), F(2, 0), B(0, 1), F(3, 0),
                                                         B(1, 1), F(2, 1), B(0, 0), F(3, 1), B(1, 0), B(2, 1), B(3, 1),
                                                         B(2, 0), B(3, 0)});
    CHECK(s.chunks_in_flight(shape, 0) == 5);
}

TEST_CASE("every schedule runs each item once, backward after forward, and its in-flight count is the order's peak") {
    for (const auto* s : parallel::pipeline_schedules()) {
        for (const PipelineShape shape : {PipelineShape{1, 1, 2}, PipelineShape{4, 8, 2}, PipelineShape{3, 6, 3},
                                          PipelineShape{8, 2, 2}, PipelineShape{4, 16, 4}}) {
            // Virtual stages per rank: the shape's for interleaved, 2 for
            // DualPipeV (each micro-batch runs both its chunks), else 1.
            const int chunks = s->virtual_stages_per_rank(shape.virtual_stages);
            const PipelineShape used{shape.stages, shape.microbatches, chunks};
            // Strategy resolution refuses interleaving unless pp divides the
            // micro-batches, and the shapes a schedule refuses itself.
            if (s->uses_virtual_stages() && shape.microbatches % shape.stages != 0) continue;
            if (!s->refusal(used).empty()) continue;
            for (int stage = 0; stage < shape.stages; ++stage) {
                CAPTURE(s->name());
                CAPTURE(stage);
                const auto items = s->items(used, stage);
                // (mb, chunk) -> 1 after forward, 2 after backward, 3 after
                // an input-gradient half (2 once its weight half ran).
                std::map<std::pair<int, int>, int> seen;
                for (const auto& it : items) {
                    int& state = seen[{it.mb, it.chunk}];
                    const bool weight = it.part == parallel::BackwardPart::weight;
                    CHECK(state == (it.forward ? 0 : weight ? 3 : 1));
                    state = it.forward ? 1 : it.part == parallel::BackwardPart::input ? 3 : 2;
                }
                CHECK(seen.size() == static_cast<std::size_t>(shape.microbatches * chunks));
                CHECK(std::all_of(seen.begin(), seen.end(), [](const auto& kv) { return kv.second == 2; }));
                CHECK(s->chunks_in_flight(used, stage) == peak_outstanding(items));
            }
        }
    }
}

TEST_SUITE_END();
