// Annotations: facts about how a dataset's runs were done that the dataset
// itself does not state, kept in a separate, cited file
// (`parasim validate DATASET --annotations FILE`; docs/validation.md §2,
// "Annotations"). The reference dataset is shared and read-only here; an
// annotations file lets parasim use what a point's own `source` says (the
// stack and release that produced a published table) without editing it and
// without guessing.
//
// Each entry selects points (by a prefix of their `source`, or by a list of
// ids), cites why the fact is known (`source:`), and states fields in the
// dataset's own format. Only fields that say how a run was done may be
// annotated (today `software: {name, version}`), never a measured value or
// anything that is a result. The file is checked as strictly as a dataset:
// unknown keys, a selector that matches no point, an id the dataset lacks, a
// value that contradicts what a point states, or a field annotated twice on
// one point are ConfigErrors at file:line:column (exit 2).
#pragma once

#include "sim/config/yaml_reader.h"
#include "sim/validate/dataset.h"

#include <string>

namespace sim::validate {

// Reads the annotations file at `path` and applies it to `dataset`. Each
// point it changes records what, and where from, in Point::annotated.
void annotate(Dataset& dataset, const std::string& path);
// The same, from a parsed root (tests use config::load_string).
void annotate(Dataset& dataset, const config::Node& root);

}  // namespace sim::validate
