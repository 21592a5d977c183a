// A held-out check of the per-query-head generation attention model
// (docs/software-profiles.md §3; docs/validation.md §7): TensorRT-LLM v0.5's
// Llama-2-70B runs (tests/data/validation/trtllm05-llama70b.yaml) name their
// release, which gets tensorrt-llm-0.5.yaml and the value fitted on v0.6.1
// runs only. The guard is the error measured when it was set, rounded up:
// with the grouped (XQA) kernel instead these runs are 29% off.
#include "sim/config/data_dir.h"
#include "sim/validate/dataset.h"
#include "sim/validate/validate.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

TEST_SUITE_BEGIN("slow");  // whole runs through parasim validate (docs/testing.md)

TEST_CASE(
    "validate: TensorRT-LLM v0.5's Llama-2-70B runs, used by no fit, stay within 10% with the release's profile") {
    using sim::validate::Kind;
    const auto path =
        std::filesystem::path(sim::config::data_dir()) / "tests" / "data" / "validation" / "trtllm05-llama70b.yaml";
    const auto report = sim::validate::validate(sim::validate::load_dataset(path.string()), {});
    const auto& k = report.kinds[static_cast<std::size_t>(Kind::inference)];
    INFO("MAPE ", k.mape ? *k.mape : -1.0, ", worst ", k.worst_id, " (", k.worst_error, "), ", k.simulated,
         " simulated");
    CHECK(k.simulated == 4);
    REQUIRE(k.mape.has_value());
    CHECK(*k.mape <= 0.10);  // 6.2% (2026-11-25); the grouped kernel gives 29.2%
}

TEST_SUITE_END();
