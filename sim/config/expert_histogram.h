// Reading and checking a measured router load, `routing: histogram(FILE)`
// (docs/moe.md section 2): a CSV of tokens (or shares) per expert, or per MoE
// layer and expert (a `layer` column), read by
// the shared CSV reader (csv_reader.h) when the scenario or dataset is
// loaded, and checked against the model's experts once the model is known.
// Every bad row stops the run with file:line and the row.
#pragma once

#include "sim/workload/model.h"
#include "sim/workload/moe.h"

#include <string>

namespace sim::config {

// The most rows of a histogram with a layer column: MoE layers x experts
// (DeepSeek-V3: 58 x 256 = 14 848; 61 layers x 256 = 15 616 were every layer
// of it an MoE layer), with room for 256 MoE layers of 256 experts. A file
// without the column has at most kMaxExperts rows. Both within the input
// file's size limit (16 MiB unless --limit input-bytes says otherwise).
inline constexpr std::int64_t kMaxLayerExpertRows = 65536;

// Reads `path` (header `expert,tokens` or `expert,share`: one row per expert,
// ids from 0, each once; or `layer,expert,tokens` or `layer,expert,share`:
// one row per MoE layer and expert, layers by the model's 0-based layer
// index; values finite and >= 0). The ids are checked against the model
// later (check_expert_histogram).
workload::ExpertHistogram read_expert_histogram(const std::string& path);

// Each of the model's experts 0 .. E-1 has exactly one row, no row names an
// expert >= E, and the values sum to more than 0 (with a layer column: in
// each layer, every layer is an MoE layer of the model, and every MoE layer
// of its main stack has rows; its prediction layers may be left out and
// take the pooled shares); ConfigError at the file's line otherwise.
// Nothing to check unless the routing is a histogram.
void check_expert_histogram(const workload::MoeRouting& routing, const workload::ModelSpec& model);

}  // namespace sim::config
