// The requests of a serving run: arrival times and lengths drawn from the
// scenario's processes with a fixed, documented generator (std::mt19937_64,
// whose output the C++ standard fixes, and parasim's own transforms to
// uniform, exponential, normal, gamma and lognormal variates; the standard
// library's distributions differ between implementations), or read from a
// trace. Formulas: docs/serving.md, "Requests".
#pragma once

#include "sim/config/serving_spec.h"

#include <cstdint>
#include <random>
#include <vector>

namespace sim::serve {

struct Request {
    double arrival_s = 0;
    std::int64_t prompt = 0, output = 0;
    bool clamped = false;  // lengths cut to fit the model's max_seq
};

// The variates parasim draws, from one mt19937_64 stream.
class Random {
public:
    explicit Random(std::uint64_t seed) : engine_(seed) {}
    double uniform();                                            // [0, 1), 53 random bits
    double exponential(double rate);                             // mean 1 / rate
    double normal();                                             // Box-Muller, one of the pair
    double gamma(double shape, double scale);                    // Marsaglia-Tsang (2000); shape < 1 boosted
    std::int64_t uniform_int(std::int64_t lo, std::int64_t hi);  // inclusive

private:
    std::mt19937_64 engine_;
};

// The run's requests, in arrival order (the first at 0 s for generated
// arrivals; closed-loop requests all say 0 s, and the simulation sets each
// one's arrival when a client's previous request finishes). Each prompt + output fits `max_seq` (prompts cut to max_seq - 1,
// then outputs to what is left; such requests are flagged).
std::vector<Request> make_requests(const config::ServingSpec& spec, std::int64_t max_seq);

}  // namespace sim::serve
