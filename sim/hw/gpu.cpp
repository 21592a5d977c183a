// GpuSpec lookups that can fail: a dtype the GPU does not support is a
// ModelError naming both, never a silent fallback to another dtype.
#include "sim/hw/gpu.h"

#include "sim/core/error.h"

namespace sim::hw {

std::string GpuSpec::supported_dtypes() const {
    std::string out;
    for (DType t : kAllDTypes) {
        if (!supports(t)) continue;
        if (!out.empty()) out += ", ";
        out += to_string(t);
    }
    return out.empty() ? "none" : out;
}

FlopRate GpuSpec::peak_of(DType t) const {
    const auto& p = peak[static_cast<std::size_t>(t)];
    if (!p) {
        throw ModelError(fmt::format("GPU '{}' ({}) does not support {} (supported: {})", name, architecture,
                                     to_string(t), supported_dtypes()));
    }
    return *p;
}

double GpuSpec::gemm_ceiling(DType t, bool grouped) const {
    peak_of(t);
    if (grouped && t == DType::fp8 && efficiency.gemm_grouped_fp8) return *efficiency.gemm_grouped_fp8;
    return efficiency.gemm[static_cast<std::size_t>(t)];
}

}  // namespace sim::hw
