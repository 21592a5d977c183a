// End-to-end: `parasim validate DATASET --annotations FILE` as a user runs it:
// the annotated points carry the stated software in the report (JSON and
// table say what was annotated and from where), the others are untouched,
// --help documents the option, and a missing file exits 2 with one line.
// (Malformed annotation files: tests/bad-input/annotations, run by
// test_bad_input.cpp.)
#include "sim/config/data_dir.h"
#include "tests/e2e/cli_process.h"

#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

TEST_SUITE_BEGIN("e2e");  // ctest label (docs/testing.md); a case may override it

namespace {

namespace fs = std::filesystem;

const fs::path kDataset = fs::path(sim::config::data_dir()) / "tests" / "bad-input" / "annotations" / "dataset.yaml";

using parasim_e2e::parasim;
using parasim_e2e::Result;
using parasim_e2e::temp_path;

YAML::Node point(const YAML::Node& doc, const std::string& id) {
    for (const auto& p : doc["points"])
        if (p["id"].as<std::string>() == id) return p;
    FAIL("no point " << id);
    return {};
}

}  // namespace

TEST_CASE("parasim validate --annotations: the selected points run with the stated software, and say so") {
    const fs::path notes = temp_path("annotations-notes.yaml");
    std::ofstream(notes) << "annotations:\n"
                            "  - select: {source_prefix: \"page A, 'Peak Throughput\"}\n"
                            "    source: \"page A's heading\"\n"
                            "    software: {name: tensorrt-llm, version: '0.6.1'}\n";
    const Result plain = parasim("validate " + kDataset.string() + " --format json -j 1");
    const Result with =
        parasim("validate " + kDataset.string() + " --annotations " + notes.string() + " --format json -j 1");
    REQUIRE(plain.code == 0);
    REQUIRE(with.code == 0);
    CHECK(with.err.empty());
    const YAML::Node a = YAML::Load(plain.out), b = YAML::Load(with.out);  // JSON is YAML
    CHECK_FALSE(a["annotations"]);
    CHECK(b["annotations"].as<std::string>() == notes.string());
    for (const char* id : {"page-a-h100", "page-a-a100"}) {
        INFO(id);
        CHECK_FALSE(point(a, id)["software"]);
        CHECK_FALSE(point(a, id)["annotated"]);
        CHECK(point(b, id)["software"].as<std::string>() == "tensorrt-llm");
        REQUIRE(point(b, id)["annotated"].size() == 1);
        CHECK(point(b, id)["annotated"][0].as<std::string>() ==
              "software=tensorrt-llm 0.6.1 (" + notes.string() + ":4:15)");
        // The profile is applied: the simulated throughput moves.
        CHECK(point(b, id)["simulated"].as<double>() != point(a, id)["simulated"].as<double>());
    }
    // The point that states its software is the same with and without the file.
    CHECK_FALSE(point(b, "page-b")["annotated"]);
    CHECK(point(b, "page-b")["simulated"].as<double>() == point(a, "page-b")["simulated"].as<double>());
    const Result table = parasim("validate " + kDataset.string() + " --annotations " + notes.string() + " -j 1");
    REQUIRE(table.code == 0);
    CHECK(table.out.rfind("validation of " + kDataset.string() + " with annotations " + notes.string(), 0) == 0);
    CHECK(table.out.find("annotated (stated by " + notes.string() +
                         ", not by the dataset):\n  page-a-h100: "
                         "software=tensorrt-llm 0.6.1") != std::string::npos);
    fs::remove(notes);
}

TEST_CASE("parasim validate --annotations: --help documents it; a missing file exits 2 with one line") {
    const Result help = parasim("validate --help");
    REQUIRE(help.code == 0);
    CHECK(help.out.find("--annotations") != std::string::npos);
    CHECK(help.out.find("Annotations") != std::string::npos);
    const Result missing = parasim("validate " + kDataset.string() + " --annotations no-such-annotations.yaml");
    CHECK(missing.code == 2);
    CHECK(missing.out.empty());
    CHECK(std::count(missing.err.begin(), missing.err.end(), '\n') == 1);
    CHECK(missing.err.rfind("no-such-annotations.yaml: ", 0) == 0);
}

TEST_SUITE_END();
