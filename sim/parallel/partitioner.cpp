// Min-max contiguous partition with a per-part capacity.
#include "sim/parallel/partitioner.h"

#include "sim/core/error.h"

#include <algorithm>
#include <limits>

namespace sim::parallel {

std::optional<std::vector<LayerRange>> min_max_partition(const std::vector<double>& cost,
                                                         const std::vector<double>& footprint, int parts,
                                                         double capacity) {
    const int n = static_cast<int>(cost.size());
    check(footprint.size() == cost.size(), "partition: cost and footprint sizes differ");
    if (parts < 1 || parts > n) return std::nullopt;
    std::vector<double> cs(n + 1, 0.0), fs(n + 1, 0.0);
    for (int i = 0; i < n; ++i) {
        cs[i + 1] = cs[i] + cost[i];
        fs[i + 1] = fs[i] + footprint[i];
    }
    constexpr double inf = std::numeric_limits<double>::infinity();
    // best[k][i]: smallest bottleneck splitting the first i layers into k parts.
    std::vector<std::vector<double>> best(parts + 1, std::vector<double>(n + 1, inf));
    best[0][0] = 0.0;
    for (int k = 1; k <= parts; ++k)
        for (int i = k; i <= n; ++i)
            for (int j = k - 1; j < i; ++j) {
                if (best[k - 1][j] == inf || fs[i] - fs[j] > capacity) continue;
                best[k][i] = std::min(best[k][i], std::max(best[k - 1][j], cs[i] - cs[j]));
            }
    const double bound = best[parts][n];
    if (bound == inf) return std::nullopt;
    // Greedy packing under the bound; a small relative slack absorbs rounding.
    const double limit = bound * (1 + 1e-12) + 1e-300;
    std::vector<LayerRange> out;
    int first = 0;
    // Fewest parts greedy packing needs for the suffix [from, n) (n + 1 when
    // a single layer exceeds a limit).
    auto parts_needed = [&](int from) {
        int count = 0;
        for (int s = from; s < n;) {
            int e = s + 1;
            if (cs[e] - cs[s] > limit || fs[e] - fs[s] > capacity) return n + 1;
            while (e < n && cs[e + 1] - cs[s] <= limit && fs[e + 1] - fs[s] <= capacity) ++e;
            ++count;
            s = e;
        }
        return count;
    };
    for (int k = 0; k < parts; ++k) {
        const int remaining_parts = parts - k - 1;
        int chosen = -1;
        // The range [first, last) grows while it stays within the limits; keep
        // the largest end whose suffix still splits into remaining_parts
        // parts (any count up to that works: splitting a part never hurts).
        for (int last = first + 1; last <= n - remaining_parts; ++last) {
            if (cs[last] - cs[first] > limit || fs[last] - fs[first] > capacity) break;
            const int need = parts_needed(last);
            if (remaining_parts == 0 ? last == n : need <= remaining_parts) chosen = last;
        }
        check(chosen > first, "partition: greedy packing found no range under the optimal bound");
        out.emplace_back(first, chosen);
        first = chosen;
    }
    return out;
}

}  // namespace sim::parallel
