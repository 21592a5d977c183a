// Blocking pipeline sends (SoftwareProfile::pipeline_sends_blocking,
// docs/moe.md section 3m): Megatron-Core's non-interleaved 1F1B waits for
// each batched send and receive before its next forward or backward. On two
// stages of one layer each, two micro-batches, every kernel K and every
// send X (K >> X), 1F1B runs
//   stage 0: F0 F1 B0 B1      stage 1: F0 B0 F1 B1
// Async, stage 0's F1 starts at a0 (a = a stage's forward, b its backward)
// and stage 1's F1 right after its B0; blocking, stage 0's F1 waits for F0's
// send (+X), and stage 1's F1 for B0's send (+X, which also covers the
// later arrival of stage 0's second activation). By hand, both end at
//   async:    a0 + 2X + 2 a1 + 2 b1 + b0      blocking: the same + X
// (stage 0's B1 waits for stage 1's last gradient), so the iteration is
// longer by exactly one send.
#include "sim/config/scenario.h"
#include "sim/config/software_loader.h"
#include "sim/parallel/builder.h"

#include "tests/parallel/overlap_toy.h"
#include "tests/parallel/scenario_support.h"

#include <doctest/doctest.h>

#include <set>
#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;

namespace {

// Two stages of one layer, two micro-batches, 1F1B (strategy 1 of the file).
config::ScenarioSpec two_stages(bool blocking) {
    auto sc = parasim_test::scenario(parasim_test::kData + "pipeline-4stage-training.yaml",
                                     {"gpus=2", "model.layers=2", "workload.global_batch=2", "strategies[1].pp=2"});
    sc.profile.pipeline_sends_blocking = blocking;
    return sc;
}

// The durations of the pipeline's sends.
std::set<std::uint64_t> send_durations(const parasim_test::ToyRun& r) {
    std::set<std::uint64_t> out;
    for (std::size_t i = 0; i < r.build.plan.tasks.size(); ++i) {
        const auto& t = r.build.plan.tasks[i];
        if (t.kind == parallel::TaskKind::transfer && t.stream == parallel::StreamKind::p2p)
            out.insert((r.result.task_end[i] - r.result.task_start[i]).count_ps());
    }
    return out;
}

}  // namespace

TEST_CASE("pipeline sends: blocking 1F1B waits for each send, one send longer on two stages") {
    const auto async = parasim_test::run_toy(two_stages(false), 1, 0);
    const auto blocking = parasim_test::run_toy(two_stages(true), 1, 0);
    const auto x = send_durations(blocking);
    REQUIRE(x.size() == 1);  // every send the same size over the same link
    REQUIRE(send_durations(async) == x);
    const std::uint64_t send = *x.begin();
    REQUIRE(send > 0);
    REQUIRE(send < parasim_test::kToyKernel.count_ps() / 10);  // K >> X, the order above
    CHECK(blocking.result.makespan.count_ps() - async.result.makespan.count_ps() == send);
    // The same kernels and sends either way: only the order moved.
    CHECK(blocking.build.plan.tasks.size() == async.build.plan.tasks.size());
}

TEST_CASE("pipeline sends: the profile key; only nemo states it; interleaved ranks unaffected") {
    CHECK(config::software_profile("nemo").pipeline_sends_blocking);
    CHECK(config::software_profile("nemo").pipeline_sends_from.text.find("batch_p2p_sync") != std::string::npos);
    CHECK_FALSE(config::software_profile("megatron-bridge").pipeline_sends_blocking);
    // Interleaved 1F1B (2 chunks a rank) overlaps its sends (overlap_p2p_comm):
    // the same makespan with the key on or off.
    const auto interleaved = [](bool blocking) {
        auto sc = parasim_test::scenario(parasim_test::kData + "pipeline-4stage-training.yaml",
                                         {"gpus=2", "model.layers=4", "workload.global_batch=4", "strategies[1].pp=2",
                                          "strategies[1].schedule=interleaved-1f1b", "strategies[1].virtual_stages=2"});
        sc.profile.pipeline_sends_blocking = blocking;
        return parasim_test::run_toy(sc, 1, 0).result.makespan;
    };
    CHECK(interleaved(true) == interleaved(false));
}
