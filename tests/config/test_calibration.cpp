// Calibration files (topologies/collectives/*.yaml, topologies/kernels/
// flash-attention.yaml): the shipped ones load and reach the models they
// calibrate; malformed ones are refused at file:line:column, and a number
// without its evidence (source: / fitted_on:) is an error.
#include "sim/config/calibration_loader.h"
#include "sim/config/cluster_loader.h"
#include "sim/config/gpu_loader.h"
#include "sim/core/error.h"
#include "sim/exec/comm_tuning.h"

#include "tests/test_util.h"

#include <doctest/doctest.h>

#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;
using namespace sim::config;

namespace {

const std::string kGood = R"(name: lib
description: "test"
protocols:
  - name: LL
    bandwidth_share: {value: 0.25, fitted_on: "points a, b"}
    link_latency: {value: {nvlink: 1 us, pcie: 2 us, network: 3 us}, source: "a table"}
    step_overhead: {value: 500 ns, fitted_on: "points c"}
    base_latency: {value: 4 us, source: "a table"}
  - name: Simple
    bandwidth_share: {value: 1.0, source: "the reference"}
    link_latency: {value: {nvlink: 5 us, pcie: 6 us, network: 7 us}, source: "a table"}
    step_overhead: {value: 2 us, fitted_on: "points c"}
    base_latency: {value: 8 us, source: "a table"}
in_switch:
  efficiency: {value: 0.5, source: "code"}
  latency: {value: 30 us, fitted_on: "points d"}
interference:
  comm_sms: {value: 12, source: "an assumption"}
  hbm_share: {value: 0.5, source: "an assumption"}
)";

constexpr auto replace = &parasim_test::replace_once;

net::CollectiveLibrary load_good(const std::string& text) {
    return load_collective_library(load_string(text, "collectives/lib.yaml"), "lib");
}

std::string error_of(const std::string& text) {
    return parasim_test::config_error_of([](const std::string& t) { load_good(t); }, text);
}

}  // namespace

TEST_CASE("collective library: a complete file is read, and tuning combines it with the GPU's fractions") {
    const net::CollectiveLibrary lib = load_good(kGood);
    REQUIRE(lib.protocols.size() == 2);
    CHECK(lib.link_latency(net::LinkClass::pcie) == Time::us(2));  // the first protocol's
    CHECK(lib.simple().name == "Simple");
    CHECK(lib.comm_sms == 12);
    CHECK(lib.comm_hbm_share == 0.5);
    // On an NVSwitch cluster a step inside a node costs the NVLink latency
    // plus the overhead: LL 1 + 0.5 us, Simple 5 + 2 us; between nodes
    // 3 + 0.5 and 7 + 2 us.
    GpuCatalog gpus;
    const auto cluster = load_cluster_file("dgx-h100");
    const exec::CommTuning t = exec::tuning_for(gpus.get(cluster.gpu), cluster, lib);
    REQUIRE(t.protocols.size() == 2);
    CHECK(t.protocols[0].step_latency == Time::ns(1500));
    CHECK(t.protocols[0].network_step_latency == Time::ns(3500));
    CHECK(t.protocols[0].bandwidth_share == 0.25);
    CHECK(t.protocols[1].step_latency == Time::us(7));
    CHECK(t.protocols[1].base_latency == Time::us(8));
    CHECK(t.step_latency == Time::us(7));
    CHECK(t.in_switch_efficiency == 0.5);
    CHECK(t.in_switch_latency == Time::us(30));
    const net::CollectiveRequest r = exec::make_request(gpus.get(cluster.gpu), cluster, lib);
    CHECK(r.network_step_latency == Time::us(9));
    // On a PCIe cluster the PCIe latency replaces NVLink's: Simple 6 + 2 us.
    const auto pcie = load_cluster_file("pcie-h100-x8");
    CHECK(exec::tuning_for(gpus.get(pcie.gpu), pcie, lib).step_latency == Time::us(8));
}

