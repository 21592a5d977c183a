// HBM capacity verdict: fits or out of memory, with the breakdown and the
// component that dominates, so a user sees why a plan does not fit.
#include "sim/hw/memory.h"

#include "sim/core/error.h"

#include <array>
#include <utility>

namespace sim::hw {

MemoryVerdict check_capacity(const MemoryBreakdown& need, Bytes capacity) {
    const std::array<std::pair<const char*, double>, 6> parts = {{{"weights", need.weights},
                                                                  {"gradients", need.gradients},
                                                                  {"optimizer state", need.optimizer},
                                                                  {"activations", need.activations},
                                                                  {"KV cache", need.kv_cache},
                                                                  {"workspace", need.workspace}}};
    for (const auto& [what, bytes] : parts) {
        if (!(bytes >= 0.0)) throw InternalError(fmt::format("memory breakdown: {} is {} bytes", what, bytes));
    }
    MemoryVerdict v;
    v.breakdown = need;
    v.capacity = capacity;
    const double total = need.total();
    v.oom = total > capacity.as_double();

    std::size_t largest = 0;
    for (std::size_t i = 1; i < parts.size(); ++i) {
        if (parts[i].second > parts[largest].second) largest = i;
    }
    std::string detail;
    for (const auto& [what, bytes] : parts) {
        if (bytes <= 0.0) continue;
        detail += fmt::format("{}{} {}", detail.empty() ? "" : ", ", what, format_bytes(bytes));
    }
    if (detail.empty()) detail = "nothing";
    const double share = total > 0.0 ? 100.0 * parts[largest].second / total : 0.0;
    if (v.oom) {
        v.explanation = fmt::format("out of memory: {} {} ({:.0f}%) of {} needed; capacity {} (breakdown: {})",
                                    parts[largest].first, format_bytes(parts[largest].second), share,
                                    format_bytes(total), format_bytes(capacity.as_double()), detail);
    } else {
        v.explanation = fmt::format("fits: {} of {} ({:.0f}%) used (breakdown: {})", format_bytes(total),
                                    format_bytes(capacity.as_double()),
                                    capacity.value > 0 ? 100.0 * total / capacity.as_double() : 0.0, detail);
    }
    return v;
}

}  // namespace sim::hw
