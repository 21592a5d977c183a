// The serving router: which replica of a pool a request goes to. One
// interface, one file per implementation (round robin, least outstanding
// tokens), listed by name in registry.cpp (docs/serving.md, "Replicas and
// the router"). A router sees the pool's outstanding tokens and how many
// requests it has routed before; ties go to the lowest replica index, so a
// run is deterministic.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sim::serve {

class IRouter {
public:
    virtual ~IRouter() = default;
    virtual std::string_view name() const = 0;
    virtual std::string_view description() const = 0;
    // The replica (an index into `outstanding`, which is not empty) for the
    // `routed`-th request (0-based) this pool receives. outstanding[i] is
    // what replica i still has to feed for the requests it holds
    // (EngineState::outstanding).
    virtual std::size_t pick(std::span<const std::int64_t> outstanding, std::uint64_t routed) const = 0;
};

const std::vector<const IRouter*>& serving_routers();
std::vector<std::string> serving_router_names();
// ModelError listing the registered names when `name` is not one.
const IRouter& serving_router(std::string_view name);
const IRouter& default_serving_router();

}  // namespace sim::serve
