// The reference dataset (../shared/validation/published.yaml, with the
// annotations of tests/data/validation/published-annotations.yaml) stays within
// each kind's guarded MAPE (docs/validation.md §4: guards are never raised to let
// a change pass).
#include "sim/config/data_dir.h"
#include "sim/validate/annotations.h"
#include "sim/validate/dataset.h"
#include "sim/validate/validate.h"

#include <doctest/doctest.h>

#include <cstddef>
#include <filesystem>
#include <initializer_list>
#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using sim::validate::Kind;

namespace {

struct Guard {
    Kind kind;
    double max_mape;
    int min_simulated;
};

void check_guards(std::initializer_list<Guard> guards) {
    // The reference dataset lives beside the repository (../shared/validation).
    const std::string path = std::string(sim::config::data_dir()) + "/../shared/validation/published.yaml";
    REQUIRE_MESSAGE(std::filesystem::exists(path), "the reference dataset is missing: " << path);
    sim::validate::ValidateOptions o;
    for (const auto& g : guards) o.kinds.push_back(g.kind);
    auto dataset = sim::validate::load_dataset(path);
    sim::validate::annotate(dataset,
                            std::string(sim::config::data_dir()) + "/tests/data/validation/published-annotations.yaml");
    const auto report = sim::validate::validate(dataset, o);
    for (const auto& g : guards) {
        const auto& k = report.kinds[static_cast<std::size_t>(g.kind)];
        INFO(sim::validate::to_string(g.kind), ": MAPE ", k.mape ? *k.mape : -1.0, ", worst ", k.worst_id, " (",
             k.worst_error, "), ", k.simulated, " simulated, ", k.skipped, " skipped");
        CHECK(k.simulated >= g.min_simulated);
        REQUIRE(k.mape.has_value());
        CHECK(*k.mape <= g.max_mape);
    }
}

}  // namespace

TEST_CASE("validate: the reference dataset's whole runs stay within the guarded MAPE" * doctest::test_suite("slow")) {
    check_guards({{Kind::training, 0.05, 24}, {Kind::inference, 0.10, 25}});
}

TEST_CASE("validate: the reference dataset's kernels and collectives stay within the guarded MAPE" *
          doctest::test_suite("fit")) {
    check_guards(
        {{Kind::gemm, 0.10, 1}, {Kind::attention, 0.10, 46}, {Kind::collective, 0.14, 10}, {Kind::memory, 0.10, 5}});
}

TEST_SUITE_END();
