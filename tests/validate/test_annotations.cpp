// parasim validate --annotations: the annotations loader (selectors by
// source prefix and by ids, the citation each entry must carry, conflicts
// with what a point states, unknown and forbidden keys, selectors that match
// nothing), and that an annotated point runs exactly as the same point with
// the field written into the dataset.
#include "sim/core/error.h"
#include "sim/validate/annotations.h"
#include "sim/validate/dataset.h"
#include "sim/validate/validate.h"

#include "tests/test_util.h"
#include "tests/validate/annotations_dataset.h"

#include <doctest/doctest.h>

#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using sim::validate::Dataset;

namespace {

const char* const kDataset = parasim_test::kAnnotationsDataset;

// One entry selecting page A's points by the beginning of their source.
const char* const kAnnotations = R"(annotations:
  - select: {source_prefix: "page A, 'Peak Throughput"}
    source: "page A's heading: data for release 0.6.1"
    software: {name: tensorrt-llm, version: '0.6.1'}
)";

Dataset dataset(const std::string& text = kDataset) {
    return sim::validate::parse_dataset(sim::config::load_string(text, "data.yaml"));
}

Dataset annotated(const std::string& annotations, const std::string& data = kDataset) {
    Dataset d = dataset(data);
    sim::validate::annotate(d, sim::config::load_string(annotations, "notes.yaml"));
    return d;
}

std::string error_of(const std::string& annotations, const std::string& data = kDataset) {
    return parasim_test::config_error_of([&](const std::string& t) { annotated(t, data); }, annotations);
}

constexpr auto replace = &parasim_test::replace_once;

}  // namespace

TEST_CASE("annotations: a source prefix selects every point whose source begins with it, and only those") {
    const Dataset d = annotated(kAnnotations);
    REQUIRE(d.points.size() == 3);
    for (int i : {0, 1}) {
        INFO(d.points[i].id);
        CHECK(d.points[i].software.name == "tensorrt-llm");
        CHECK(d.points[i].software.version == "0.6.1");
        REQUIRE(d.points[i].annotated.size() == 1);
        // What was set, and where from: the entry's software, file:line:column.
        CHECK(d.points[i].annotated[0] == "software=tensorrt-llm 0.6.1 (notes.yaml:4:15)");
    }
    // page-b states the same software itself: repeating it is no conflict, and not an annotation.
    CHECK(d.points[2].annotated.empty());
    // A longer prefix narrows the selection to the one table.
    const Dataset a100 = annotated(replace(kAnnotations, "'Peak Throughput\"", "'Peak Throughput - A100'\""));
    CHECK_FALSE(a100.points[0].software.given());
    CHECK(a100.points[1].software.name == "tensorrt-llm");
    const Dataset by_ids =
        annotated(replace(kAnnotations, "{source_prefix: \"page A, 'Peak Throughput\"}", "{ids: [page-a-2]}"));
    CHECK_FALSE(by_ids.points[0].software.given());
    CHECK(by_ids.points[1].software.name == "tensorrt-llm");
}

TEST_CASE("annotations: an annotated point simulates exactly as the point with the field in the dataset") {
    // The annotation changes nothing but the field: the run picks the
    // release's profile (tensorrt-llm-0.6.yaml) as a stated one does.
    const Dataset via_annotation = annotated(kAnnotations);
    const Dataset stated = dataset(replace(kDataset, "  measured: {metric: tokens_per_s, value: 1000}\n- id: page-a-2",
                                           "  measured: {metric: tokens_per_s, value: 1000}\n"
                                           "  software: {name: tensorrt-llm, version: '0.6.1'}\n- id: page-a-2"));
    sim::validate::ValidateOptions o;
    o.ids = {"page-a-1"};
    o.jobs = 1;
    const auto a = sim::validate::validate(via_annotation, o), b = sim::validate::validate(stated, o);
    const auto plain = sim::validate::validate(dataset(), o);
    REQUIRE(a.outcomes.size() == 1);
    REQUIRE_FALSE(a.outcomes[0].skipped);
    CHECK(a.outcomes[0].simulated == b.outcomes[0].simulated);
    CHECK(a.outcomes[0].software == "tensorrt-llm");
    // ... and the profile is not the default one: the run differs from the unannotated point's.
    CHECK(a.outcomes[0].simulated != plain.outcomes[0].simulated);
    CHECK(a.outcomes[0].annotated == via_annotation.points[0].annotated);
}

