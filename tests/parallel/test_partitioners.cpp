// The partitioner registry: what is registered, lookups, and the uniform and
// cache-aware splits against hand-computed layer ranges.
#include "sim/config/data_dir.h"
#include "sim/config/scenario.h"
#include "sim/core/error.h"
#include "sim/hw/cost_model.h"
#include "sim/parallel/partition/i_partitioner.h"
#include "sim/parallel/strategy.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;
using parallel::LayerRange;

namespace {

const std::string kRoot = sim::config::data_dir();

config::ScenarioSpec load(const std::vector<std::string>& sets) {
    std::vector<config::Override> ov;
    for (const auto& s : sets) ov.push_back(config::parse_override(s));
    return config::load_scenario(kRoot + "/scenarios/partitioning-16xh100-feasible.yaml", ov);
}

std::vector<LayerRange> split(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                              parallel::ResolvedStrategy& rs) {
    const auto cm = hw::make_cost_model("roofline");
    rs = parallel::resolve_degrees(sc, spec);
    return parallel::split_layers(sc, spec, rs, *cm);
}

}  // namespace

TEST_CASE("the partitioner registry lists uniform and cache-aware, each described; unknown names fail") {
    CHECK(parallel::partitioner_names() == std::vector<std::string>{"uniform", "cache-aware"});
    for (const auto* p : parallel::partitioners()) CHECK_FALSE(p->description().empty());
    CHECK(&parallel::default_partitioner() == &parallel::partitioner("uniform"));
    CHECK(parallel::partitioner("cache-aware").computes_split());
    CHECK_FALSE(parallel::partitioner("uniform").computes_split());
    CHECK_THROWS_AS(parallel::partitioner("greedy"), ModelError);
}

TEST_CASE("uniform splits 16 layers evenly, later stages taking the remainder, or as first/last_stage_layers say") {
    // 16 layers over pp 2: 8 + 8. Over pp 2 with virtual_stages 3 (6 chunks):
    // 16 = 6 x 2 + 4, the last 4 chunks take 3 layers: 2 2 3 3 3 3.
    const auto sc = load({"strategies[0].pp=2", "strategies[0].tp=8"});
    parallel::ResolvedStrategy rs;
    CHECK(split(sc, sc.strategies[0], rs) == std::vector<LayerRange>{{0, 8}, {8, 16}});
    auto sc2 = load({"strategies[0].pp=2", "strategies[0].schedule=interleaved-1f1b", "strategies[0].virtual_stages=2",
                     "strategies[0].first_stage_layers=5"});
    // The first rank holds 5 layers over its 2 chunks, its short chunk first
    // (2 + 3); the last rank the other 11, its longer chunk first (6 + 5).
    // Virtual-stage order: rank 0 chunk 0, rank 1 chunk 0, rank 0 chunk 1,
    // rank 1 chunk 1.
    const auto v = split(sc2, sc2.strategies[0], rs);
    REQUIRE(v.size() == 4);
    CHECK(v[0].second - v[0].first == 2);
    CHECK(v[1].second - v[1].first == 6);
    CHECK(v[2].second - v[2].first == 3);
    CHECK(v[3].second - v[3].first == 5);
    CHECK(v.back().second == 16);
}

TEST_CASE("cache-aware computes its own split and refuses one given by hand") {
    auto sc = load({});
    const auto& layerwise = sc.strategies[1];
    REQUIRE(layerwise.partition == &parallel::partitioner("cache-aware"));
    parallel::ResolvedStrategy rs;
    const auto v = split(sc, layerwise, rs);
    // pp defaults to every GPU: 16 stages for 16 layers, one layer each.
    REQUIRE(v.size() == 16);
    for (int s = 0; s < 16; ++s) CHECK(v[static_cast<std::size_t>(s)] == LayerRange{s, s + 1});
    auto by_hand = load({"strategies[1].first_stage_layers=2"});
    CHECK_THROWS_WITH_AS(split(by_hand, by_hand.strategies[1], rs),
                         doctest::Contains("cache-aware partitioning computes it"), ConfigError);
}

TEST_SUITE_END();
