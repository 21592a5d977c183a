// Expert loads and all-to-all volumes of an MoE layer (see moe.h, docs/moe.md).
#include "sim/workload/moe.h"

#include "sim/core/error.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numbers>
#include <unordered_map>

namespace sim::workload {

MoeRouting::Kind parse_routing(const std::string& text, double& zipf_s, std::string& error,
                               std::string* histogram_file) {
    error.clear();
    if (text == "balanced") return MoeRouting::Kind::balanced;
    if (text == "random") return MoeRouting::Kind::random;
    const std::string hist = "histogram(";
    if (text.rfind(hist, 0) == 0 && text.back() == ')') {
        if (text.size() == hist.size() + 1) {
            error = "histogram() names no file: histogram(FILE), FILE a CSV beside the scenario";
            return MoeRouting::Kind::balanced;
        }
        if (histogram_file) *histogram_file = text.substr(hist.size(), text.size() - hist.size() - 1);
        return MoeRouting::Kind::histogram;
    }
    const std::string pre = "zipf(";
    if (text.rfind(pre, 0) == 0 && text.size() > pre.size() + 1 && text.back() == ')') {
        const std::string num = text.substr(pre.size(), text.size() - pre.size() - 1);
        char* end = nullptr;
        const double s = std::strtod(num.c_str(), &end);
        if (end == num.c_str() + num.size() && std::isfinite(s) && s > 0 && s <= 8) {
            zipf_s = s;
            return MoeRouting::Kind::zipf;
        }
        error = fmt::format("zipf exponent '{}' is not a number in (0, 8]", num);
        return MoeRouting::Kind::balanced;
    }
    error = fmt::format("routing '{}': expected balanced, random, zipf(S) (e.g. zipf(1.0)) or histogram(FILE)", text);
    return MoeRouting::Kind::balanced;
}

std::string to_string(const MoeRouting& r) {
    switch (r.kind) {
        case MoeRouting::Kind::balanced: return "balanced";
        case MoeRouting::Kind::random: return "random";
        case MoeRouting::Kind::histogram: return fmt::format("histogram({})", r.histogram ? r.histogram->file : "");
        case MoeRouting::Kind::zipf: break;
    }
    return fmt::format("zipf({})", r.zipf_s);
}

double expected_max_normal(int n) {
    if (n <= 1) return 0.0;
    // The operator builders ask for it per layer and micro-batch: each
    // thread (validate runs points in parallel) keeps what it computed.
    thread_local std::unordered_map<int, double> memo;
    if (const auto it = memo.find(n); it != memo.end()) return it->second;
    // Simpson's rule on [-12, 12]: the integrand's tails are below 1e-30 there.
    constexpr int kSteps = 4800;
    constexpr double kLo = -12.0, kHi = 12.0, kStep = (kHi - kLo) / kSteps;
    const double inv_sqrt_2pi = 1.0 / std::sqrt(2.0 * std::numbers::pi);
    double sum = 0;
    for (int i = 0; i <= kSteps; ++i) {
        const double x = kLo + i * kStep;
        const double f =
            x * n * inv_sqrt_2pi * std::exp(-0.5 * x * x) * std::pow(0.5 * std::erfc(-x / std::sqrt(2.0)), n - 1);
        sum += f * (i == 0 || i == kSteps ? 1.0 : (i % 2 == 1 ? 4.0 : 2.0));
    }
    return memo[n] = sum * kStep / 3.0;
}

double random_routing_hot_tokens(std::int64_t experts, std::int64_t top_k, int ep, std::int64_t tokens) {
    const double n = static_cast<double>(tokens) * ep, k = static_cast<double>(top_k), e = static_cast<double>(experts);
    const double share = 1.0 / ep;
    const double mean = n * k * share;
    if (ep <= 1 || experts <= 1) return mean;
    const double var = n * k * share * (1.0 - share) * (e - k) / (e - 1.0);
    return mean + std::sqrt(var) * std::sqrt(static_cast<double>(ep) / (ep - 1.0)) * expected_max_normal(ep);
}

namespace {

// Integer shares of `total` in proportion to `weights`, each at most `cap`:
// water-filling (an expert at the cap takes no more; its excess goes to the
// others in proportion, and evenly to those of weight 0 once every weighted
// one is at the cap: a token's top_k experts are distinct), then the largest
// remainders get the rounding units.
std::vector<std::int64_t> shares(std::vector<double> weights, std::int64_t total, std::int64_t cap) {
    const std::size_t n = weights.size();
    std::vector<double> exact(n, 0.0);
    std::vector<bool> capped(n, false);
    double left = static_cast<double>(total);
    for (std::size_t round = 0; round <= n; ++round) {
        double w = 0;
        for (std::size_t i = 0; i < n; ++i)
            if (!capped[i]) w += weights[i];
        if (w <= 0 && left > 0) {
            for (std::size_t i = 0; i < n; ++i)
                if (!capped[i]) {
                    weights[i] = 1.0;
                    w += 1.0;
                }
        }
        if (w <= 0) break;
        bool changed = false;
        for (std::size_t i = 0; i < n; ++i) {
            if (capped[i]) continue;
            exact[i] = left * weights[i] / w;
            if (exact[i] > static_cast<double>(cap)) {
                capped[i] = true;
                exact[i] = static_cast<double>(cap);
                changed = true;
            }
        }
        if (!changed) break;
        left = static_cast<double>(total);
        for (std::size_t i = 0; i < n; ++i)
            if (capped[i]) left -= exact[i];
    }
    std::vector<std::int64_t> out(n);
    std::int64_t given = 0;
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = static_cast<std::int64_t>(std::floor(exact[i] + 1e-9));
        given += out[i];
    }
    // Rounding units to the largest remainders (lower index first on ties), never past the cap.
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return exact[a] - static_cast<double>(out[a]) > exact[b] - static_cast<double>(out[b]);
    });
    for (std::size_t j = 0; given < total && j < n; ++j) {
        if (out[order[j]] >= cap) continue;
        ++out[order[j]];
        ++given;
    }
    return out;
}

}  // namespace

