// Cluster files: the shipped ones load and build; bad ones fail at file:line:column.
#include "sim/config/cluster_loader.h"
#include "sim/config/data_dir.h"
#include "sim/core/error.h"
#include "sim/net/topology.h"

#include "tests/test_util.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using sim::config::load_cluster;
using sim::config::load_string;
using sim::net::ClusterSpec;
using sim::net::LinkClass;

namespace {

const char* const kGood = R"(name: test
gpu: h100-sxm
nodes: 2
gpus_per_node: 8
intra_node: nvswitch
in_switch_reduction: true
pcie_switches_per_node: 4
inter_node: fat-tree
nics_per_node: 8
leaf_switch_ports: 64
links:
  nvlink:  {bandwidth: 450 GB/s, latency: 1 us}
  pcie:    {bandwidth: 63 GB/s, latency: 1 us}
  network: {bandwidth: 400 Gb/s, latency: 2 us}
)";

ClusterSpec parse(const std::string& text) { return load_cluster(load_string(text, "bad.yaml")); }

constexpr auto replace = &parasim_test::replace_once;

// The message of the ConfigError `text` raises.
std::string error_of(const std::string& text) {
    return parasim_test::config_error_of([](const std::string& t) { parse(t); }, text);
}

}  // namespace

TEST_CASE("cluster loader: reads every field") {
    const ClusterSpec c = parse(kGood);
    CHECK(c.name == "test");
    CHECK(c.gpu == "h100-sxm");
    CHECK(c.nodes == 2);
    CHECK(c.gpus_per_node == 8);
    CHECK(c.intra_node == sim::net::IntraNode::nvswitch);
    CHECK(c.in_switch_reduction);
    CHECK(c.pcie_switches_per_node == 4);
    CHECK(c.inter_node == sim::net::InterNode::fat_tree);
    CHECK(c.nics_per_node == 8);
    CHECK(c.leaf_switch_ports == 64);
    REQUIRE(c.link(LinkClass::network));
    CHECK(c.link(LinkClass::network)->bandwidth.bytes_per_s == doctest::Approx(50e9));
    CHECK(c.link(LinkClass::nvlink)->latency == sim::Time::us(1));
    CHECK(c.where.to_string() == "bad.yaml:1:1");
    CHECK(parse(replace(kGood, "nodes: 2", "nodes: auto")).nodes == 0);
}

TEST_CASE("cluster loader: bad files are ConfigErrors that start with file:line:column") {
    CHECK(error_of(replace(kGood, "gpus_per_node: 8", "gpus_per_nod: 8")) ==
          "bad.yaml:4:1: unknown key 'gpus_per_nod' (did you mean 'gpus_per_node'?)");
    CHECK(error_of(replace(kGood, "gpu: h100-sxm\n", "")) == "bad.yaml:1:1: missing required field 'gpu'");
    CHECK(error_of(replace(kGood, "{bandwidth: 63 GB/s", "{bandwidth: 63")) ==
          "bad.yaml:13:24: links.pcie.bandwidth: '63' has no unit; write it with one, like '450 GB/s' or '400 Gb/s'");
    CHECK(error_of(replace(kGood, "latency: 2 us", "latency: 2 lightyears")) ==
          "bad.yaml:14:43: links.network.latency: unknown unit 'lightyears' in '2 lightyears' (expected one of ps, ns, "
          "us, ms, s)");
    CHECK(error_of(replace(kGood, "intra_node: nvswitch", "intra_node: nvswich"))
              .rfind("bad.yaml:5:13: intra_node: 'nvswich' is not one of", 0) == 0);
    CHECK(error_of(replace(kGood, "nodes: 2", "nodes: two")) ==
          "bad.yaml:3:8: nodes: expected a whole number of nodes or 'auto', got 'two'");
    CHECK(
        error_of(replace(kGood, "  nvlink:  {", "  nvlnk:  {")).rfind("bad.yaml:12:3: unknown key 'links.nvlnk'", 0) ==
        0);
    CHECK(error_of(replace(kGood, "latency: 1 us}\n  pcie", "latency: 1 us, lanes: 16}\n  pcie")) ==
          "bad.yaml:12:49: unknown key 'links.nvlink.lanes' (valid keys: bandwidth, latency)");
}

TEST_CASE("cluster loader: contradictions point at the field") {
    // nvswitch without links.nvlink
    CHECK(error_of(replace(kGood, "  nvlink:  {bandwidth: 450 GB/s, latency: 1 us}\n", "")) ==
          "bad.yaml:5:13: intra_node: intra_node 'nvswitch' needs NVLink links, but links.nvlink is missing");
    // a network without links.network
    CHECK(error_of(replace(kGood, "  network: {bandwidth: 400 Gb/s, latency: 2 us}\n", ""))
              .rfind("bad.yaml:8:13: inter_node: inter_node 'fat-tree' needs links.network", 0) == 0);
    // a network without NICs
    CHECK(error_of(replace(kGood, "nics_per_node: 8\n", "")).rfind("bad.yaml:8:13: inter_node:", 0) == 0);
    // several nodes without a network
    CHECK(error_of(replace(kGood, "inter_node: fat-tree", "inter_node: none")) ==
          "bad.yaml:3:8: nodes: 2 nodes need a network between them, but inter_node is 'none'");
    // in-switch reduction without an NVSwitch
    CHECK(error_of(replace(kGood, "intra_node: nvswitch", "intra_node: nvlink-mesh"))
              .rfind("bad.yaml:6:22: in_switch_reduction: in-switch reduction needs an NVSwitch", 0) == 0);
    CHECK(error_of(replace(kGood, "leaf_switch_ports: 64", "leaf_switch_ports: 63")).rfind("bad.yaml:10:20:", 0) == 0);
}

TEST_CASE("cluster loader: names resolve to the shipped topologies folder") {
    CHECK(sim::config::cluster_path("dgx-h100") == std::string(sim::config::data_dir()) + "/topologies/dgx-h100.yaml");
    CHECK(sim::config::cluster_path("my/cluster.yaml") == "my/cluster.yaml");
    CHECK(sim::config::cluster_path("local.yaml") == "local.yaml");
    CHECK_THROWS_AS(sim::config::load_cluster_file("/nonexistent/cluster.yaml"), sim::ConfigError);
}

TEST_CASE("cluster loader: every shipped topology loads and builds") {
    int count = 0;
    for (const auto& entry :
         std::filesystem::directory_iterator(std::string(sim::config::data_dir()) + "/topologies")) {
        if (entry.path().extension() != ".yaml") continue;
        CAPTURE(entry.path().string());
        const ClusterSpec c = sim::config::load_cluster_file(entry.path().string());
        const int gpus = (c.nodes == 0 ? 4 : c.nodes) * c.gpus_per_node;
        const sim::net::Topology t(c, gpus);
        CHECK(t.gpu_count() == gpus);
        CHECK(t.route(0, gpus - 1).size() >= 1);
        ++count;
    }
    CHECK(count >= 5);
}

TEST_SUITE_END();
