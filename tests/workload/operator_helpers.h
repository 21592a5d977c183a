// Shared by the operator tests (test_operators.cpp, test_context_parallel_ops.cpp):
// a shipped model by name, a GPT-3-style layer in code, and lookups of an
// operator's name, FLOPs and bytes in a pass's operator list.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/config/model_loader.h"
#include "sim/workload/model.h"
#include "sim/workload/operators.h"

namespace parasim_workload_tests {

using namespace sim::workload;
using sim::hw::KernelKind;

inline ModelSpec shipped(const std::string& name) {
    return sim::config::load_model_file(sim::config::model_path(name));
}

// A GPT-3-style layer in code: h = 1024, 16 heads of 64, MLP 4h, GELU, biases.
inline ModelSpec gpt_like() {
    ModelSpec m;
    m.name = "gpt-like";
    m.layers = 4;
    m.hidden = 1024;
    m.heads = 16;
    m.kv_heads = 16;
    m.head_dim = 64;
    m.ffn = 4096;
    m.ffn_kind = FfnKind::gelu;
    m.vocab = 50304;
    m.max_seq = 2048;
    m.norm = NormKind::layernorm;
    m.tied_embeddings = true;
    m.position = PositionKind::learned;
    m.bias = Biases{true, true, true};
    return m;
}

inline const Operator& find(const std::vector<Operator>& ops, const std::string& name) {
    auto it = std::find_if(ops.begin(), ops.end(), [&](const Operator& o) { return o.kernel.name == name; });
    REQUIRE_MESSAGE(it != ops.end(), "no operator named ", name);
    return *it;
}

inline bool has(const std::vector<Operator>& ops, const std::string& name) {
    return std::any_of(ops.begin(), ops.end(), [&](const Operator& o) { return o.kernel.name == name; });
}

inline double flops(const Operator& o) { return o.kernel.flops.value; }
inline double rd(const Operator& o) { return o.kernel.bytes_read.as_double(); }
inline double wr(const Operator& o) { return o.kernel.bytes_written.as_double(); }

inline bool is_weight_gemm(const Operator& o) {
    return o.kernel.kind == KernelKind::gemm && o.kernel.name.rfind("attention", 0) != 0 &&
           o.kernel.name.find("attention_") == std::string::npos;
}

}  // namespace parasim_workload_tests
