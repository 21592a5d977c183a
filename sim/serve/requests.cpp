// Arrival processes and length distributions (docs/serving.md, "Requests").
#include "sim/serve/requests.h"

#include "sim/core/error.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace sim::serve {

double Random::uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

double Random::exponential(double rate) { return -std::log1p(-uniform()) / rate; }

double Random::normal() {
    // 1 - u is in (0, 1], so the logarithm is finite.
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double Random::gamma(double shape, double scale) {
    if (shape < 1.0) {
        // Gamma(k) = Gamma(k + 1) * U^(1/k) (Marsaglia and Tsang's boost).
        const double u = 1.0 - uniform();
        return gamma(shape + 1.0, scale) * std::pow(u, 1.0 / shape);
    }
    const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    while (true) {
        double x = 0, v = 0;
        do {
            x = normal();
            v = 1.0 + c * x;
        } while (v <= 0);
        v = v * v * v;
        const double u = 1.0 - uniform();
        if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v * scale;
    }
}

std::int64_t Random::uniform_int(std::int64_t lo, std::int64_t hi) {
    const double span = static_cast<double>(hi - lo + 1);
    return std::min(hi, lo + static_cast<std::int64_t>(std::floor(uniform() * span)));
}

namespace {

std::int64_t draw_length(const config::LengthSpec& l, std::int64_t max_seq, Random& rng) {
    using config::LengthDistribution;
    switch (l.kind) {
        case LengthDistribution::fixed: return l.value;
        case LengthDistribution::uniform: return rng.uniform_int(l.min, l.max);
        case LengthDistribution::lognormal: {
            // mean of exp(mu + sigma z) is exp(mu + sigma^2 / 2).
            const double mu = std::log(l.mean) - l.sigma * l.sigma / 2.0;
            const double x = std::exp(mu + l.sigma * rng.normal());
            const std::int64_t hi = l.max > 0 ? l.max : max_seq;
            return std::clamp<std::int64_t>(std::llround(std::min(x, 1e15)), l.min, std::max(l.min, hi));
        }
    }
    return l.value;
}

}  // namespace

std::vector<Request> make_requests(const config::ServingSpec& spec, std::int64_t max_seq) {
    using config::ArrivalProcess;
    std::vector<Request> out;
    const std::int64_t cap = spec.requests > 0 ? spec.requests : INT64_MAX;
    if (spec.arrivals == ArrivalProcess::trace) {
        for (const auto& t : spec.trace) {
            if (static_cast<std::int64_t>(out.size()) >= cap) break;
            if (spec.duration_s > 0 && t.arrival_s >= spec.duration_s) break;
            out.push_back(Request{t.arrival_s, t.prompt_tokens, t.output_tokens, false});
        }
    } else {
        // Separate streams for arrivals and lengths, so that changing the
        // rate keeps every request's lengths.
        Random arrivals(spec.seed), lengths(spec.seed ^ 0x9E3779B97F4A7C15ULL);
        const double shape = 1.0 / (spec.cv * spec.cv);
        // Closed loop: `requests` bounds the run (duration is refused).
        double t = 0;
        while (static_cast<std::int64_t>(out.size()) < cap) {
            if (spec.duration_s > 0 && t >= spec.duration_s) break;
            if (out.size() >= 1'000'000)
                throw ConfigError(spec.where,
                                  "more than 1,000,000 requests arrive within the duration; give "
                                  "'requests' or a shorter duration");
            Request r;
            r.arrival_s = t;
            r.prompt = draw_length(spec.prompt, max_seq, lengths);
            r.output = draw_length(spec.output, max_seq, lengths);
            out.push_back(r);
            switch (spec.arrivals) {
                case ArrivalProcess::poisson: t += arrivals.exponential(spec.rate); break;
                case ArrivalProcess::gamma: t += arrivals.gamma(shape, 1.0 / (spec.rate * shape)); break;
                case ArrivalProcess::closed: break;  // set by the simulation as clients' requests finish
                default: t += 1.0 / spec.rate; break;
            }
        }
        // vllm bench serve sends request i after the first i + 1 gaps, all
        // scaled so that the last is sent at exactly requests / rate; t is
        // the sum of every gap drawn (one after each request).
        if (spec.normalize && !out.empty() && t > 0) {
            const double scale = static_cast<double>(out.size()) / spec.rate / t;
            for (std::size_t i = 0; i < out.size(); ++i)
                out[i].arrival_s = (i + 1 < out.size() ? out[i + 1].arrival_s : t) * scale;
        }
    }
    for (auto& r : out) {
        if (r.prompt > max_seq - 1) {
            r.prompt = std::max<std::int64_t>(1, max_seq - 1);
            r.clamped = true;
        }
        if (r.prompt + r.output > max_seq) {
            r.output = std::max<std::int64_t>(1, max_seq - r.prompt);
            r.clamped = true;
        }
    }
    return out;
}

}  // namespace sim::serve
