// The footprint API's whole-byte rule (docs/workload-model.md §10): each
// closed form adds its tensors exactly and rounds the sum up once; a sum past
// 2^64 bytes is refused, not wrapped. Tiny shapes, so every answer is by hand.
#include <doctest/doctest.h>

#include "sim/core/error.h"
#include "sim/hw/dtype.h"
#include "sim/workload/footprint.h"
#include "sim/workload/model.h"
#include "sim/workload/operators.h"

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using namespace sim::workload;
using sim::hw::DType;

namespace {

// One head of width 1, hidden 1: a KV entry is 2 elements a token.
ModelSpec unit_model() {
    ModelSpec m;
    m.name = "unit";
    m.layers = m.hidden = m.heads = m.kv_heads = m.head_dim = m.ffn = 1;
    m.vocab = 17;  // an odd count of 4-bit elements
    m.max_seq = 8;
    m.position = PositionKind::rope;  // no position table
    return m;
}

}  // namespace

TEST_CASE("footprint: an nvfp4 KV cache of a fractional byte count is rounded up, never down") {
    const ModelSpec m = unit_model();
    OperatorOptions o;
    o.precision.kv = DType::nvfp4;  // 4 bits + one 1-byte scale per 16: 0.5625 bytes an element
    // 1 token: 2 elements x 0.5625 = 1.125 bytes -> 2 (rounding to nearest or down gives 1).
    CHECK(layer_kv_bytes(m, 1, 1, o).value == 2);
    // 8 tokens: 16 elements x 0.5625 = 9 bytes exactly: nothing to round.
    CHECK(layer_kv_bytes(m, 1, 8, o).value == 9);
    // 3 sequences of 3 tokens: 18 elements x 0.5625 = 10.125 -> 11; the rule
    // rounds the layer's sum once, not each sequence (3 x ceil(3.375) = 12).
    CHECK(layer_kv_bytes(m, 3, 3, o).value == 11);
    o.precision.kv = DType::fp8;  // a whole-byte dtype: 2 bytes a token, as before
    CHECK(layer_kv_bytes(m, 1, 1, o).value == 2);
}

TEST_CASE("footprint: nvfp4 weights of 17 parameters take 10 bytes") {
    const ModelSpec m = unit_model();
    OperatorOptions o;
    o.precision.weights = DType::nvfp4;
    // The token table, 17 x 1, no position table (rope): 17 x 0.5625 = 9.5625 -> 10.
    CHECK(embedding_weight_bytes(m, o).value == 10);
    o.precision.weights = DType::mxfp4;  // one scale per 32: 17 x 0.53125 = 9.03125 -> 10
    CHECK(embedding_weight_bytes(m, o).value == 10);
    o.precision.weights = DType::bf16;
    CHECK(embedding_weight_bytes(m, o).value == 34);
}

TEST_CASE("footprint: a context-parallel share of a token is rounded up") {
    const ModelSpec m = unit_model();
    OperatorOptions o;
    o.precision.compute = DType::bf16;
    // 3 tokens of hidden 1 in bf16 = 6 bytes; over cp = 4 ranks, 1.5 -> 2.
    o.cp = 4;
    CHECK(boundary_activation_bytes(m, PassShape{1, 3, 3}, o).value == 2);
    o.cp = 2;  // 3 bytes exactly
    CHECK(boundary_activation_bytes(m, PassShape{1, 3, 3}, o).value == 3);
}

TEST_CASE("footprint: a KV cache past 2^64 bytes is refused as a model error, not wrapped") {
    ModelSpec m = unit_model();
    m.kv_heads = m.heads = 1024;
    m.head_dim = 1024;
    OperatorOptions o;
    o.precision.kv = DType::fp16;
    // 2 x 2^31 x 2^31 x 2^10 x 2^10 x 2 bytes = 2^84 bytes.
    const std::int64_t two31 = std::int64_t{1} << 31;
    CHECK_THROWS_AS(layer_kv_bytes(m, two31, two31, o), sim::ModelError);
    // 2^20 tokens: 2 x 2^20 x 2^20 x 2 = 2^42 bytes fits.
    CHECK(layer_kv_bytes(m, 1, std::int64_t{1} << 20, o).value == std::uint64_t{1} << 42);
}

TEST_SUITE_END();
