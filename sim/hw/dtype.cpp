// Numeric formats: storage sizes and names.
#include "sim/hw/dtype.h"

namespace sim::hw {

double bytes_per_element(DType t) {
    switch (t) {
        case DType::fp32:
        case DType::tf32: return 4.0;
        case DType::fp16:
        case DType::bf16: return 2.0;
        case DType::fp8:
        case DType::int8: return 1.0;
    }
    return 0.0;
}

const char* to_string(DType t) {
    switch (t) {
        case DType::fp32: return "fp32";
        case DType::tf32: return "tf32";
        case DType::fp16: return "fp16";
        case DType::bf16: return "bf16";
        case DType::fp8: return "fp8";
        case DType::int8: return "int8";
    }
    return "?";
}

std::optional<DType> parse_dtype(const std::string& s) {
    for (DType t : kAllDTypes) {
        if (s == to_string(t)) return t;
    }
    return std::nullopt;
}

}  // namespace sim::hw
