// The DeepSeek-V3 data-parallel-attention point (tests/data/validation/moe-dp-attention.yaml,
// docs/moe.md section 8): the file loads as the layout it describes (attention_dp, tp 1,
// dp = ep), and the point simulates through `parasim validate`'s own path. Its error is
// recorded in the docs, not pinned here: nothing was fitted on it.
#include "sim/config/data_dir.h"
#include "sim/validate/dataset.h"
#include "sim/validate/validate.h"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>

TEST_SUITE_BEGIN("unit");

namespace {

std::string dp_attention_path() {
    return (std::filesystem::path(sim::config::data_dir()) / "tests" / "data" / "validation" / "moe-dp-attention.yaml")
        .string();
}

}  // namespace

TEST_CASE("moe-dp-attention.yaml: DeepSeek-V3 under attention DP with EP over every rank") {
    const auto d = sim::validate::load_dataset(dp_attention_path());
    REQUIRE(!d.points.empty());
    for (const auto& p : d.points) {
        INFO(p.id);
        CHECK(p.parallelism.attention_dp);
        CHECK(p.parallelism.tp == 1);
        CHECK(p.parallelism.ep == p.parallelism.dp);
        // LMSYS's --moe-dense-tp-size 1 --enable-dp-lm-head (docs/moe.md section 8b).
        CHECK(p.parallelism.moe_dense_tp_size == 1);
        CHECK(p.parallelism.enable_dp_lm_head);
        CHECK(p.hardware.gpus == p.parallelism.dp);
        CHECK(p.model.mla() != nullptr);
        CHECK(!p.source.empty());
    }
}

TEST_CASE("moe-dp-attention.yaml: every point simulates, none skipped" * doctest::test_suite("slow")) {
    const auto d = sim::validate::load_dataset(dp_attention_path());
    sim::validate::ValidateOptions o;
    o.jobs = 1;
    const auto r = sim::validate::validate(d, o);
    REQUIRE(r.outcomes.size() == d.points.size());
    for (const auto& out : r.outcomes) {
        REQUIRE_MESSAGE(!out.skipped, out.reason);
        CHECK(std::isfinite(out.simulated));
        CHECK(out.simulated > 0);
    }
}

TEST_SUITE_END();
