// The GPU catalog: shipped files load by name; malformed or incomplete files
// are refused with file:line:column and the field named; each shipped file's
// measured GEMM ceiling is reachable by the roofline on its own figures.
#include "sim/config/data_dir.h"
#include "sim/config/gpu_loader.h"
#include "sim/core/error.h"
#include "sim/hw/cost_model.h"

#include "tests/test_util.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim;
using namespace sim::config;

namespace {

// A complete GPU file; the cases below break one line of it at a time.
const std::string kGood = R"(name: test-gpu
architecture: hopper
sm_count: 132
tensor_clock: 1830 MHz
peak: {fp32: 66.9 TFLOP/s, tf32: 494.7 TFLOP/s, fp16: 989.4 TFLOP/s, bf16: 989.4 TFLOP/s, fp8: 1978.9 TFLOP/s, int8: unsupported}
memory: {kind: HBM3, capacity: 80 GB, bandwidth: 3350 GB/s}
l2: {size: 50 MiB, bandwidth: 9700 GB/s}
nvlink: {generation: 4, links: 18, bandwidth: 450 GB/s}
pcie: {generation: 5, bandwidth: 63 GB/s}
efficiency:
  gemm: {fp32: 0.8, tf32: 0.8, fp16: 0.8, bf16: 0.8, fp8: 0.7}
  hbm: 0.9
  l2: 0.8
  launch_overhead: 4 us
  nccl_nvlink: 0.82
  nccl_pcie: 0.8
gemm_tile: {m: 128, n: 256}
)";

constexpr auto replace = &parasim_test::replace_once;

std::string error_of(const std::string& text) {
    return parasim_test::config_error_of([](const std::string& t) { load_gpu(load_string(t, "gpus/test-gpu.yaml")); },
                                         text);
}

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        path = std::filesystem::temp_directory_path() / ("parasim-gpus-" + std::to_string(::getpid()) + "-" +
                                                         std::to_string(reinterpret_cast<std::uintptr_t>(this)));
        std::filesystem::create_directories(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    std::string write(const std::string& file, const std::string& text) const {
        std::ofstream(path / file) << text;
        return (path / file).string();
    }
};

}  // namespace

TEST_CASE("every shipped GPU file loads by name") {
    GpuCatalog catalog;
    const auto names = catalog.names();
    REQUIRE(names.size() >= 10);
    for (const auto& name : names) {
        CAPTURE(name);
        const hw::GpuSpec& g = catalog.get(name);
        CHECK(g.name == name);
        CHECK(g.sm_count > 0);
        CHECK(g.supports(hw::DType::fp32));
        CHECK(g.memory_capacity.value > 0);
        CHECK(g.memory_bandwidth.bytes_per_s > 0);
        CHECK(g.l2_size.value > 0);
        for (hw::DType t : hw::kAllDTypes) {
            const double ceiling = g.efficiency.gemm[static_cast<std::size_t>(t)];
            if (g.supports(t)) {
                CHECK(ceiling > 0.0);
                CHECK(ceiling <= 1.0);
            } else {
                CHECK(ceiling == 0.0);
            }
        }
        CHECK((g.nvlink_generation > 0) == (g.efficiency.nccl_nvlink > 0.0));
    }
}

// A file's GEMM ceiling is a measured best-shape rate (MAMF or cuBLASLt); the
// roofline must be able to reach it on a large square GEMM, or the other
// figures of the file (L2 bandwidth, tile) contradict that measurement
// (docs/hardware-model.md, section 2.4).
TEST_CASE("every shipped GPU file's measured GEMM ceiling is reachable by its roofline") {
    GpuCatalog catalog;
    const auto model = hw::make_cost_model("roofline");
    constexpr std::int64_t kSide = 16384;
    for (const auto& name : catalog.names()) {
        const hw::GpuSpec& g = catalog.get(name);
        for (hw::DType t : {hw::DType::bf16, hw::DType::fp8}) {
            if (!g.supports(t)) continue;
            const std::string dtype{hw::to_string(t)};
            CAPTURE(name);
            CAPTURE(dtype);
            hw::KernelDesc d;
            d.name = "gemm";
            d.kind = hw::KernelKind::gemm;
            d.dtype = t;
            d.m = d.n = d.k = kSide;
            const double side = static_cast<double>(kSide), e = hw::bytes_per_element(t);
            d.flops = Flops{2.0 * side * side * side};
            d.bytes_read = Bytes::ceil(2.0 * side * side * e);
            d.bytes_written = Bytes::ceil(side * side * e);
            const double achieved = d.flops.value / model->cost(g, d, {}).duration.seconds();
            CHECK(achieved >= 0.9 * g.gemm_ceiling(t) * g.peak_of(t).per_s);
        }
    }
}