ExpertLoad expert_load(std::int64_t experts, std::int64_t top_k, int ep, std::int64_t tokens, const MoeRouting& r,
                       std::int64_t layer) {
    if (experts < 1 || top_k < 1 || top_k > experts)
        throw ModelError(fmt::format("MoE routing: top_k {} must be in [1, experts {}]", top_k, experts));
    if (ep < 1 || experts % ep != 0)
        throw ModelError(fmt::format("MoE routing: ep={} does not divide the {} experts", ep, experts));
    if (tokens < 1) throw ModelError(fmt::format("MoE routing: {} tokens", tokens));
    ExpertLoad l;
    const std::int64_t group_tokens = tokens * ep;
    l.routed = group_tokens * top_k;
    if (r.kind == MoeRouting::Kind::balanced) {
        // Every expert that receives tokens receives the same count, rounded
        // up: the busiest expert paces the layer.
        const std::int64_t active = std::min(experts, l.routed);
        const std::int64_t each = (l.routed + active - 1) / active;
        l.per_expert.assign(static_cast<std::size_t>(experts), 0);
        for (std::int64_t e = 0; e < active; ++e) l.per_expert[static_cast<std::size_t>(e)] = each;
    } else if (r.kind == MoeRouting::Kind::random) {
        // Rank 0 is the straggler with the expected largest load (rounded
        // up, at most every token once per local expert), shared evenly by its
        // experts; the other ranks share the rest evenly.
        const std::int64_t local = experts / ep;
        const auto hot = std::min<std::int64_t>(
            {static_cast<std::int64_t>(std::ceil(random_routing_hot_tokens(experts, top_k, ep, tokens) - 1e-9)),
             group_tokens * local, l.routed});
        const std::vector<double> even_hot(static_cast<std::size_t>(local), 1.0);
        const std::vector<double> even_rest(static_cast<std::size_t>(experts - local), 1.0);
        l.per_expert = shares(even_hot, hot, group_tokens);
        if (experts > local) {
            const auto rest = shares(even_rest, l.routed - hot, group_tokens);
            l.per_expert.insert(l.per_expert.end(), rest.begin(), rest.end());
        }
    } else if (r.kind == MoeRouting::Kind::histogram) {
        // The measured shares, applied as zipf's weights are (the config layer
        // has checked the file against the model; this guards other callers).
        const auto n = static_cast<std::size_t>(experts);
        static const std::vector<double> none;
        const std::vector<double>& weights = r.histogram ? r.histogram->weights(layer) : none;
        double sum = 0;
        for (const double w : weights) sum += w;
        if (weights.size() != n || !(sum > 0) || !std::isfinite(sum))
            throw ModelError(
                fmt::format("MoE routing: the histogram does not give a load to each of the {} experts", experts));
        l.per_expert = shares(weights, l.routed, group_tokens);
    } else {
        std::vector<double> w(static_cast<std::size_t>(experts));
        for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::pow(static_cast<double>(i + 1), -r.zipf_s);
        // A token chooses top_k distinct experts: no expert gets more than every token once.
        l.per_expert = shares(w, l.routed, group_tokens);
    }
    if (r.capacity_factor > 0) {
        const auto capacity = static_cast<std::int64_t>(
            std::ceil(r.capacity_factor * static_cast<double>(l.routed) / static_cast<double>(experts) - 1e-9));
        for (auto& n : l.per_expert) {
            if (n <= capacity) continue;
            l.dropped += n - capacity;
            n = capacity;
        }
    }
    const std::int64_t local = experts / ep;
    l.hot_tokens = -1;
    for (int j = 0; j < ep; ++j) {
        std::int64_t sum = 0;
        for (std::int64_t e = 0; e < local; ++e) sum += l.per_expert[static_cast<std::size_t>(j * local + e)];
        if (sum > l.hot_tokens) {
            l.hot_tokens = sum;
            l.hot_rank = j;
        }
    }
    const auto first = l.per_expert.begin() + l.hot_rank * local;
    l.hot_local.assign(first, first + local);
    return l;
}

bool loads_differ_by_layer(const MoeRouting& r) {
    return r.kind == MoeRouting::Kind::histogram && r.histogram && r.histogram->per_layer;
}

std::int64_t worst_hot_tokens(std::int64_t experts, std::int64_t top_k, int ep, std::int64_t tokens,
                              const MoeRouting& r, std::int64_t first, std::int64_t last) {
    if (!loads_differ_by_layer(r) || last <= first) return expert_load(experts, top_k, ep, tokens, r).hot_tokens;
    std::int64_t worst = 0;
    for (std::int64_t l = first; l < last; ++l)
        worst = std::max(worst, expert_load(experts, top_k, ep, tokens, r, l).hot_tokens);
    return worst;
}

double all_to_all_bytes(const ExpertLoad& load, int ep, std::int64_t hidden, double bytes_per_element) {
    if (ep <= 1) return 0.0;
    return static_cast<double>(load.hot_tokens) * static_cast<double>(hidden) * bytes_per_element;
}

}  // namespace sim::workload
