// The memory of TensorRT-LLM v0.6.1's grouped-query (Llama-2-70B) runs of the
// reference set, by hand: weights and KV cache per GPU under tensor
// parallelism. docs/validation.md §7 ("Grouped-query decode in TensorRT-LLM
// 0.6.1") rules out memory capacity as the cause of those runs' error with
// these figures: every run holds its whole static batch with room to spare,
// so the measured engine did not run fewer sequences at once than the batch.
#include "sim/config/model_loader.h"
#include "sim/hw/dtype.h"
#include "sim/workload/footprint.h"
#include "sim/workload/model.h"
#include "sim/workload/operators.h"

#include <doctest/doctest.h>

#include <cstdint>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;
using namespace sim::workload;

namespace {

// Llama-2-70B: 80 layers, hidden 8192, 64 query heads, 8 KV heads of 128,
// SwiGLU of 28672, vocabulary 32000, untied head (models/llama2-70b.yaml).
OperatorOptions options(int tp, hw::DType weights, hw::DType kv) {
    OperatorOptions o;
    o.inference = true;
    o.tp = tp;
    o.precision.compute = weights;
    o.precision.weights = weights;
    o.precision.kv = kv;
    return o;
}

// Weights of one GPU: 80 layers, the token table and the head.
std::uint64_t weight_bytes(const ModelSpec& m, const OperatorOptions& o) {
    return static_cast<std::uint64_t>(m.layers) * layer_weight_bytes(m, o).value + embedding_weight_bytes(m, o).value +
           head_weight_bytes(m, o).value;
}

}  // namespace

TEST_CASE("Llama-2-70B under TP: the KV cache splits its 8 KV heads, 2 x heads/tp x 128 elements a token and layer") {
    const ModelSpec m = config::load_model_file(config::model_path("llama2-70b"));
    // tp 2, FP8 cache: 4 KV heads a GPU, 2 x 4 x 128 x 1 byte = 1024 bytes a token and layer.
    const OperatorOptions tp2 = options(2, hw::DType::fp8, hw::DType::fp8);
    // b64, 2048 + 2048 tokens: 64 x 4096 x 1024 = 268,435,456 bytes a layer; x 80 = 21.47 GB.
    CHECK(layer_kv_bytes(m, 64, 4096, tp2).value == 268435456ULL);
    // b1024, 128 + 128 tokens: the same 262,144 tokens.
    CHECK(layer_kv_bytes(m, 1024, 256, tp2).value == 268435456ULL);
    // tp 4: 2 KV heads a GPU. b480, 128 + 2048: 480 x 2176 x 2 x 2 x 128 = 534,773,760 a layer.
    CHECK(layer_kv_bytes(m, 480, 2176, options(4, hw::DType::fp8, hw::DType::fp8)).value == 534773760ULL);
    // A100 FP16 cache, tp 4, b240, 128 + 2048: 240 x 2176 x 2 x 2 x 128 x 2 bytes, the same bytes.
    CHECK(layer_kv_bytes(m, 240, 2176, options(4, hw::DType::fp16, hw::DType::fp16)).value == 534773760ULL);
}

TEST_CASE("Llama-2-70B under TP: weights and a whole static batch's cache fit 80 GB in each v0.6.1 run") {
    const ModelSpec m = config::load_model_file(config::model_path("llama2-70b"));
    // A layer on one of tp GPUs: QKV 8192 x (8192 + 2 x 1024), out 8192 x 8192, SwiGLU 3 x 8192 x 28672,
    // all split by tp; the two RMSNorm vectors (2 x 8192) on every GPU. 855,638,016 / tp + 16,384 elements.
    // Token table and head: 32000 x 8192 each, split by vocabulary; the final norm 8192 on every GPU.
    const double per_layer = 8192.0 * 10240 + 8192.0 * 8192 + 3.0 * 8192 * 28672;
    const double tables = 2.0 * 32000 * 8192;
    auto expected_weights = [&](int tp, double bytes) {
        return static_cast<std::uint64_t>((80.0 * (per_layer / tp + 2 * 8192) + tables / tp + 8192) * bytes);
    };
    const double capacity = 80e9;  // the datasheet's 80 GB, below the 85.5-85.9 GB the drivers report
    struct Run {
        const char* name;
        int tp;
        hw::DType dtype;  // weights and cache
        std::int64_t batch, context;
        std::uint64_t kv;  // 80 layers of cache on one GPU
        double share;      // (weights + cache) / 80 GB stays below this
    };
    const Run runs[] = {
        // 34.49 GB of weights + 21.47 GB of cache = 55.96 GB (b1024 x (128 + 128) holds the same tokens)
        {"H100 FP8, tp 2, b64 x (2048 + 2048)", 2, hw::DType::fp8, 64, 4096, 21474836480ULL, 0.70},
        // 17.25 + 42.78 = 60.03 GB
        {"H100 FP8, tp 4, b480 x (128 + 2048)", 4, hw::DType::fp8, 480, 2176, 42781900800ULL, 0.76},
        // 34.49 + 42.78 = 77.27 GB: the tightest
        {"A100 FP16, tp 4, b240 x (128 + 2048)", 4, hw::DType::fp16, 240, 2176, 42781900800ULL, 0.97},
    };
    for (const Run& r : runs) {
        CAPTURE(r.name);
        const OperatorOptions o = options(r.tp, r.dtype, r.dtype);
        const std::uint64_t w = weight_bytes(m, o), kv = 80 * layer_kv_bytes(m, r.batch, r.context, o).value;
        CHECK(w == expected_weights(r.tp, hw::bytes_per_element(r.dtype)));
        CHECK(kv == r.kv);
        CHECK(static_cast<double>(w + kv) < r.share * capacity);
    }
}

TEST_SUITE_END();
