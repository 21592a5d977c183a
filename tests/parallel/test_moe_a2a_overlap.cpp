// overlap.moe_a2a (docs/moe.md section 3e): a backward item and the forward
// item after it run as a pair whose segments alternate at the expert-
// parallel all-to-alls, each all-to-all on the ep_comm stream beside the
// other micro-batch's kernels. With every kernel taking the same time K
// (longer than an all-to-all) and no SMs lent to communication, a pair takes
// exactly its kernels' time: each of its all-to-alls is hidden whole, so
// the iteration is shorter by (pairs) x (all-to-alls of a pair) x A.
#include "sim/config/data_dir.h"
#include "sim/config/scenario.h"
#include "sim/core/error.h"
#include "sim/exec/executor.h"
#include "sim/hw/cost_model.h"
#include "sim/net/topology.h"
#include "sim/parallel/builder.h"
#include "sim/parallel/strategy.h"

#include "tests/parallel/overlap_toy.h"

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;

namespace {

const std::string kScenario = std::string(sim::config::data_dir()) + "/scenarios/moe-mixtral-8x7b-ep.yaml";
// Mixtral with 2 layers on one node: pp 1, dp 8, ep 8 (the EP group is the
// node), 4 micro-batches, no recompute; `extra` overrides on top.
// (grad_reduce false: the gradient buckets after the backward.)
config::ScenarioSpec toy(bool overlap, std::vector<std::string> extra = {}, bool grad_reduce = true) {
    std::vector<std::string> sets = {"gpus=8",
                                     "model.layers=2",
                                     "workload.recompute=none",
                                     "workload.global_batch=32",
                                     "strategies[1].pp=1",
                                     "strategies[1].dp=8",
                                     std::string("strategies[1].overlap={moe_a2a: ") + (overlap ? "true" : "false") +
                                         ", grad_reduce: " + (grad_reduce ? "true" : "false") + "}"};
    sets.insert(sets.end(), extra.begin(), extra.end());
    std::vector<config::Override> ov;
    for (const auto& s : sets) ov.push_back(config::parse_override(s));
    return config::load_scenario(kScenario, ov);
}

using Run = parasim_test::ToyRun;
using parasim_test::a2a_durations;
using parasim_test::ConstantCost;
constexpr Time kKernel = parasim_test::kToyKernel;

Run run(const config::ScenarioSpec& sc, int comm_sms, Time kernel = kKernel) {
    return parasim_test::run_toy(sc, 1, comm_sms, kernel);
}

}  // namespace

TEST_CASE("moe_a2a: each pair of a backward and the next forward hides its 8 all-to-alls exactly") {
    const auto off = run(toy(false), 0);
    const auto on = run(toy(true), 0);
    // One all-to-all size (dispatch and combine both carry T x k x h x 2
    // bytes) and one duration A, the same in both runs: nothing else uses
    // the EP group's links while it runs.
    const auto d_off = a2a_durations(off), d_on = a2a_durations(on);
    REQUIRE(d_off.size() == 1);
    REQUIRE(d_on == d_off);
    const Time a = Time::ps(*d_off.begin());
    REQUIRE(a < kKernel);  // so each neighbouring segment (at least one kernel) covers it
    // 1F1B on one stage: F0 B0 F1 B1 F2 B2 F3 B3; pairs (B0, F1), (B1, F2),
    // (B2, F3). Each holds 2 layers x (dispatch + combine) x 2 items = 8
    // all-to-alls, all hidden; F0 and B3 run alone, exposed as before.
    const int pairs = 3, per_pair = 8;
    CHECK((off.result.makespan - on.result.makespan).count_ps() ==
          static_cast<std::uint64_t>(pairs * per_pair) * a.count_ps());
    // The all-to-alls sit on the ep_comm stream under the overlap, on the TP
    // stream without it.
    const auto ep = static_cast<std::size_t>(parallel::StreamKind::ep_comm);
    const auto tp = static_cast<std::size_t>(parallel::StreamKind::tp_comm);
    CHECK(off.build.plan.streams[0][ep].empty());
    CHECK(on.build.plan.streams[0][tp].empty());
    CHECK(on.build.plan.streams[0][ep].size() == off.build.plan.streams[0][tp].size());
    // The same kernels either way, only in another order.
    CHECK(on.build.plan.streams[0][0].size() == off.build.plan.streams[0][0].size());
}

