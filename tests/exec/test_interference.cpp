// The interference model of the executor (executor.cpp, start_kernel): a
// kernel that starts while a collective runs on its GPU loses
// comm_sms SMs to it (its compute time scales by sm_count / (sm_count -
// comm_sms)) and shares HBM with hbm_share x the collective's link rate;
// both come from the collective library (ExecOptions::comm_sms overrides
// the first). Closed forms on two H100s with a compute-bound kernel.
#include "tests/exec/exec_harness.h"

#include "sim/config/calibration_loader.h"

#include <doctest/doctest.h>

#include <optional>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;

namespace {

// GPU 0 runs a 1 us kernel, then a 100 us kernel; with `collective`, a
// 1 GiB all-reduce between GPUs 0 and 1 starts at time 0 on the TP stream
// (milliseconds long, so it spans the second kernel). Returns when the
// second kernel ends.
Time second_kernel_end(bool collective, std::optional<int> comm_sms, bool memory_bound = false,
                       const net::CollectiveLibrary* lib = nullptr, int group_sms = 0) {
    parallel::Plan plan;
    plan.simulated_gpus = {0, 1};
    plan.streams.resize(2);
    plan.gpus_represented = 2;
    if (collective) {
        parallel::Group g;
        g.gpus = {0, 1};
        g.members = {0, 1};
        g.algorithm = "ring";
        g.sms = group_sms;
        parallel::Task c;
        c.kind = parallel::TaskKind::collective;
        c.stream = parallel::StreamKind::tp_comm;
        c.group = plan.add_group(g);
        c.op = net::CollectiveOp::all_reduce;
        c.bytes = Bytes{std::uint64_t{1} << 30};
        plan.add(c, {});
    }
    const auto first = parasim_test::add_kernel_us(plan, 1, {});
    const auto second = memory_bound ? parasim_test::add_memory_kernel_us(plan, 100, {first})
                                     : parasim_test::add_kernel_us(plan, 100, {first});
    exec::ExecOptions o;
    o.comm_sms = comm_sms;
    o.collectives = lib;
    const auto r = parasim_test::run_on_dgx_h100(plan, o);
    return r.task_end[second];
}

using parasim_test::us;

}  // namespace

TEST_CASE("interference: a compute-bound kernel beside a collective runs on the SMs the collective leaves") {
    // Alone: 1 + 100 us.
    CHECK(second_kernel_end(false, 16) == us(101));
    // Beside the all-reduce, with 16 of the H100's 132 SMs taken:
    // 100 us x 132 / 116 = 113.7931 us, after the first kernel's 1 us.
    const double expected = 1 + 100.0 * 132.0 / 116.0;
    CHECK(second_kernel_end(true, 16).seconds() * 1e6 == doctest::Approx(expected).epsilon(1e-6));
    // A collective that takes no SMs leaves a compute-bound kernel alone.
    CHECK(second_kernel_end(true, 0) == us(101));
}

TEST_CASE("interference: a collective of a group with its own SM count holds that many, not comm_sms") {
    // Transformer Engine's userbuffers kernels (Group::sms, the software
    // profile's tp_comm_pipeline_sms) beside a library whose collectives
    // take 24 SMs: 16 SMs held, 100 us x 132 / (132 - 16) = 113.7931 us;
    // 32 held, 100 x 132 / 100 = 132 us.
    CHECK(second_kernel_end(true, 24, false, nullptr, 16).seconds() * 1e6 ==
          doctest::Approx(1 + 100.0 * 132.0 / 116.0).epsilon(1e-6));
    CHECK(second_kernel_end(true, 24, false, nullptr, 32).seconds() * 1e6 ==
          doctest::Approx(1 + 100.0 * 132.0 / 100.0).epsilon(1e-6));
    // Without a count of its own the group's collective holds the library's 24.
    CHECK(second_kernel_end(true, 24).seconds() * 1e6 == doctest::Approx(1 + 100.0 * 132.0 / 108.0).epsilon(1e-6));
}

TEST_CASE("interference: a memory-bound kernel beside a collective shares HBM with the link's bytes") {
    CHECK(second_kernel_end(false, 16, true) == us(101));
    // H100: 3350 GB/s of HBM, 450 GB/s of NVLink streamed by the all-reduce:
    // 100 us x 3350 / (3350 - 450) = 115.5172 us, SMs or not.
    const double expected = 1 + 100.0 * 3350.0 / 2900.0;
    CHECK(second_kernel_end(true, 16, true).seconds() * 1e6 == doctest::Approx(expected).epsilon(1e-6));
    CHECK(second_kernel_end(true, 0, true).seconds() * 1e6 == doctest::Approx(expected).epsilon(1e-6));
}

TEST_CASE("interference: without an override the collective library's comm_sms and hbm_share apply") {
    net::CollectiveLibrary lib = config::collective_library();
    lib.comm_sms = 33;
    lib.comm_hbm_share = 0.5;
    // 100 us x 132 / (132 - 33) after the first kernel's 1 us.
    CHECK(second_kernel_end(true, std::nullopt, false, &lib).seconds() * 1e6 ==
          doctest::Approx(1 + 100.0 * 132.0 / 99.0).epsilon(1e-6));
    // Half the 450 GB/s NVLink rate through HBM: 100 us x 3350 / (3350 - 225).
    CHECK(second_kernel_end(true, std::nullopt, true, &lib).seconds() * 1e6 ==
          doctest::Approx(1 + 100.0 * 3350.0 / 3125.0).epsilon(1e-6));
    // The shipped library's 24 SMs (an H100's ncclAllGather in an Nsight profile): 100 us x 132 / 108.
    CHECK(second_kernel_end(true, std::nullopt) == second_kernel_end(true, 24));
    CHECK(second_kernel_end(true, std::nullopt).seconds() * 1e6 ==
          doctest::Approx(1 + 100.0 * 132.0 / 108.0).epsilon(1e-6));
}

TEST_SUITE_END();