TEST_CASE("network efficiency: NCCL's rate for the GPU-PCIe-NIC path over the path's bottleneck") {
    GpuCatalog gpus;
    // DGX H100: PCIe Gen5 63 GB/s at NCCL's 0.76 is 47.88 GB/s, below the
    // 400 Gb/s NIC's 50, which is the physical bottleneck: 47.88 / 50.
    const auto h100 = load_cluster_file("dgx-h100-x2");
    const hw::GpuSpec& gpu = gpus.get(h100.gpu);
    REQUIRE(gpu.efficiency.nccl_pcie == doctest::Approx(0.76));
    CHECK(exec::network_efficiency(gpu, h100) == doctest::Approx(0.9576).epsilon(1e-12));
    CHECK(exec::tuning_for(gpu, h100, collective_library()).network_efficiency ==
          doctest::Approx(0.9576).epsilon(1e-12));
    CHECK(exec::make_request(gpu, h100, collective_library()).network_efficiency ==
          doctest::Approx(0.9576).epsilon(1e-12));
    // PCIe Gen4 (31.5 GB/s) behind the same NIC: PCIe is the bottleneck and
    // NCCL's PCIe figure (0.76 x 31.5 = 23.94 GB/s) the path rate: 0.76.
    net::ClusterSpec gen4 = h100;
    gen4.links[static_cast<std::size_t>(net::LinkClass::pcie)]->bandwidth = Bandwidth{31.5e9};
    CHECK(exec::network_efficiency(gpu, gen4) == doctest::Approx(0.76).epsilon(1e-12));
    // A 200 Gb/s NIC (25 GB/s) on Gen4: min(23.94, 25) / 25 = 0.9576.
    gen4.links[static_cast<std::size_t>(net::LinkClass::network)]->bandwidth = Bandwidth{25e9};
    CHECK(exec::network_efficiency(gpu, gen4) == doctest::Approx(0.9576).epsilon(1e-12));
    // No network: the PCIe figure, unused.
    const auto one = load_cluster_file("dgx-h100");
    CHECK(exec::network_efficiency(gpu, one) == doctest::Approx(0.76));
}

TEST_CASE("collective library: the shipped NCCL file loads with NCCL's three protocols") {
    const net::CollectiveLibrary& lib = collective_library();
    CHECK(lib.name == kDefaultCollectiveLibrary);
    REQUIRE(lib.protocols.size() == 3);
    CHECK(lib.protocols[0].name == "LL");
    CHECK(lib.protocols[2].name == "Simple");
    // NVLink Simple step: NCCL's 3.4 us hardware latency + the fitted 8.6 us.
    GpuCatalog gpus;
    const auto cluster = load_cluster_file("dgx-a100");
    CHECK(exec::tuning_for(gpus.get(cluster.gpu), cluster, lib).step_latency == Time::us(12));
    CHECK(&collective_library() == &lib);  // loaded once
    CHECK_THROWS_AS(collective_library("no-such-library"), ConfigError);
}

TEST_CASE("collective library: malformed files are errors at file:line:column naming the field") {
    CHECK(error_of(replace(kGood, "value: 0.25", "value: 1.5"))
              .find("collectives/lib.yaml:5:30: protocols[0].bandwidth_share.value:") == 0);
    CHECK(error_of(replace(kGood, "value: 0.25", "value: 0")) ==
          "collectives/lib.yaml:5:30: protocols[0].bandwidth_share.value: must be above 0");
    CHECK(error_of(replace(kGood, ", source: \"code\"", "")) ==
          "collectives/lib.yaml:15:15: in_switch.efficiency: a value needs its evidence: source: or fitted_on:");
    CHECK(error_of(replace(kGood, "30 us", "30 s")) ==
          "collectives/lib.yaml:16:20: in_switch.latency.value: a latency above 10 ms is not plausible");
    CHECK(error_of(replace(kGood, "pcie: 2 us, ", "")).find("collectives/lib.yaml:6:") == 0);
    CHECK(error_of(replace(kGood, "name: Simple", "name: LL")).find("listed twice") != std::string::npos);
    CHECK(error_of(replace(kGood, "name: Simple", "name: Bulk")).find("one protocol must be named 'Simple'") !=
          std::string::npos);
    CHECK(error_of(replace(kGood, "comm_sms: {value: 12", "comm_sms: {value: 12.5")).find("collectives/lib.yaml:18:") ==
          0);
    CHECK(error_of(replace(kGood, "hbm_share", "hbm_shares")).find("unknown key") != std::string::npos);
    CHECK(error_of(replace(kGood, "name: lib", "name: other")) ==
          "collectives/lib.yaml:1:7: name: name 'other' differs from the file name 'lib'");
}