TEST_CASE("the H100 SXM file has the datasheet figures") {
    GpuCatalog catalog;
    const hw::GpuSpec& g = catalog.get("h100-sxm");
    CHECK(g.architecture == "hopper");
    CHECK(g.sm_count == 132);
    CHECK(g.peak_of(hw::DType::bf16).per_s == doctest::Approx(989.4e12));
    CHECK(g.memory_bandwidth.bytes_per_s == doctest::Approx(3350e9));
    CHECK(g.l2_size.value == 50ULL << 20);
    CHECK(g.gemm_cluster == 2);             // Hopper default
    CHECK(&catalog.get("h100-sxm") == &g);  // cached
    CHECK(catalog.contains("h100-sxm"));
    CHECK_FALSE(catalog.contains("h100"));
}

TEST_CASE("HBM capacity is the total the driver reports, not the datasheet's GB read as 10^9 bytes") {
    // docs/hardware-model.md §6: nvidia-smi's memory.total, in MiB.
    GpuCatalog catalog;
    CHECK(catalog.get("a100-sxm-80gb").memory_capacity.value == 81920ULL << 20);  // "80 GB" = 80 GiB = 85.90 GB
    CHECK(catalog.get("h100-sxm").memory_capacity.value == 81559ULL << 20);       // "80 GB" reports 85.52 GB
    CHECK(catalog.get("h200").memory_capacity.value == 143771ULL << 20);          // "141 GB" reports 150.75 GB
}

TEST_CASE("an unknown GPU name is refused with a suggestion and the available names") {
    GpuCatalog catalog;
    try {
        catalog.get("h100-sxn");
        FAIL("no error");
    } catch (const ConfigError& e) {
        const std::string what = e.what();
        CHECK(what.find("unknown GPU 'h100-sxn' (did you mean 'h100-sxm'?)") != std::string::npos);
        CHECK(what.find("a100-sxm-80gb") != std::string::npos);
    }
    CHECK_THROWS_AS(gpu_path("no-such-gpu"), ConfigError);
    CHECK(gpu_path("h100-sxm") == std::string(sim::config::data_dir()) + "/topologies/gpus/h100-sxm.yaml");
    CHECK(gpu_path("my/own.yaml") == "my/own.yaml");
}

TEST_CASE("a complete inline GPU description loads") {
    const hw::GpuSpec g = load_gpu(load_string(kGood, "gpus/test-gpu.yaml"));
    CHECK(g.name == "test-gpu");
    CHECK_FALSE(g.supports(hw::DType::int8));
    CHECK(g.efficiency.launch_overhead == Time::us(4));
    CHECK(g.gemm_tile_m == 128);
    CHECK(g.gemm_tile_n == 256);
    CHECK_FALSE(g.efficiency.attention.has_value());
}

TEST_CASE("a missing field is refused with file:line:column and the field named") {
    CHECK(error_of(replace(kGood, "sm_count: 132\n", "")) ==
          "gpus/test-gpu.yaml:1:1: missing required field 'sm_count'");
    CHECK(error_of(replace(kGood, "bf16: 989.4 TFLOP/s, ", "")) ==
          "gpus/test-gpu.yaml:5:7: peak: missing required field 'bf16'");
    CHECK(error_of(replace(kGood, "  hbm: 0.9\n", "")) ==
          "gpus/test-gpu.yaml:11:3: efficiency: missing required field 'hbm'");
    CHECK(error_of(replace(kGood, "fp8: 0.7}", "}")) ==
          "gpus/test-gpu.yaml:11:9: efficiency.gemm: missing required field 'fp8'");
}

