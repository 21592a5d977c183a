// The DeepSeek-R1 serving points, online and offline (tests/data/validation/moe-inference.yaml,
// docs/moe.md section 7): the file loads as the MoE runs it describes, and
// a point simulates through `parasim validate`'s own path. The errors are
// recorded in the docs, not pinned here: nothing was fitted on these points.
#include "sim/config/data_dir.h"
#include "sim/validate/dataset.h"
#include "sim/validate/validate.h"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>

TEST_SUITE_BEGIN("unit");

namespace {

std::string moe_inference_path() {
    return (std::filesystem::path(sim::config::data_dir()) / "tests" / "data" / "validation" / "moe-inference.yaml")
        .string();
}

}  // namespace

TEST_CASE("moe-inference.yaml: DeepSeek-R1 with MLA and 256 experts, served by TP 8 with a grouped MoE kernel") {
    const auto d = sim::validate::load_dataset(moe_inference_path());
    REQUIRE(d.points.size() >= 6);
    for (const auto& p : d.points) {
        INFO(p.id);
        CHECK(p.kind == sim::validate::Kind::serving);
        CHECK(p.model.experts == 256);
        CHECK(p.model.top_k == 8);
        CHECK(p.model.mla() != nullptr);
        CHECK(p.workload.moe.grouped_gemm);
        CHECK(p.parallelism.tp == 8);
        CHECK(p.hardware.gpus == 8);
        CHECK(!p.source.empty());
    }
}

// One point (the highest concurrency: the fewest iterations) runs end to
// end; the others take the same path.
TEST_CASE("moe-inference.yaml: a point simulates, not skipped" * doctest::test_suite("slow")) {
    const auto d = sim::validate::load_dataset(moe_inference_path());
    sim::validate::ValidateOptions o;
    o.ids = {"vllm-0.7.4-deepseek-r1-h200x8-tp8-conc128-throughput"};
    o.jobs = 1;
    const auto r = sim::validate::validate(d, o);
    REQUIRE(r.outcomes.size() == 1);
    REQUIRE_MESSAGE(!r.outcomes[0].skipped, r.outcomes[0].reason);
    CHECK(std::isfinite(r.outcomes[0].simulated));
    CHECK(r.outcomes[0].simulated > 0);
}

TEST_SUITE_END();
