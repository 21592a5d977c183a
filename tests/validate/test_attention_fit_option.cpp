// parasim validate --attention-fit FILE (ValidateOptions::attention_fit,
// GpuCatalog's second constructor): every GPU takes its attention shape
// constants from the given kernel file, so tools/fit-kernel-constants.py
// --attention-shape can search head_dim0_flash2 and seq0_backward without
// editing topologies/kernels/flash-attention.yaml.
#include "sim/config/calibration_loader.h"
#include "sim/config/gpu_loader.h"
#include "sim/config/yaml_reader.h"
#include "sim/core/error.h"
#include "sim/validate/dataset.h"
#include "sim/validate/validate.h"

#include "tests/test_util.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

namespace {

std::string shipped_fit() {
    std::ifstream in(sim::config::default_attention_fit_path());
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The shipped kernel file with head_dim0_flash2 at `d0`, in a temporary file.
std::string fit_file(const std::string& d0) {
    const auto path = parasim_test::private_temp("test-attention-fit-" + d0 + ".yaml");
    std::ofstream(path) << parasim_test::replace_once(shipped_fit(), "head_dim0_flash2:\n  value: 24",
                                                      "head_dim0_flash2:\n  value: " + d0);
    return path.string();
}

// One FlashAttention-2 forward kernel at head_dim 64, long and non-causal:
// compute-bound, so its time past the launch is FLOPs / (share * hd * ...).
const char* const kPoint = R"(points:
- id: fa2-hd64
  kind: attention
  source: "a test"
  hardware: {gpu: h100-sxm, gpus: 1}
  op: {batch: 1, heads: 32, head_dim: 64, seq_len: 16384, causal: false, dtype: bf16, impl: flash2, pass: fwd}
  measured: {metric: time_us, value: 1000}
)";

double simulated_us(const std::string& attention_fit) {
    const auto d = sim::validate::parse_dataset(sim::config::load_string(kPoint, "data.yaml"));
    sim::validate::ValidateOptions o;
    o.jobs = 1;
    o.attention_fit = attention_fit;
    const auto r = sim::validate::validate(d, o);
    REQUIRE(r.outcomes.size() == 1);
    REQUIRE_FALSE(r.outcomes[0].skipped);
    return r.outcomes[0].simulated;
}

}  // namespace

TEST_CASE("validate --attention-fit: every GPU of the catalog takes the file's shape constants") {
    sim::config::GpuCatalog shipped, fitted(sim::config::default_gpu_dir(), fit_file("0"));
    CHECK(shipped.get("h100-sxm").attention_fit.head_dim0_flash2 == 24);
    CHECK(fitted.get("h100-sxm").attention_fit.head_dim0_flash2 == 0);
    CHECK(fitted.get("a100-sxm-80gb").attention_fit.head_dim0_flash2 == 0);
    // The rest of the file is the shipped one.
    CHECK(fitted.get("h100-sxm").attention_fit.seq0_backward == shipped.get("h100-sxm").attention_fit.seq0_backward);
    // "" is the shipped file.
    sim::config::GpuCatalog empty(sim::config::default_gpu_dir(), "");
    CHECK(empty.get("h200").attention_fit.head_dim0_flash2 == 24);
}

TEST_CASE("validate --attention-fit: an FA2 head_dim-64 kernel runs at the file's head_dim loss") {
    // hd = (d/(d+d0)) / (128/(128+d0)): 1 with d0 = 0; (64/88)/(128/152) with d0 = 24.
    // The kernel is compute-bound: time - launch (5.5 us on H100) scales as 1/hd,
    // (88 * 128) / (64 * 152) = 11264 / 9728 from d0 = 0 to d0 = 24.
    const double launch_us = 5.5;
    const double at0 = simulated_us(fit_file("0")), at24 = simulated_us(fit_file("24"));
    CHECK((at24 - launch_us) / (at0 - launch_us) == doctest::Approx(11264.0 / 9728.0).epsilon(1e-6));
    CHECK(simulated_us("") == doctest::Approx(at24).epsilon(1e-9));
}

TEST_CASE("validate --attention-fit: a file that is not a kernel fit is a ConfigError naming it") {
    const auto path = parasim_test::private_temp("test-attention-fit-bad.yaml");
    std::ofstream(path) << parasim_test::replace_once(shipped_fit(), "seq0_backward:", "seq0_backwards:");
    try {
        sim::config::GpuCatalog c(sim::config::default_gpu_dir(), path.string());
        FAIL("no error");
    } catch (const sim::ConfigError& e) {
        CHECK(std::string(e.what()).find(path.filename().string()) != std::string::npos);
        CHECK(std::string(e.what()).find("seq0_backwards") != std::string::npos);
    }
}

TEST_SUITE_END();
