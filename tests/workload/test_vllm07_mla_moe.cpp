// What vLLM 0.7 ran for DeepSeek-V3/R1 beyond the generic model (docs/moe.md
// section 7b), each against a hand computation: the MLA decode on matrices
// absorbed at load (W_Q_UK, W_QR, W_UV_O) with their memory, and the fused-MoE
// kernel's chunked buffers in the workspace of the engine's memory profile;
// and the profile keys that switch them on (topologies/software/vllm-0.7.yaml).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "sim/config/model_loader.h"
#include "sim/config/software_loader.h"
#include "sim/core/error.h"
#include "sim/workload/footprint.h"
#include "sim/workload/model.h"
#include "sim/workload/operators.h"
#include "tests/test_util.h"

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim::workload;

namespace {

ModelSpec shipped(const std::string& name) { return sim::config::load_model_file(sim::config::model_path(name)); }

const Operator& find(const std::vector<Operator>& ops, const std::string& name) {
    auto it = std::find_if(ops.begin(), ops.end(), [&](const Operator& o) { return o.kernel.name == name; });
    REQUIRE(it != ops.end());
    return *it;
}
bool has(const std::vector<Operator>& ops, const std::string& name) {
    return std::any_of(ops.begin(), ops.end(), [&](const Operator& o) { return o.kernel.name == name; });
}

// DeepSeek-V3 in FP8 (weights and GEMMs; BF16 activations and cache) under TP 8.
OperatorOptions fp8_tp8() {
    OperatorOptions o;
    o.precision.compute = sim::hw::DType::fp8;
    o.precision.weights = sim::hw::DType::fp8;
    o.tp = 8;
    o.inference = true;
    return o;
}

}  // namespace

TEST_CASE("vLLM 0.7's MLA decode: the q latent x W_Q_UK and W_QR, the latent output x W_UV_O") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o = fp8_tp8();
    o.mla_absorbed_weights = true;
    const std::int64_t b = 4, c = 1000;
    const auto ops = layer_forward(m, 0, 3, PassShape{b, 1, c}, o);  // layer 3: the first MoE layer
    // No run-time absorption and no raw q up projection.
    for (const char* name : {"q_up", "q_absorb", "o_absorb", "kv_up"}) CHECK_FALSE(has(ops, name));
    // W_Q_UK: [b, 1536] x [1536, 16 heads x 512], FP8, reading 1536 x 8192 bytes of weights.
    const Operator& quk = find(ops, "q_uk");
    CHECK(quk.kernel.dtype == sim::hw::DType::fp8);
    CHECK(quk.kernel.flops.value == doctest::Approx(2.0 * b * 1536 * 16 * 512));
    CHECK(quk.kernel.bytes_read.value == doctest::Approx(1536.0 * 8192 + 2.0 * b * 1536));
    // W_QR: [b, 1536] x [1536, 16 x 64] in BF16 (2 bytes a weight).
    const Operator& qr = find(ops, "q_rope");
    CHECK(qr.kernel.dtype == sim::hw::DType::bf16);
    CHECK(qr.kernel.flops.value == doctest::Approx(2.0 * b * 1536 * 16 * 64));
    CHECK(qr.kernel.bytes_read.value == doctest::Approx(2.0 * 1536 * 1024 + 2.0 * b * 1536));
    // W_UV_O: the output projection takes the 16 heads' 512-wide latent outputs.
    const Operator& out = find(ops, "out_proj");
    CHECK(out.kernel.k == 16 * 512);
    CHECK(out.kernel.n == 7168);
    CHECK(out.kernel.flops.value == doctest::Approx(2.0 * b * 8192 * 7168));
    // The core is the same latent attention as the per-head path's.
    o.mla_absorbed_weights = false;
    const auto plain = layer_forward(m, 0, 3, PassShape{b, 1, c}, o);
    CHECK(find(plain, "attention").kernel.flops.value == doctest::Approx(find(ops, "attention").kernel.flops.value));
    CHECK(find(plain, "out_proj").kernel.k == 16 * 128);
    // A prompt keeps the raw weights' path.
    o.mla_absorbed_weights = true;
    const auto prompt = layer_forward(m, 0, 3, PassShape{1, 512, 512}, o);
    CHECK(has(prompt, "kv_up"));
    CHECK(find(prompt, "out_proj").kernel.k == 16 * 128);
}

