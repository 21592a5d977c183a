// End-to-end: the inputs tools/cli-mutation-smoke.py found that load but
// could not be simulated, each refused as a user meets it: exit 2 and one
// line at file:line:col (the strategy's), never an internal error (exit 3)
// nor a message without a place (docs/testing.md, "Mutation smoke").
#include "sim/config/data_dir.h"
#include "tests/e2e/cli_process.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>

TEST_SUITE_BEGIN("e2e");  // ctest label (docs/testing.md); a case may override it

namespace {

const std::string kRoot = sim::config::data_dir();

using parasim_e2e::parasim;

// Exit 2, nothing on stdout, one line on stderr that starts with
// `<scenario>:LINE:COL: ` and names the strategy and what passed the clock.
void check_located(const parasim_e2e::Result& r, const std::string& scenario, const std::string& strategy) {
    INFO("stderr: " << r.err);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    const std::string at = kRoot + "/scenarios/" + scenario + ":";
    REQUIRE(r.err.rfind(at, 0) == 0);
    const std::size_t line = at.size();
    const std::size_t colon = r.err.find(':', line);
    CHECK((colon != std::string::npos && colon > line));
    CHECK(r.err.find("strategy '" + strategy + "'") != std::string::npos);
    CHECK(r.err.find("213 days") != std::string::npos);
    CHECK(r.err.find("internal error") == std::string::npos);
}

const std::string kFewRequests = " --set workload.serving.requests=5 --set workload.serving.warmup_requests=0";

}  // namespace

TEST_CASE("serve: a memory bandwidth of 1 B/s carries the clock past 2^64 ps: exit 2 at the strategy, not exit 3") {
    // Each iteration fits the clock; their sum did not, and Time's checked
    // addition was an internal error (Simulation::schedule_after).
    check_located(parasim("serve " + kRoot +
                          "/scenarios/serving-llama3-8b-h100.yaml --set 'gpu.memory.bandwidth=1 B/s'" + kFewRequests),
                  "serving-llama3-8b-h100.yaml", "tp1");
}

TEST_CASE("serve: a duration past the clock (NVLink at 1e-300 GB/s between pipeline stages) names the strategy") {
    check_located(parasim("serve " + kRoot + "/scenarios/serving-llama3-70b-h100-pp2.yaml" +
                          " --set 'cluster.links.nvlink.bandwidth=1e-300 GB/s'" + kFewRequests),
                  "serving-llama3-70b-h100-pp2.yaml", "tp4-pp2");
}

TEST_CASE("run: a duration past the clock in the cache-aware partitioner's cost names the strategy") {
    // The partitioner prices layers before the plan runs: its ModelError left
    // build_plan unlocated ("parasim: a duration of ... s exceeds ...").
    check_located(parasim("run " + kRoot + "/scenarios/partitioning-16xh100.yaml --set 'gpu.memory.bandwidth=1 B/s'"),
                  "partitioning-16xh100.yaml", "layerwise");
}

TEST_SUITE_END();
