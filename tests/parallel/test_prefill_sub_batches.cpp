// A software profile's prefill_max_tokens (docs/software-profiles.md §2f):
// a static batch's prompts are prefilled in sub-batches that run one after
// another, as TurboMind's context decoder does.
#include "sim/config/data_dir.h"
#include "sim/config/scenario.h"
#include "sim/hw/cost_model.h"
#include "sim/parallel/builder.h"
#include "sim/parallel/strategy.h"
#include "sim/report/runner.h"

#include <doctest/doctest.h>

#include <cstddef>
#include <string>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim;

namespace {
// Llama 3 8B on one H100, one micro-batch: its 16 GB of weights never stay
// in L2, so every prefill pass of a shape costs the same.
config::ScenarioSpec scenario(std::int64_t batch, std::int64_t prompt) {
    std::vector<config::Override> ov;
    for (const std::string s : {"model=llama3-8b", "cluster=dgx-h100", "gpus=1", "strategies=[{name: tp1, tp: 1}]",
                                "workload.output_tokens=4"})
        ov.push_back(config::parse_override(s));
    ov.push_back(config::parse_override("workload.batch=" + std::to_string(batch)));
    ov.push_back(config::parse_override("workload.prompt_tokens=" + std::to_string(prompt)));
    return config::load_scenario(std::string(sim::config::data_dir()) + "/scenarios/partitioning-16xh100-feasible.yaml",
                                 ov);
}

std::size_t prefill_tasks(const config::ScenarioSpec& sc) {
    const auto cm = hw::make_cost_model("roofline");
    const auto build = parallel::build_plan(sc, sc.strategies.front(), *cm, {});
    std::size_t n = 0;
    for (const auto& t : build.plan.tasks) n += t.phase == parallel::Phase::prefill ? 1 : 0;
    return n;
}
}  // namespace

TEST_CASE("prefill sub-batch: floor(T / (prompt - 1)) sequences, within [1, batch]; T = 0 is the whole batch") {
    auto sc = scenario(16, 2048);
    CHECK(parallel::prefill_sub_batch(sc, 16) == 16);  // no bound
    sc.profile.prefill_max_tokens = 16416;             // lmdeploy's A100 benchmark: 4 x session_len 4104
    CHECK(parallel::prefill_sub_batch(sc, 16) == 8);   // 16416 / 2047 = 8.02
    CHECK(parallel::prefill_sub_batch(sc, 64) == 8);
    CHECK(parallel::prefill_sub_batch(sc, 5) == 5);  // a smaller batch runs whole
    sc.workload.prompt_tokens = 128;
    CHECK(parallel::prefill_sub_batch(sc, 32) == 32);  // 16416 / 127 = 129 >= 32: one pass
    sc.workload.prompt_tokens = 9;
    sc.profile.prefill_max_tokens = 32;
    CHECK(parallel::prefill_sub_batch(sc, 16) == 4);  // 32 / (9 - 1): the last prompt token is not prefilled
    sc.profile.prefill_max_tokens = 16416;
    sc.workload.prompt_tokens = 1;
    CHECK(parallel::prefill_sub_batch(sc, 32) == 32);
    sc.profile.prefill_max_tokens = 100;
    sc.workload.prompt_tokens = 2048;
    CHECK(parallel::prefill_sub_batch(sc, 16) == 1);  // a prompt longer than the bound still runs, alone
}

TEST_CASE("prefill sub-batches: 16 prompts of 9 tokens under T = 32 run as 4 passes of 4, one after another") {
    // 32 / (9 - 1) = 4 sequences a pass, ceil(16 / 4) = 4 passes.
    auto split = scenario(16, 9);
    split.profile.prefill_max_tokens = 32;
    const auto four = scenario(4, 9);
    CHECK(prefill_tasks(split) == 4 * prefill_tasks(four));
    const auto whole = scenario(16, 9);
    CHECK(prefill_tasks(whole) == prefill_tasks(four));

    // The time to first token is four batch-4 prefills in a row.
    const auto t_split = *report::run_strategy(split, split.strategies.front(), {}).metrics.ttft_ms;
    const auto t_four = *report::run_strategy(four, four.strategies.front(), {}).metrics.ttft_ms;
    CHECK(t_split == doctest::Approx(4 * t_four).epsilon(0.01));
}

TEST_SUITE_END();
