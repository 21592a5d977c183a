// Bytes of a run's metrics for a transport between processes (the MPI
// scale-out of `plan` and `sweep`, apps/scaleout.h): every field of
// report::RunMetrics, doubles bit for bit, so a report written from decoded
// metrics is byte-identical to one written from the originals. Both ends run
// the same build on the same byte order.
#pragma once

#include "sim/report/metrics.h"

#include <string>
#include <string_view>
#include <vector>

namespace sim::search {

std::string encode_runs(const std::vector<report::RunMetrics>& runs);
// Throws InternalError on bytes encode_runs did not write.
std::vector<report::RunMetrics> decode_runs(std::string_view bytes);

}  // namespace sim::search
