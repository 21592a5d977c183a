// libFuzzer target: arbitrary bytes as a validation annotations file
// (`parasim validate DATASET --annotations FILE`, sim/validate/annotations.h),
// applied to a fixed small dataset whose points share source prefixes, state
// or omit their software, and include a kernel point. The file is applied once
// to the dataset as loaded and, when that succeeds, once more to the points it
// annotated (a dataset that now states the fields: equal values must stay
// valid, others be refused). Besides the loader contract of fuzz_common.h, an
// accepted file must leave every point's id, kind, source and measured value
// as they were: an annotation states how a run was done, never a result.
// docs/testing.md says how to build and run it.
#include "fuzz_common.h"
#include "sim/config/yaml_reader.h"
#include "sim/validate/annotations.h"
#include "sim/validate/dataset.h"
#include "tests/validate/annotations_dataset.h"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

// The annotations tests' three points (two of one page, whose sources share
// the prefix "page A, 'Peak Throughput", one that names its stack) and a
// kernel point.
const std::string kDataset = std::string(parasim_test::kAnnotationsDataset) + R"(- id: kernel-c
  kind: attention
  source: "page C, kernel table"
  hardware: {gpu: h100-sxm, gpus: 1}
  op: {batch: 2, heads: 16, head_dim: 128, seq_len: 8192, causal: true, dtype: bf16, impl: flash2, pass: fwd}
  measured: {metric: time_us, value: 1935}
)";

const sim::validate::Dataset& base() {
    static const sim::validate::Dataset d =
        sim::validate::parse_dataset(sim::config::load_string(kDataset, "fuzz-dataset.yaml"));
    return d;
}

const std::string& scratch_path() {
    static const std::string path =
        (std::filesystem::temp_directory_path() / ("parasim-fuzz-annotations-" + std::to_string(::getpid()) + ".yaml"))
            .string();
    return path;
}

// What no annotation may change (annotations.h: only how a run was done).
void check_results_kept(const sim::validate::Dataset& d) {
    const auto& b = base();
    if (d.points.size() != b.points.size()) parasim_fuzz::finding("annotations changed the point count", "");
    for (std::size_t i = 0; i < d.points.size(); ++i) {
        const auto& p = d.points[i];
        const auto& q = b.points[i];
        if (p.id != q.id || p.kind != q.kind || p.source != q.source || p.metric != q.metric ||
            p.measured != q.measured)
            parasim_fuzz::finding("annotations changed a point's id, kind, source or measured value", q.id.c_str());
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string& path = scratch_path();
    {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    }
    sim::validate::Dataset once = base();
    bool applied = false;
    parasim_fuzz::expect_clean([&] {
        sim::validate::annotate(once, path);
        applied = true;
    });
    if (!applied) return 0;
    check_results_kept(once);
    // The same file on the points it annotated: they now state the fields.
    parasim_fuzz::expect_clean([&] {
        sim::validate::Dataset twice = once;
        sim::validate::annotate(twice, path);
        check_results_kept(twice);
    });
    return 0;
}
