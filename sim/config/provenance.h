// Values that carry their evidence: `key: {value: V, source: S}` or
// `key: {value: V, fitted_on: F}`. Software profiles and the calibration
// files (collective libraries, kernel fits) share this schema, so a number
// without its evidence cannot be loaded.
#pragma once

#include "sim/config/yaml_reader.h"

#include <string>

namespace sim::config {

// Where one value came from: "source" or "fitted_on", and the text.
struct Provenance {
    std::string kind;  // "source" | "fitted_on"
    std::string text;
};

// Reads `parent[key]` as {value, source | fitted_on} (exactly one of the
// two, a non-empty string; no other key) and returns the value node.
Node sourced(MapReader& parent, const std::string& key, Provenance& from);
// The same, for callers that do not keep the evidence.
Node sourced(MapReader& parent, const std::string& key);

}  // namespace sim::config
