// Software profiles (topologies/software/*.yaml): every shipped stack has a
// profile that loads; malformed profiles are refused at file:line:column,
// and a value without its evidence (source: / fitted_on:) is an error.
#include "sim/config/scenario.h"
#include "sim/config/software_loader.h"
#include "sim/core/error.h"

#include "tests/test_util.h"

#include <doctest/doctest.h>

#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;
using namespace sim::config;

namespace {

const std::string kGood = R"(name: megatron-lm
description: "test"
host:
  kernel_issue: {value: 7 us, source: "a profile"}
  launch_queue_depth: {value: 64, source: "a test"}
kernel_efficiency: {value: 0.9, fitted_on: "points a, b"}
fuse_elementwise: {value: false, source: "code"}
overlaps: {value: [grad_reduce, tp_comm], source: "docs"}
)";

constexpr auto replace = &parasim_test::replace_once;

std::string error_of(const std::string& text) {
    return parasim_test::config_error_of(
        [](const std::string& t) { load_software_profile(load_string(t, "software/megatron-lm.yaml"), "megatron-lm"); },
        text);
}

}  // namespace

TEST_CASE("software profiles: a complete file is read with its evidence") {
    const SoftwareProfile p = load_software_profile(load_string(kGood, "software/megatron-lm.yaml"), "megatron-lm");
    CHECK(p.kernel_issue == Time::from_seconds_ceil(7e-6));
    CHECK(p.kernel_issue_from.kind == "source");
    CHECK(p.launch_queue_depth == 64);
    CHECK(p.kernel_efficiency == doctest::Approx(0.9));
    CHECK(p.kernel_efficiency_from.kind == "fitted_on");
    CHECK(p.kernel_efficiency_from.text == "points a, b");
    CHECK_FALSE(p.fuse_elementwise);
    CHECK(p.overlaps == std::vector<std::string>{"grad_reduce", "tp_comm"});
}

TEST_CASE("software profiles: every stack of kSoftwareNames and the default ship a profile that loads") {
    for (const auto& name : kSoftwareNames) CHECK_NOTHROW(software_profile(name));
    const SoftwareProfile d = software_profile("");
    CHECK(d.name == kDefaultSoftware);
    // The default models no host cost: a run that names no stack behaves as before profiles.
    CHECK(d.kernel_issue == Time{});
    CHECK(d.kernel_efficiency == 1.0);
    CHECK(software_profile_names().size() == kSoftwareNames.size() + 1);
    // FP8 dispatch is opt-in: only DeepSeek's stack states it (docs/moe.md section 3b).
    CHECK_FALSE(d.moe_fp8_dispatch);
    CHECK_FALSE(software_profile("megatron-core").moe_fp8_dispatch);
    const SoftwareProfile hai = software_profile("hai-llm");
    CHECK(hai.moe_fp8_dispatch);
    CHECK(hai.moe_fp8_dispatch_from.kind == "source");
}

TEST_CASE("software profiles: malformed files are errors at file:line:column naming the field") {
    CHECK(error_of(replace(kGood, "source: \"a profile\"", "note: x")) ==
          "software/megatron-lm.yaml:4:31: unknown key 'host.kernel_issue.note' (valid keys: fitted_on, source, value)");
    CHECK(error_of(replace(kGood, ", source: \"a profile\"", "")) ==
          "software/megatron-lm.yaml:4:17: host.kernel_issue: a value needs its evidence: source: or fitted_on:");
    CHECK(error_of(replace(kGood, "fitted_on: \"points a, b\"", "fitted_on: x, source: y")) ==
          "software/megatron-lm.yaml:6:44: kernel_efficiency.fitted_on: give either source or fitted_on, not both");
    CHECK(error_of(replace(kGood, "7 us", "7")) .find("software/megatron-lm.yaml:4:25: host.kernel_issue.value:") == 0);
    CHECK(error_of(replace(kGood, "7 us", "20 ms")) ==
          "software/megatron-lm.yaml:4:25: host.kernel_issue.value: a per-kernel host cost above 10 ms is not plausible");
    CHECK(error_of(replace(kGood, "value: 0.9", "value: 0.01")) ==
          "software/megatron-lm.yaml:6:28: kernel_efficiency.value: a kernel efficiency below 0.1 is not plausible");
    CHECK(error_of(replace(kGood, "tp_comm]", "tp_com]")).find("did you mean 'tp_comm'") != std::string::npos);
    CHECK(error_of(replace(kGood, "name: megatron-lm", "name: nemo")) ==
          "software/megatron-lm.yaml:1:7: name: name 'nemo' differs from the file name 'megatron-lm'");
    CHECK(error_of(replace(kGood, "kernel_efficiency:", "kernel_eficiency:")).find("did you mean 'kernel_efficiency'") !=
          std::string::npos);
}

TEST_CASE("software profiles: an unknown stack names the known profiles") {
    CHECK_THROWS_WITH_AS(software_profile("no-such-stack"), doctest::Contains("no software profile 'no-such-stack' (known: deepspeed, default, flash-attention"), ConfigError);
}

TEST_SUITE_END();
