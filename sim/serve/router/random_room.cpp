// Random room: request k of a pool goes to replica splitmix64(k) mod N, a
// uniformly random replica per request, fixed by k so that a run is
// deterministic. It stands for SGLang's rank choice under PD disaggregation:
// the PD router draws a random bootstrap_room in [0, 2^63) per request and
// the server's DP controller sends it to rank bootstrap_room % dp
// (follow_bootstrap_room_scheduler in python/sglang/srt/managers/
// data_parallel_controller.py, sgl-project/sglang commit 000a3db1): balanced
// on average, uneven request by request (docs/serving.md, "Pools of
// data-parallel-attention engines").
#include "sim/serve/router/i_router.h"

namespace sim::serve::routers {

namespace {

// splitmix64's output for state k (Steele, Lea and Flood, 2014): every bit
// of k reaches every bit of the result, so consecutive k spread uniformly.
std::uint64_t splitmix64(std::uint64_t k) {
    std::uint64_t z = k + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

class RandomRoom final : public IRouter {
public:
    std::string_view name() const override { return "random-room"; }
    std::string_view description() const override {
        return "request k goes to replica splitmix64(k) mod N (SGLang's random bootstrap_room % dp under PD)";
    }
    std::size_t pick(std::span<const std::int64_t> outstanding, std::uint64_t routed) const override {
        return static_cast<std::size_t>(splitmix64(routed) % outstanding.size());
    }
};

}  // namespace

const IRouter& random_room() {
    static const RandomRoom r;
    return r;
}

}  // namespace sim::serve::routers