TEST_CASE("vLLM 0.7's absorbed MLA matrices: 74 448 896 bytes a layer a GPU for DeepSeek-V3 in FP8 at TP 8") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o = fp8_tp8();
    CHECK(mla_absorbed_weight_bytes(m, o).as_double() == 0);  // not the stack's path
    o.mla_absorbed_weights = true;
    // W_Q_UK 1536 x 16 x 512 + W_UV_O 16 x 512 x 7168, one byte each; W_QR
    // 1536 x 16 x 64, two bytes: 12 582 912 + 58 720 256 + 3 145 728.
    CHECK(mla_absorbed_weight_bytes(m, o).as_double() == 74'448'896.0);
    o.inference = false;  // training has no decode
    CHECK(mla_absorbed_weight_bytes(m, o).as_double() == 0);
    o.inference = true;
    CHECK(mla_absorbed_weight_bytes(shipped("qwen3-8b"), o).as_double() == 0);  // no MLA
}

TEST_CASE("vLLM's fused-MoE buffers in the workspace: a chunk of 32 768 of DeepSeek-V3's 163 840 prompt tokens") {
    const ModelSpec m = shipped("deepseek-v3");
    OperatorOptions o = fp8_tp8();
    const PassShape prompt{1, 163'840, 163'840};
    const double library = 32.0 * 1024 * 1024;
    // Without the kernel's buffers: 163 840 x 2 bytes x (2 x 7168 residual
    // streams + 16 x (2 x 192 + 128) queries, keys, values + 6912 MLP
    // inputs: the dense 3 x 18432 / 8 = the experts' 8 x 3 x 256 + 768).
    CHECK(workspace_bytes(m, prompt, o, false).as_double() == 163'840.0 * 2 * (14'336 + 8192 + 6912) + library);
    // With them: 32 768 tokens x 8 experts x (768 + 7168) x 2 bytes
    // = 4 160 749 568, and the shared expert's 768 inputs for every token.
    o.fused_moe_chunk_tokens = 32'768;
    const double chunk = 32'768.0 * 8 * (768 + 7168) * 2;
    CHECK(chunk == 4'160'749'568.0);
    CHECK(workspace_bytes(m, prompt, o, false).as_double() == 163'840.0 * 2 * (14'336 + 8192 + 768) + chunk + library);
    // A batch smaller than the chunk holds buffers for its own tokens.
    const PassShape small{1, 4096, 4096};
    CHECK(workspace_bytes(m, small, o, false).as_double() ==
          4096.0 * 2 * (14'336 + 8192 + 768) + 4096.0 * 8 * 7936 * 2 + library);
}

TEST_CASE("software profiles: vllm 0.7.x gets its release file with the MLA and fused-MoE keys") {
    const sim::config::SoftwareProfile p = sim::config::software_profile("vllm", "0.7.4.dev181", "");
    CHECK(p.version == "0.7");
    CHECK(p.mla_absorbed_weights);
    CHECK(p.fused_moe_chunk_tokens == 32'768);
    CHECK_FALSE(p.mla_decode_weights_from.text.empty());
    const sim::config::SoftwareProfile now = sim::config::software_profile("vllm", "0.23.0", "");
    CHECK_FALSE(now.mla_absorbed_weights);
    CHECK(now.fused_moe_chunk_tokens == 0);
    // A value outside the enum is an error at file:line:column.
    const std::string bad = "name: vllm\ndescription: \"t\"\nhost:\n  kernel_issue: {value: 3 us, source: \"s\"}\n"
                            "  launch_queue_depth: {value: 64, source: \"s\"}\n"
                            "kernel_efficiency: {value: 1.0, source: \"s\"}\nfuse_elementwise: {value: true, source: "
                            "\"s\"}\noverlaps: {value: [], source: \"s\"}\n"
                            "mla_decode_weights: {value: folded, source: \"s\"}\n";
    const std::string err = parasim_test::config_error_of(
        [](const std::string& t) {
            sim::config::load_software_profile(sim::config::load_string(t, "software/vllm.yaml"), "vllm");
        },
        bad);
    CHECK(err.find("software/vllm.yaml:9:") != std::string::npos);
    CHECK(err.find("absorbed") != std::string::npos);
}

TEST_SUITE_END();