TEST_CASE("collective library: NVLS's pipeline (channels, chunk, fill rounds) is optional, but only whole") {
    // Without it (kGood) there is no fill; the shipped file has NCCL's 16 Hopper channels and 128 KiB chunks.
    CHECK(load_good(kGood).in_switch_channels == 0);
    const net::CollectiveLibrary& shipped = collective_library();
    CHECK(shipped.in_switch_channels == 16);
    CHECK(shipped.in_switch_chunk == Bytes{128 * 1024});
    CHECK(shipped.in_switch_fill > 0);
    const std::string whole = replace(kGood, "  latency: {value: 30 us, fitted_on: \"points d\"}\n",
                                      "  latency: {value: 30 us, fitted_on: \"points d\"}\n"
                                      "  channels: {value: 4, source: \"code\"}\n"
                                      "  chunk: {value: 64 KiB, source: \"code\"}\n"
                                      "  fill_rounds: {value: 1.5, fitted_on: \"points e\"}\n");
    const net::CollectiveLibrary lib = load_good(whole);
    CHECK(lib.in_switch_channels == 4);
    CHECK(lib.in_switch_chunk == Bytes{65536});
    CHECK(lib.in_switch_fill == 1.5);
    // It reaches the request the executor builds.
    GpuCatalog gpus;
    const auto cluster = load_cluster_file("dgx-h100");
    const net::CollectiveRequest r = exec::make_request(gpus.get(cluster.gpu), cluster, lib);
    CHECK(r.in_switch_channels == 4);
    CHECK(r.in_switch_chunk == Bytes{65536});
    CHECK(r.in_switch_fill == 1.5);
    CHECK(error_of(replace(whole, "  chunk: {value: 64 KiB, source: \"code\"}\n", "")) ==
          "collectives/lib.yaml:15:3: in_switch: give channels, chunk and fill_rounds together ('chunk' is missing)");
    CHECK(error_of(replace(whole, "64 KiB", "512 B")) ==
          "collectives/lib.yaml:18:18: in_switch.chunk.value: must be 1 KiB to 1 GiB");
    CHECK(error_of(replace(whole, "value: 4,", "value: 0,")).find("collectives/lib.yaml:17:") == 0);
    CHECK(error_of(replace(whole, "fitted_on: \"points e\"", "")).find("collectives/lib.yaml:19:") == 0);
}

TEST_CASE("attention fit: the shipped file reaches every GPU of the catalog; bad values are refused") {
    const hw::AttentionFit& fit = attention_fit();
    CHECK(fit.block == 128);
    CHECK(fit.backward_share > 0);
    GpuCatalog gpus;
    for (const auto& name : gpus.names()) {
        CAPTURE(name);
        CHECK(gpus.get(name).attention_fit.backward_share == fit.backward_share);
        CHECK(gpus.get(name).attention_fit.head_dim0 == fit.head_dim0);
    }
    const std::string good = R"(name: flash-attention
description: "test"
block: {value: 64, source: "a"}
seq0: {value: 100, fitted_on: "b"}
head_dim0: {value: 32, fitted_on: "b"}
ref_head_dim: {value: 128, source: "c"}
backward_share: {value: 0.5, fitted_on: "d"}
default_share: {value: 0.7, source: "e"}
triton_forward: {value: 1.4, source: "f"}
triton_backward: {value: 2.0, source: "f"}
head_dim0_flash2: {value: 24, fitted_on: "g"}
seq0_backward: {value: 224, fitted_on: "g"}
flash3_tiles:
  value: [{head_dim: 64, block_m: 192, block_n: 128}, {head_dim: 256, block_m: 128, block_n: 80}]
  source: "h"
)";
    const hw::AttentionFit f = load_attention_fit(load_string(good, "kernels/flash-attention.yaml"));
    CHECK(f.block == 64);
    CHECK(f.seq0 == 100);
    CHECK(f.default_share == 0.7);
    CHECK(f.triton_backward == 2.0);
    CHECK(f.head_dim0_flash2 == 24);
    CHECK(f.seq0_backward == 224);
    REQUIRE(f.flash3_tiles.size() == 2);
    CHECK(f.flash3_tiles[1].head_dim == 256);
    CHECK(f.flash3_tiles[1].block_n == 80);
    CHECK(fit.flash3_tiles.size() == 3);  // the shipped file: FA3's head_dim 64, 128 and 256
    const auto err = [](const std::string& t) {
        return parasim_test::config_error_of(
            [](const std::string& s) { load_attention_fit(load_string(s, "kernels/flash-attention.yaml")); }, t);
    };
    CHECK(err(replace(good, "value: 0.5", "value: 1.5")).find("kernels/flash-attention.yaml:7:") == 0);
    CHECK(err(replace(good, ", fitted_on: \"d\"", "")) ==
          "kernels/flash-attention.yaml:7:17: backward_share: a value needs its evidence: source: or fitted_on:");
    CHECK(err(replace(good, "block: {value: 64", "block: {value: 8")).find("kernels/flash-attention.yaml:3:") == 0);
    CHECK(err(replace(good, "value: 1.4", "value: 0.9")).find("kernels/flash-attention.yaml:9:") == 0);
    // The tile table is ascending in head_dim, and its entries have no other keys.
    CHECK(err(replace(good, "{head_dim: 256,", "{head_dim: 32,")) ==
          "kernels/flash-attention.yaml:14:55: flash3_tiles.value[1]: head_dim must be larger than the entry before "
          "(the table is ascending)");
    CHECK(err(replace(good, "block_n: 80}", "block_n: 80, warps: 8}")).find("kernels/flash-attention.yaml:14:") == 0);
}

TEST_SUITE_END();
