// The exposed time of MoE exchanges (all-to-all collectives): the share of a
// run's time breakdown that the report prints as "of which all-to-all"
// (docs/output.md). Kept apart from the executor's breakdown, which does not
// tell collectives apart.
#pragma once

#include "sim/exec/executor.h"
#include "sim/parallel/plan.h"

#include <cstdint>

namespace sim::report {

// Whether any task of the plan is an all-to-all collective.
bool has_all_to_all(const parallel::Plan& plan);

// Seconds within [from, to] during which simulated GPU `local` runs an
// all-to-all on some stream while its compute stream runs nothing: the part
// of the breakdown's (exposed) communication spent in all-to-alls. Same
// convention as exec::breakdown_in: every compute-stream interval counts as
// a kernel, and overlapping intervals count once.
double exposed_all_to_all_seconds(const parallel::Plan& plan, const exec::ExecResult& r, std::uint32_t local, Time from,
                                  Time to);

}  // namespace sim::report
