// The serving scheduler registry: an explicit list (docs/architecture.md,
// "Registries" says why not self-registering objects), in listing order.
#include "sim/serve/scheduler/i_scheduler.h"

#include "sim/core/error.h"
#include "sim/core/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace sim::serve::schedulers {
// Defined in this folder, one per file.
const IServingScheduler& static_batching();
const IServingScheduler& continuous_batching();
const IServingScheduler& chunked_prefill();
}  // namespace sim::serve::schedulers

namespace sim::serve {

const std::vector<const IServingScheduler*>& serving_schedulers() {
    static const std::vector<const IServingScheduler*> all = {
        &schedulers::static_batching(),
        &schedulers::continuous_batching(),
        &schedulers::chunked_prefill(),
    };
    return all;
}

std::vector<std::string> serving_scheduler_names() { return registered_names(serving_schedulers()); }

const IServingScheduler& serving_scheduler(std::string_view name) {
    if (const auto* s = find_registered(serving_schedulers(), name)) return *s;
    throw ModelError(fmt::format("unknown serving scheduler '{}' (registered: {})", name,
                                 fmt::join(serving_scheduler_names(), ", ")));
}

const IServingScheduler& default_serving_scheduler() { return schedulers::continuous_batching(); }

}  // namespace sim::serve
