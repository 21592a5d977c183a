// Chrome trace (JSON, opens in Perfetto and chrome://tracing): one process
// per simulated GPU, one thread per stream, kernels and transfers as complete
// ("X") slices with their bytes and FLOPs, a counter track per GPU of the
// communication streams active, and link utilisation per class over time.
#pragma once

#include "sim/exec/executor.h"
#include "sim/parallel/plan.h"

#include <string>

namespace sim::report {

std::string chrome_trace(const std::string& run_name, const parallel::Plan& plan, const exec::ExecResult& result);

}  // namespace sim::report
