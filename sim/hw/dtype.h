// Numeric formats of tensors and tensor-core math, with their storage cost.
// Block-scaled formats (fp6, nvfp4, mxfp4; Blackwell tensor cores) carry one
// scale per block of elements; bytes_per_element includes that scale, so
// every byte count (weights, KV cache, GEMM operand reads) pays for it.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace sim::hw {

// fp6 is MXFP6 (E2M3/E3M2 values, one E8M0 scale per 32); nvfp4 is NVIDIA's
// E2M1 with one E4M3 scale per 16; mxfp4 is OCP MXFP4, E2M1 with one E8M0
// scale per 32 (docs/hardware-model.md, "Block-scaled dtypes").
enum class DType { fp32, tf32, fp16, bf16, fp8, int8, fp6, nvfp4, mxfp4 };
inline constexpr std::size_t kDTypeCount = 9;
inline constexpr std::array<DType, kDTypeCount> kAllDTypes = {DType::fp32, DType::tf32,  DType::fp16,
                                                              DType::bf16, DType::fp8,   DType::int8,
                                                              DType::fp6,  DType::nvfp4, DType::mxfp4};

// Storage bytes per element (TF32 is stored as FP32). For block-scaled
// formats: element bits / 8 + scale bytes / block size.
double bytes_per_element(DType t);
// Elements sharing one scale (0: not block-scaled).
int scale_block(DType t);
// Bytes of one block scale (0: not block-scaled).
int scale_bytes(DType t);
// True for the formats a GPU file may leave out of `peak` (absent = unsupported):
// those added after the original six, so older GPU files stay valid.
bool optional_in_gpu_file(DType t);
// Formats below 16 bits whose GEMMs take bf16/fp16 activations around them.
bool is_low_precision(DType t);
const char* to_string(DType t);
std::optional<DType> parse_dtype(const std::string& s);
// Every dtype's name, in kAllDTypes order (what a file may write).
std::vector<std::string> dtype_names();

}  // namespace sim::hw
