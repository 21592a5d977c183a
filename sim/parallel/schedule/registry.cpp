// The pipeline schedule registry: an explicit list, not self-registering
// objects. parasim_sim is a static library, and the linker leaves out an
// object file nothing references, so a registrar in gpipe.cpp alone could
// vanish from the binary; naming each schedule here keeps it linked and fixes
// the listing order (docs/architecture.md, "Registries").
#include "sim/parallel/schedule/i_schedule.h"

#include "sim/core/error.h"
#include "sim/core/registry.h"

#include <fmt/format.h>

namespace sim::parallel::schedules {
// Defined in this folder, one per file.
const IPipelineSchedule& gpipe();
const IPipelineSchedule& one_f_one_b();
const IPipelineSchedule& interleaved_one_f_one_b();
const IPipelineSchedule& dualpipe();
const IPipelineSchedule& dualpipev();
}  // namespace sim::parallel::schedules

namespace sim::parallel {

const std::vector<const IPipelineSchedule*>& pipeline_schedules() {
    // Function-local: built on first use, so no static-initialisation order.
    static const std::vector<const IPipelineSchedule*> all = {
        &schedules::gpipe(),    &schedules::one_f_one_b(), &schedules::interleaved_one_f_one_b(),
        &schedules::dualpipe(), &schedules::dualpipev(),
    };
    return all;
}

std::vector<std::string> pipeline_schedule_names() { return registered_names(pipeline_schedules()); }

const IPipelineSchedule* find_pipeline_schedule(std::string_view name) {
    return find_registered(pipeline_schedules(), name);
}

const IPipelineSchedule& pipeline_schedule(std::string_view name) {
    if (const auto* s = find_pipeline_schedule(name)) return *s;
    throw ModelError(fmt::format("unknown pipeline schedule '{}' (registered: {})", name,
                                 fmt::join(pipeline_schedule_names(), ", ")));
}

const IPipelineSchedule& default_pipeline_schedule() { return schedules::one_f_one_b(); }

}  // namespace sim::parallel
