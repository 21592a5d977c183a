// The sglang software profile and what overlap.two_batch adds to the
// configuration (docs/software-profiles.md §2i, docs/moe.md section 8a): the
// shipped profile's values and evidence, the `moe_a2a_sms` key's bounds, the
// `two_batch` overlap name, and the one overlap an inference validation
// point may give.
#include "sim/config/data_dir.h"
#include "sim/config/software_loader.h"
#include "sim/core/error.h"
#include "sim/validate/dataset.h"

#include "tests/test_util.h"

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;
using namespace sim::config;

namespace {

const std::string kProfile = R"(name: sglang
description: "test"
host:
  kernel_issue: {value: 0 us, source: "a"}
  launch_queue_depth: {value: 1024, source: "b"}
kernel_efficiency: {value: 1.0, source: "c"}
fuse_elementwise: {value: true, source: "d"}
overlaps: {value: [two_batch], source: "e"}
)";

std::string profile_error(const std::string& text) {
    return parasim_test::config_error_of(
        [](const std::string& t) { load_software_profile(load_string(t, "software/sglang.yaml"), "sglang"); }, text);
}

std::string file_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

TEST_CASE("sglang profile: two-batch overlap listed, DeepEP's 20 SMs, default's host and kernels") {
    const SoftwareProfile p = software_profile("sglang");
    CHECK(p.overlaps == std::vector<std::string>{"two_batch"});
    CHECK(p.moe_a2a_sms == 20);
    CHECK(p.moe_a2a_sms_from.text.find("num_sms: int = 20") != std::string::npos);
    CHECK(p.moe_dispatcher == "auto");
    CHECK(p.moe_a2a_decode == "deepep-ll");  // docs/moe.md section 3k
    CHECK(p.moe_fp8_dispatch_decode);
    CHECK(p.moe_a2a_decode_from.text.find("use_fp8=True") != std::string::npos);
    CHECK(p.kernel_issue == Time{});
    CHECK(p.kernel_efficiency == 1.0);
    // A stack that does not list the overlap: the default's fields.
    CHECK(software_profile("vllm").moe_a2a_sms == 0);
    CHECK(software_profile("vllm").moe_a2a_decode == "auto");
    CHECK_FALSE(software_profile("vllm").moe_fp8_dispatch_decode);
}

TEST_CASE("moe_a2a_decode: a registered all-to-all or auto, with its evidence") {
    const SoftwareProfile p = load_software_profile(
        load_string(kProfile + "moe_a2a_decode: {value: direct, source: \"x\"}\n", "software/sglang.yaml"), "sglang");
    CHECK(p.moe_a2a_decode == "direct");
    CHECK_FALSE(p.moe_fp8_dispatch_decode);  // FP8 goes with DeepEP's low-latency dispatch only
    // An all-reduce algorithm, a typo, no evidence: one message at the value.
    CHECK(profile_error(kProfile + "moe_a2a_decode: {value: ring, source: \"x\"}\n").find("sglang.yaml:9:") !=
          std::string::npos);
    CHECK(profile_error(kProfile + "moe_a2a_decode: {value: deepep-lll, source: \"x\"}\n")
              .find("did you mean 'deepep-ll'") != std::string::npos);
    CHECK(profile_error(kProfile + "moe_a2a_decode: {value: deepep-ll}\n").find("moe_a2a_decode") != std::string::npos);
}

TEST_CASE("sglang profile: moe_a2a_sms is bounded and needs its evidence; two_batch is an overlap name") {
    const SoftwareProfile p = load_software_profile(
        load_string(kProfile + "moe_a2a_sms: {value: 24, source: \"x\"}\n", "software/sglang.yaml"), "sglang");
    CHECK(p.moe_a2a_sms == 24);
    CHECK(profile_error(kProfile + "moe_a2a_sms: {value: 65, source: \"x\"}\n").find("moe_a2a_sms") !=
          std::string::npos);
    CHECK(profile_error(kProfile + "moe_a2a_sms: {value: 20}\n").find("moe_a2a_sms") != std::string::npos);
    const std::string typo = parasim_test::replace_once(kProfile, "[two_batch]", "[two_batches]");
    CHECK(profile_error(typo).find("sglang.yaml:8:") != std::string::npos);
}

TEST_CASE("sglang profile: the exchange beside compute, its evidence and bounds") {
    const SoftwareProfile p = software_profile("sglang");
    CHECK(p.moe_a2a_beside_compute == 0.816);
    CHECK(p.moe_a2a_beside_compute_from.text.find("train.json") != std::string::npos);
    CHECK(software_profile("vllm").moe_a2a_beside_compute == 1.0);
    const SoftwareProfile q = load_software_profile(
        load_string(kProfile + "moe_a2a_beside_compute: {value: 0.5, source: \"x\"}\n", "software/sglang.yaml"),
        "sglang");
    CHECK(q.moe_a2a_beside_compute == 0.5);
    // A slowdown factor typed for the rate, a percentage, no evidence.
    CHECK(profile_error(kProfile + "moe_a2a_beside_compute: {value: 1.36, source: \"x\"}\n")
              .find("moe_a2a_beside_compute") != std::string::npos);
    CHECK(profile_error(kProfile + "moe_a2a_beside_compute: {value: 0.05, source: \"x\"}\n").find("not plausible") !=
          std::string::npos);
    CHECK(profile_error(kProfile + "moe_a2a_beside_compute: {value: 0.7}\n").find("moe_a2a_beside_compute") !=
          std::string::npos);
}

TEST_CASE("moe_shared_experts: whole in the sglang profile (DeepEP's tp_size 1), tp by default, nothing else") {
    const SoftwareProfile p = software_profile("sglang");
    CHECK(p.moe_shared_experts_whole);
    CHECK(p.moe_shared_experts_from.text.find("tp_size=1") != std::string::npos);
    CHECK_FALSE(software_profile("vllm").moe_shared_experts_whole);
    CHECK_FALSE(software_profile("nemo").moe_shared_experts_whole);
    const SoftwareProfile q = load_software_profile(
        load_string(kProfile + "moe_shared_experts: {value: tp, source: \"x\"}\n", "software/sglang.yaml"), "sglang");
    CHECK_FALSE(q.moe_shared_experts_whole);
    CHECK(profile_error(kProfile + "moe_shared_experts: {value: hole, source: \"x\"}\n").find("sglang.yaml:9:") !=
          std::string::npos);
    CHECK(profile_error(kProfile + "moe_shared_experts: {value: whole}\n").find("moe_shared_experts") !=
          std::string::npos);
}

TEST_CASE("validation points: an inference point may give overlap.two_batch, and no training overlap") {
    const std::string path = std::string(data_dir()) + "/tests/data/validation/moe-dp-attention.yaml";
    const std::string text = file_text(path);
    const std::string from = "enable_dp_lm_head: true,\n      overlap: {two_batch: true}}";
    const auto parse = [](const std::string& t) { return validate::parse_dataset(load_string(t, "moe.yaml")); };
    // The shipped file's first point, the LMSYS prefill, is an inference point with the overlap LMSYS ran.
    const auto shipped = parse(text);
    REQUIRE(!shipped.points.empty());
    CHECK(shipped.points[0].parallelism.overlap.two_batch);
    const std::string err = parasim_test::config_error_of(
        parse, parasim_test::replace_once(text, from, "enable_dp_lm_head: true, overlap: {tp_comm: true}}"));
    CHECK(err.find("moe.yaml:") != std::string::npos);
    CHECK(err.find("overlap.tp_comm applies to training points only") != std::string::npos);
}

TEST_SUITE_END();
