// NCCL's all-to-all across nodes (tests/data/validation/nccl-alltoall.yaml,
// docs/moe.md section 3h): the file loads as plain all-to-alls that span
// nodes (no MoE routing, so never DeepEP's exchange), and the set's error
// stays under a regression guard. Nothing was fitted on these points; the
// errors are recorded in the docs.
#include "sim/config/data_dir.h"
#include "sim/validate/dataset.h"
#include "sim/validate/validate.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

TEST_SUITE_BEGIN("unit");

TEST_CASE("nccl-alltoall.yaml: plain all-to-alls across nodes, within the guarded MAPE") {
    const auto path =
        std::filesystem::path(sim::config::data_dir()) / "tests" / "data" / "validation" / "nccl-alltoall.yaml";
    const auto d = sim::validate::load_dataset(path.string());
    REQUIRE(d.points.size() >= 5);
    for (const auto& p : d.points) {
        INFO(p.id);
        CHECK(p.kind == sim::validate::Kind::collective);
        CHECK(p.collective.op == sim::net::CollectiveOp::all_to_all);
        CHECK(p.collective.tokens.top_k == 0);                 // NCCL's exchange, not DeepEP's
        CHECK(p.hardware.gpus > p.hardware.gpus_per_node);     // spans nodes
        CHECK(p.source.find("issue #") != std::string::npos);  // each cites its thread
    }
    const auto report = sim::validate::validate(d, {});
    const auto& k = report.kinds[static_cast<std::size_t>(sim::validate::Kind::collective)];
    INFO("MAPE ", k.mape ? *k.mape : -1.0, ", worst ", k.worst_id, " (", k.worst_error, ")");
    CHECK(k.simulated == static_cast<int>(d.points.size()));
    REQUIRE(k.mape.has_value());
    // 20.4% over 3 when set, 24.1% over 5 with issue #1316's two points (docs/moe.md section 3h): a
    // regression guard, not a target.
    CHECK(*k.mape <= 0.25);
}

TEST_SUITE_END();
