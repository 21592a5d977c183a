// Round robin: the k-th request of a pool goes to replica k mod N, whatever
// the replicas hold (what a plain load balancer in front of N engines does).
#include "sim/serve/router/i_router.h"

namespace sim::serve::routers {

namespace {

class RoundRobin final : public IRouter {
public:
    std::string_view name() const override { return "round-robin"; }
    std::string_view description() const override { return "request k goes to replica k mod N"; }
    std::size_t pick(std::span<const std::int64_t> outstanding, std::uint64_t routed) const override {
        return static_cast<std::size_t>(routed % outstanding.size());
    }
};

}  // namespace

const IRouter& round_robin() {
    static const RoundRobin r;
    return r;
}

}  // namespace sim::serve::routers
