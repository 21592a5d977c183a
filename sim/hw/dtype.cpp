// Numeric formats: storage sizes (with block scales) and names.
#include "sim/hw/dtype.h"

namespace sim::hw {

namespace {

// Bits of one element, without its share of a block scale.
int element_bits(DType t) {
    switch (t) {
        case DType::fp32:
        case DType::tf32: return 32;
        case DType::fp16:
        case DType::bf16: return 16;
        case DType::fp8:
        case DType::int8: return 8;
        case DType::fp6: return 6;
        case DType::nvfp4:
        case DType::mxfp4: return 4;
    }
    return 0;
}

}  // namespace

int scale_block(DType t) {
    switch (t) {
        case DType::nvfp4: return 16;  // one E4M3 scale per 16 elements
        case DType::fp6:
        case DType::mxfp4: return 32;  // OCP MX: one E8M0 scale per 32 elements
        default: return 0;
    }
}

int scale_bytes(DType t) { return scale_block(t) > 0 ? 1 : 0; }

double bytes_per_element(DType t) {
    const double payload = element_bits(t) / 8.0;
    const int block = scale_block(t);
    return block > 0 ? payload + static_cast<double>(scale_bytes(t)) / block : payload;
}

bool optional_in_gpu_file(DType t) { return t == DType::fp6 || t == DType::nvfp4 || t == DType::mxfp4; }

bool is_low_precision(DType t) { return element_bits(t) <= 8; }

const char* to_string(DType t) {
    switch (t) {
        case DType::fp32: return "fp32";
        case DType::tf32: return "tf32";
        case DType::fp16: return "fp16";
        case DType::bf16: return "bf16";
        case DType::fp8: return "fp8";
        case DType::int8: return "int8";
        case DType::fp6: return "fp6";
        case DType::nvfp4: return "nvfp4";
        case DType::mxfp4: return "mxfp4";
    }
    return "?";
}

std::optional<DType> parse_dtype(const std::string& s) {
    for (DType t : kAllDTypes) {
        if (s == to_string(t)) return t;
    }
    return std::nullopt;
}

std::vector<std::string> dtype_names() {
    std::vector<std::string> names;
    for (DType t : kAllDTypes) names.emplace_back(to_string(t));
    return names;
}

}  // namespace sim::hw
