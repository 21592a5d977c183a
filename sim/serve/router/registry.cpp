// The serving router registry: an explicit list (docs/architecture.md,
// "Registries"), in listing order.
#include "sim/serve/router/i_router.h"

#include "sim/core/error.h"
#include "sim/core/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace sim::serve::routers {
// Defined in this folder, one per file.
const IRouter& round_robin();
const IRouter& least_outstanding_tokens();
const IRouter& random_room();
}  // namespace sim::serve::routers

namespace sim::serve {

const std::vector<const IRouter*>& serving_routers() {
    static const std::vector<const IRouter*> all = {&routers::round_robin(), &routers::least_outstanding_tokens(),
                                                    &routers::random_room()};
    return all;
}

std::vector<std::string> serving_router_names() { return registered_names(serving_routers()); }

const IRouter& serving_router(std::string_view name) {
    if (const auto* r = find_registered(serving_routers(), name)) return *r;
    throw ModelError(
        fmt::format("unknown serving router '{}' (registered: {})", name, fmt::join(serving_router_names(), ", ")));
}

const IRouter& default_serving_router() { return routers::round_robin(); }

}  // namespace sim::serve