TEST_CASE("malformed GPU files are refused at the offending value") {
    SUBCASE("a bare number where a unit is due") {
        CHECK(error_of(replace(kGood, "bandwidth: 3350 GB/s", "bandwidth: 3350")) ==
              "gpus/test-gpu.yaml:6:50: memory.bandwidth: '3350' has no unit; write it with one, like '450 GB/s' or "
              "'400 Gb/s'");
    }
    SUBCASE("a misspelt key") {
        // A misspelt key, required or optional, is an unknown key with a suggestion.
        CHECK(error_of(replace(kGood, "sm_count:", "sm_cout:")) ==
              "gpus/test-gpu.yaml:3:1: unknown key 'sm_cout' (did you mean 'sm_count'?)");
        CHECK(error_of(replace(kGood, "  nccl_pcie: 0.8\n", "  nccl_pcie: 0.8\n  atention: 0.6\n")) ==
              "gpus/test-gpu.yaml:17:3: unknown key 'efficiency.atention' (did you mean 'attention'?)");
    }
    SUBCASE("a ceiling for a dtype the GPU does not support") {
        CHECK(error_of(replace(kGood, "fp8: 0.7}", "fp8: 0.7, int8: 0.7}")) ==
              "gpus/test-gpu.yaml:11:70: efficiency.gemm.int8: int8 is unsupported on this GPU (peak.int8: "
              "unsupported); remove this ceiling");
    }
    SUBCASE("an efficiency above 1") {
        CHECK(error_of(replace(kGood, "hbm: 0.9", "hbm: 1.9")) ==
              "gpus/test-gpu.yaml:12:8: efficiency.hbm: 1.9 is out of range [0, 1]");
    }
    SUBCASE("an NCCL NVLink efficiency without NVLink") {
        const std::string text =
            replace(kGood, "nvlink: {generation: 4, links: 18, bandwidth: 450 GB/s}", "nvlink: none");
        CHECK(error_of(text).find("efficiency.nccl_nvlink: the GPU has no NVLink") != std::string::npos);
        CHECK(error_of(replace(text, "nccl_nvlink: 0.82", "nccl_nvlink: none")) == "no error");
    }
    SUBCASE("an unknown architecture") {
        CHECK(
            error_of(replace(kGood, "architecture: hopper", "architecture: hoper"))
                .find("'hoper' is not one of volta, turing, ampere, ada, hopper, blackwell (did you mean 'hopper'?)") !=
            std::string::npos);
    }
}

TEST_CASE("optional fields: attention efficiency and the GEMM cluster") {
    std::string text = replace(kGood, "  nccl_pcie: 0.8\n", "  nccl_pcie: 0.8\n  attention: 0.66\n");
    text = replace(text, "gemm_tile: {m: 128, n: 256}", "gemm_tile: {m: 128, n: 256, cluster: 1}");
    const hw::GpuSpec g = load_gpu(load_string(text, "x.yaml"));
    REQUIRE(g.efficiency.attention.has_value());
    CHECK(*g.efficiency.attention == 0.66);
    CHECK(g.gemm_cluster == 1);
    CHECK(load_gpu(load_string(replace(kGood, "hopper", "ampere"), "x.yaml")).gemm_cluster == 1);
}

TEST_CASE("optional field: a grouped call's setup, a time; absent, none") {
    CHECK(load_gpu(load_string(kGood, "x.yaml")).efficiency.grouped_setup == Time{});
    const std::string text = replace(kGood, "  nccl_pcie: 0.8\n", "  nccl_pcie: 0.8\n  grouped_setup: 7.5 us\n");
    CHECK(load_gpu(load_string(text, "x.yaml")).efficiency.grouped_setup == Time::ps(7500000));
    CHECK(error_of(replace(text, "7.5 us", "7.5")) ==
          "gpus/test-gpu.yaml:17:18: efficiency.grouped_setup: '7.5' has no unit; write it with one, like '2 us'");
    CHECK(error_of(replace(text, "7.5 us", "-7.5 us")) ==
          "gpus/test-gpu.yaml:17:18: efficiency.grouped_setup: '-7.5 us' is negative");
    CHECK(error_of(replace(text, "7.5 us", "7.5 ms")) ==
          "gpus/test-gpu.yaml:17:18: efficiency.grouped_setup: a setup above 1 ms is not plausible");
}

TEST_CASE("a user adds a GPU by adding a file; its name must match the file name") {
    TempDir dir;
    dir.write("test-gpu.yaml", kGood);
    GpuCatalog catalog(dir.path.string());
    CHECK(catalog.names() == std::vector<std::string>{"test-gpu"});
    CHECK(catalog.get("test-gpu").sm_count == 132);

    const std::string wrong = dir.write("other.yaml", kGood);
    CHECK_THROWS_WITH_AS(load_gpu_file(wrong),
                         (wrong + ":1:7: name: 'test-gpu' does not match the file name; write 'name: other'").c_str(),
                         ConfigError);
}

TEST_SUITE_END();