TEST_CASE("moe_a2a: the kernels beside an all-to-all lose the SMs it holds") {
    // With comm_sms SMs taken, a kernel that starts while an all-to-all runs
    // takes K x sms / (sms - comm_sms). The kernel that starts at the same
    // instant as the all-to-all is not slowed (the executor starts a stream's
    // next task before the finished task's successors), so with
    // K = 2A/3 < A < 2K exactly one kernel, the second of the segment beside
    // each hidden all-to-all, starts under it: the iteration grows by
    // 3 pairs x 8 all-to-alls x (K' - K). Unpaired items have no kernel
    // beside an all-to-all, and the gradient buckets run after the backward.
    const auto sc = toy(true, {}, false);
    const auto a_off = a2a_durations(run(toy(false, {}, false), 0));
    REQUIRE(a_off.size() == 1);
    const Time k = Time::ps(*a_off.begin() * 2 / 3);
    const int sms = sc.gpu.sm_count, comm = 22;
    const auto free = run(sc, 0, k);
    const auto taken = run(sc, comm, k);
    REQUIRE(a2a_durations(free) == a_off);
    REQUIRE(a2a_durations(taken) == a_off);
    const Time slow =
        Time::from_seconds_ceil(k.seconds() * (static_cast<double>(sms) / static_cast<double>(sms - comm)));
    const std::uint64_t extra = 3u * 8u * (slow - k).count_ps();
    CHECK((taken.result.makespan - free.result.makespan).count_ps() == extra);
}

TEST_CASE("moe_a2a: a 2-stage interleaved 1F1B pairs its items without deadlock, and gains") {
    const std::vector<std::string> pp2 = {"strategies[1].pp=2",
                                          "strategies[1].dp=4",
                                          "strategies[1].ep=4",
                                          "strategies[1].schedule=interleaved-1f1b",
                                          "strategies[1].virtual_stages=2",
                                          "model.layers=4"};
    const auto off = run(toy(false, pp2), 0);
    const auto on = run(toy(true, pp2), 0);
    CHECK(on.result.makespan < off.result.makespan);
    // Every all-to-all of the off run is in the on run, on ep_comm.
    std::size_t a_off = 0, a_on = 0;
    const auto& off_streams = off.build.plan.streams;
    const auto& on_streams = on.build.plan.streams;
    for (std::size_t g = 0; g < off_streams.size(); ++g)
        a_off += off_streams[g][parallel::stream_index(parallel::StreamKind::tp_comm)].size();
    for (std::size_t g = 0; g < on_streams.size(); ++g)
        a_on += on_streams[g][parallel::stream_index(parallel::StreamKind::ep_comm)].size();
    CHECK(a_on == a_off);
}

TEST_CASE("moe_a2a: refused without expert parallelism; one more chunk of activations in flight") {
    const auto dense = toy(true, {"strategies[1].ep=1"});
    CHECK_THROWS_AS(parallel::resolve_degrees(dense, dense.strategies.at(1)), ConfigError);
    // Plain 1F1B over 2 stages: the pairs would serialise across stages.
    const auto plain = toy(true, {"strategies[1].pp=2", "strategies[1].dp=4", "strategies[1].ep=4"});
    CHECK_THROWS_AS(parallel::resolve_degrees(plain, plain.strategies.at(1)), ConfigError);
    const auto off = toy(false), on = toy(true);
    const ConstantCost cm;
    const auto b_off = parallel::build_plan(off, off.strategies.at(1), cm, {});
    const auto b_on = parallel::build_plan(on, on.strategies.at(1), cm, {});
    // pp 1: one micro-batch in flight under 1F1B, two when the next forward
    // starts before the backward ends.
    CHECK(b_on.memory.breakdown.activations == doctest::Approx(2 * b_off.memory.breakdown.activations));
}

TEST_SUITE_END();