TEST_CASE("annotations: a value that contradicts what a point states is an error naming both places") {
    const std::string other = R"(annotations:
  - select: {ids: [page-b]}
    source: "a guess"
    software: {name: tensorrt-llm, version: '0.5'}
)";
    CHECK(error_of(other) ==
          "notes.yaml:4:15: annotations[0].software: point 'page-b' (data.yaml:16:3) states software tensorrt-llm "
          "0.6.1; this says tensorrt-llm 0.5");
    CHECK(error_of(replace(other, "name: tensorrt-llm, version: '0.5'", "name: vllm, version: '0.6.1'"))
              .find("states software tensorrt-llm 0.6.1; this says vllm 0.6.1") != std::string::npos);
    // A second entry that sets the same point's software again, even to the same value.
    const std::string twice = std::string(kAnnotations) + R"(  - select: {ids: [page-a-1]}
    source: "again"
    software: {name: tensorrt-llm, version: '0.6.1'}
)";
    CHECK(error_of(twice) ==
          "notes.yaml:7:15: annotations[1].software: point 'page-a-1' has its software annotated "
          "already (at notes.yaml:4:15)");
}

TEST_CASE("annotations: a version may be added to a stack the point names without one") {
    const std::string named =
        replace(kDataset, "software: {name: tensorrt-llm, version: '0.6.1'}", "software: {name: tensorrt-llm}");
    const Dataset d = annotated(R"(annotations:
  - select: {ids: [page-b]}
    source: "page B's heading"
    software: {name: tensorrt-llm, version: '0.6.1'}
)",
                                named);
    CHECK(d.points[2].software.version == "0.6.1");
    CHECK(d.points[2].annotated.size() == 1);
}

TEST_CASE("annotations: a selector that matches no point, or names a missing id, is an error at the selector") {
    CHECK(error_of(replace(kAnnotations, "page A, 'Peak Throughput", "page C")) ==
          "notes.yaml:2:29: annotations[0].select.source_prefix: no point of data.yaml has a source beginning "
          "'page C'");
    CHECK(
        error_of(replace(kAnnotations, "{source_prefix: \"page A, 'Peak Throughput\"}", "{ids: [page-a-1, page-z]}")) ==
        "notes.yaml:2:30: annotations[0].select.ids[1]: ids: no point 'page-z' in data.yaml");
    CHECK(
        error_of(replace(kAnnotations, "{source_prefix: \"page A, 'Peak Throughput\"}", "{ids: [page-a-1, page-a-1]}"))
            .find("ids: 'page-a-1' is listed twice") != std::string::npos);
    CHECK(error_of(replace(kAnnotations, "{source_prefix: \"page A, 'Peak Throughput\"}", "{ids: []}"))
              .find("an empty list selects no point") != std::string::npos);
    CHECK(error_of(replace(kAnnotations, "page A, 'Peak Throughput", ""))
              .find("an empty prefix would select every point") != std::string::npos);
    CHECK(error_of(replace(kAnnotations, "{source_prefix:", "{ids: [page-b], source_prefix:"))
              .find("give exactly one of 'source_prefix' and 'ids'") != std::string::npos);
    CHECK(error_of(replace(kAnnotations, "{source_prefix: \"page A, 'Peak Throughput\"}", "{}"))
              .find("give exactly one of 'source_prefix' and 'ids'") != std::string::npos);
}

TEST_CASE("annotations: unknown keys, results and an entry without its own source are errors at file:line:column") {
    CHECK(error_of(replace(kAnnotations, "    software:", "    softwares:")).find("notes.yaml:4:5: ") == 0);
    CHECK(error_of(replace(kAnnotations, "    software:", "    softwares:")).find("did you mean 'software'") !=
          std::string::npos);
    CHECK(
        error_of(replace(kAnnotations, "select: {source_prefix:", "select: {source_prefx:"))
            .find(
                "notes.yaml:2:14: unknown key 'annotations[0].select.source_prefx' (did you mean 'source_prefix'?)") ==
        0);
    CHECK(error_of(replace(kAnnotations, "annotations:", "annotation:")).find("unknown key 'annotation'") !=
          std::string::npos);
    // A measured value is never annotated, nor the fields that define the run's shape.
    CHECK(error_of(std::string(kAnnotations) + "    measured: {metric: tokens_per_s, value: 900}\n") ==
          "notes.yaml:5:15: annotations[0].measured: 'measured' cannot be annotated: a measured value comes from the "
          "dataset's source, never from an annotation");
    CHECK(error_of(std::string(kAnnotations) + "    workload: {batch: 4}\n")
              .find("'workload' cannot be annotated: only 'software' may be annotated") != std::string::npos);
    CHECK(error_of(replace(kAnnotations, "    source: \"page A's heading: data for release 0.6.1\"\n", ""))
              .find("missing required field 'source'") != std::string::npos);
    CHECK(
        error_of(replace(kAnnotations, "page A's heading: data for release 0.6.1", "")).find("say why this is known") !=
        std::string::npos);
    // The software map is the dataset's own, with its checks.
    CHECK(error_of(replace(kAnnotations, "name: tensorrt-llm", "name: tensorrt")).find("notes.yaml:4:22: ") == 0);
    CHECK(error_of(replace(kAnnotations, "version: '0.6.1'", "version: \"0.6'1\"")).find("no quotes") !=
          std::string::npos);
    CHECK(error_of("annotations: []\n").find("the file annotates nothing") != std::string::npos);
}

TEST_SUITE_END();
