// Least outstanding tokens: a request goes to the replica with the fewest
// tokens still to feed for the requests it holds (queued prompts, prefills
// part-way, and the output tokens not yet generated), the lowest index on a
// tie. A long prompt therefore steers the next requests elsewhere, which
// round robin cannot do.
#include "sim/serve/router/i_router.h"

namespace sim::serve::routers {

namespace {

class LeastOutstandingTokens final : public IRouter {
public:
    std::string_view name() const override { return "least-outstanding-tokens"; }
    std::string_view description() const override {
        return "the replica with the fewest tokens left to feed for its requests (lowest index on a tie)";
    }
    std::size_t pick(std::span<const std::int64_t> outstanding, std::uint64_t) const override {
        std::size_t best = 0;
        for (std::size_t i = 1; i < outstanding.size(); ++i)
            if (outstanding[i] < outstanding[best]) best = i;
        return best;
    }
};

}  // namespace

const IRouter& least_outstanding_tokens() {
    static const LeastOutstandingTokens r;
    return r;
}

}  // namespace sim::serve::routers
