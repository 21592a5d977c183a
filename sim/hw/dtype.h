// Numeric formats of tensors and tensor-core math.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>

namespace sim::hw {

enum class DType { fp32, tf32, fp16, bf16, fp8, int8 };
inline constexpr std::size_t kDTypeCount = 6;
inline constexpr std::array<DType, kDTypeCount> kAllDTypes = {DType::fp32, DType::tf32, DType::fp16,
                                                              DType::bf16, DType::fp8,  DType::int8};

// Storage bytes per element (TF32 is stored as FP32).
double bytes_per_element(DType t);
const char* to_string(DType t);
std::optional<DType> parse_dtype(const std::string& s);

}  // namespace sim::hw
