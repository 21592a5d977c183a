// Software profiles (topologies/software/*.yaml): every shipped stack has a
// profile that loads; malformed profiles are refused at file:line:column,
// and a value without its evidence (source: / fitted_on:) is an error.
#include "sim/config/scenario.h"
#include "sim/config/software_loader.h"
#include "sim/core/error.h"

#include "tests/test_util.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;
using namespace sim::config;
namespace fs = std::filesystem;

namespace {

const std::string kGood = R"(name: megatron-lm
description: "test"
host:
  kernel_issue: {value: 7 us, source: "a profile"}
  launch_queue_depth: {value: 64, source: "a test"}
kernel_efficiency: {value: 0.9, fitted_on: "points a, b"}
fuse_elementwise: {value: false, source: "code"}
overlaps: {value: [grad_reduce, tp_comm], source: "docs"}
)";

constexpr auto replace = &parasim_test::replace_once;

std::string error_of(const std::string& text) {
    return parasim_test::config_error_of(
        [](const std::string& t) { load_software_profile(load_string(t, "software/megatron-lm.yaml"), "megatron-lm"); },
        text);
}

}  // namespace

TEST_CASE("software profiles: a complete file is read with its evidence") {
    const SoftwareProfile p = load_software_profile(load_string(kGood, "software/megatron-lm.yaml"), "megatron-lm");
    CHECK(p.kernel_issue == Time::from_seconds_ceil(7e-6));
    CHECK(p.kernel_issue_from.kind == "source");
    CHECK(p.launch_queue_depth == 64);
    CHECK(p.kernel_efficiency == doctest::Approx(0.9));
    CHECK(p.kernel_efficiency_from.kind == "fitted_on");
    CHECK(p.kernel_efficiency_from.text == "points a, b");
    CHECK_FALSE(p.fuse_elementwise);
    CHECK(p.overlaps == std::vector<std::string>{"grad_reduce", "tp_comm"});
}

TEST_CASE("software profiles: every stack of kSoftwareNames and the default ship a profile that loads") {
    for (const auto& name : kSoftwareNames) CHECK_NOTHROW(software_profile(name));
    const SoftwareProfile d = software_profile("");
    CHECK(d.name == kDefaultSoftware);
    // The default models no host cost: a run that names no stack behaves as before profiles.
    CHECK(d.kernel_issue == Time{});
    CHECK(d.kernel_efficiency == 1.0);
    // One general file per stack, plus the default, plus release files <stack>-<version>.yaml.
    std::size_t general = 0;
    for (const auto& n : software_profile_names()) {
        const SoftwareProfile p = software_profile(n);
        CHECK(n == (p.version.empty() ? p.name : p.name + "-" + p.version));
        if (p.version.empty()) ++general;
    }
    CHECK(general == kSoftwareNames.size() + 1);
    // FP8 dispatch is opt-in: only DeepSeek's stack states it (docs/moe.md section 3b).
    CHECK_FALSE(d.moe_fp8_dispatch);
    CHECK_FALSE(software_profile("megatron-core").moe_fp8_dispatch);
    const SoftwareProfile hai = software_profile("hai-llm");
    CHECK(hai.moe_fp8_dispatch);
    CHECK(hai.moe_fp8_dispatch_from.kind == "source");
    // The EP exchange: any all-to-all (DeepEP's included) unless the stack
    // states Megatron-Core's alltoall dispatcher (docs/moe.md section 3a).
    CHECK(d.moe_dispatcher == "auto");
    CHECK(hai.moe_dispatcher == "auto");
    for (const char* stack : {"nemo", "megatron-bridge"}) {
        const SoftwareProfile p = software_profile(stack);
        CHECK(p.moe_dispatcher == "alltoall");
        CHECK(p.moe_dispatcher_from.kind == "source");
    }
}

TEST_CASE("software profiles: a release's file is found by the longest prefix of its version") {
    const fs::path dir = fs::temp_directory_path() / "parasim-test-software-versions";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const auto write = [&](const std::string& file, const std::string& version, double issue) {
        std::string text = replace(kGood, "name: megatron-lm", "name: tensorrt-llm" + version);
        text += "decode_attention_issue: {value: " + std::to_string(issue) + ", source: \"a test\"}\n";
        std::ofstream(dir / file) << text;
    };
    write("tensorrt-llm.yaml", "", 0);
    write("tensorrt-llm-0.6.yaml", "\nversion: \"0.6\"", 8);
    const auto issue = [&](const std::string& v) {
        return software_profile("tensorrt-llm", v, dir.string()).decode_attention_issue;
    };
    CHECK(issue("0.6.1") == 8);
    CHECK(issue("v0.6.1") == 8);
    CHECK(issue("0.6") == 8);
    CHECK(issue("0.6a") == 8);  // a pre-release of 0.6
    CHECK(issue("0.61") == 0);  // not a 0.6 release
    CHECK(issue("0.7.0") == 0);
    CHECK(issue("") == 0);
    CHECK(issue("../tensorrt-llm-0.6") == 0);  // not a file name: the general profile
    CHECK(software_profile("tensorrt-llm", "0.6.1", dir.string()).version == "0.6");
    fs::remove_all(dir);
}

TEST_CASE("software profiles: the shipped TensorRT-LLM 0.6 file times generation attention per query head") {
    const SoftwareProfile old = software_profile("tensorrt-llm", "0.6.1", "");
    CHECK(old.version == "0.6");
    CHECK(old.decode_attention_issue > 0);
    CHECK(old.decode_attention_issue_from.kind == "fitted_on");
    CHECK(software_profile("tensorrt-llm", "1.0", "").decode_attention_issue == 0);
    CHECK(software_profile("tensorrt-llm").decode_attention_issue == 0);
}

TEST_CASE("software profiles: the shipped TensorRT-LLM 0.5 file is 0.6's generation kernel, value for value") {
    // v0.5 ran the same per-query-head generation kernel as 0.6, and its file
    // carries 0.6's fitted value: the two must not drift apart on a refit.
    const SoftwareProfile v05 = software_profile("tensorrt-llm", "0.5.0", "");
    const SoftwareProfile v06 = software_profile("tensorrt-llm", "0.6.1", "");
    CHECK(v05.version == "0.5");
    CHECK(v05.decode_attention_issue == v06.decode_attention_issue);
    CHECK(v05.decode_attention_issue_from.kind == "fitted_on");
    CHECK(v05.kernel_issue == v06.kernel_issue);
    CHECK(v05.launch_queue_depth == v06.launch_queue_depth);
    CHECK(v05.kernel_efficiency == v06.kernel_efficiency);
    CHECK(v05.fuse_elementwise == v06.fuse_elementwise);
}

TEST_CASE("software profiles: malformed files are errors at file:line:column naming the field") {
    CHECK(
        error_of(replace(kGood, "source: \"a profile\"", "note: x")) ==
        "software/megatron-lm.yaml:4:31: unknown key 'host.kernel_issue.note' (valid keys: fitted_on, source, value)");
    CHECK(error_of(replace(kGood, ", source: \"a profile\"", "")) ==
          "software/megatron-lm.yaml:4:17: host.kernel_issue: a value needs its evidence: source: or fitted_on:");
    CHECK(error_of(replace(kGood, "fitted_on: \"points a, b\"", "fitted_on: x, source: y")) ==
          "software/megatron-lm.yaml:6:44: kernel_efficiency.fitted_on: give either source or fitted_on, not both");
    CHECK(error_of(replace(kGood, "7 us", "7")).find("software/megatron-lm.yaml:4:25: host.kernel_issue.value:") == 0);
    CHECK(
        error_of(replace(kGood, "7 us", "20 ms")) ==
        "software/megatron-lm.yaml:4:25: host.kernel_issue.value: a per-kernel host cost above 10 ms is not plausible");
    CHECK(error_of(replace(kGood, "value: 0.9", "value: 0.01")) ==
          "software/megatron-lm.yaml:6:28: kernel_efficiency.value: a kernel efficiency below 0.1 is not plausible");
    CHECK(error_of(replace(kGood, "tp_comm]", "tp_com]")).find("did you mean 'tp_comm'") != std::string::npos);
    CHECK(error_of(replace(kGood, "name: megatron-lm", "name: nemo")) ==
          "software/megatron-lm.yaml:1:7: name: name 'nemo' differs from the file name 'megatron-lm'");
    CHECK(
        error_of(replace(kGood, "kernel_efficiency:", "kernel_eficiency:")).find("did you mean 'kernel_efficiency'") !=
        std::string::npos);
    CHECK(error_of(replace(kGood, "description:", "version: \"0.6\"\ndescription:")) ==
          "software/megatron-lm.yaml:1:7: name: name 'megatron-lm-0.6' differs from the file name 'megatron-lm'");
    CHECK(error_of(replace(kGood, "description:", "version: \"../x\"\ndescription:")) ==
          "software/megatron-lm.yaml:2:10: version: a version is letters, digits, '.', '-' or '_'");
    CHECK(error_of(kGood + "decode_attention_issue: {value: 5000, source: x}\n")
              .find("software/megatron-lm.yaml:9:33:") == 0);
    CHECK(error_of(kGood + "moe_dispatcher: {value: deepep, source: x}\n").find("software/megatron-lm.yaml:9:25:") ==
          0);
    CHECK(error_of(kGood + "decode_attention_issue: {value: 8}\n") ==
          "software/megatron-lm.yaml:9:25: decode_attention_issue: a value needs its evidence: source: or fitted_on:");
}

TEST_CASE("software profiles: the optional serving block is read with its evidence and bounded") {
    const std::string serving =
        "serving:\n"
        "  sequence_overhead: {value: 40 us, fitted_on: \"points\"}\n"
        "  token_overhead: {value: 0.1 ms, source: \"a profile\"}\n";
    const SoftwareProfile p =
        load_software_profile(load_string(kGood + serving, "software/megatron-lm.yaml"), "megatron-lm");
    CHECK(p.serving_sequence_overhead == Time::us(40));
    CHECK(p.serving_sequence_overhead_from.kind == "fitted_on");
    CHECK(p.serving_token_overhead == Time::us(100));
    CHECK(p.serving_request_overhead == Time{});  // absent: no cost
    const SoftwareProfile none = load_software_profile(load_string(kGood, "software/megatron-lm.yaml"), "megatron-lm");
    CHECK(none.serving_sequence_overhead == Time{});
    CHECK(error_of(kGood + "serving:\n  request_overhead: {value: 2 s, source: x}\n") ==
          "software/megatron-lm.yaml:10:29: serving.request_overhead.value: a serving host time above 1 s is not "
          "plausible");
    CHECK(error_of(kGood + "serving:\n  request_overhead: {value: 2 ms}\n") ==
          "software/megatron-lm.yaml:10:21: serving.request_overhead: a value needs its evidence: source: or "
          "fitted_on:");
    CHECK(error_of(kGood + "serving:\n  token_overheads: {value: 2 ms, source: x}\n").find("did you mean") !=
          std::string::npos);
}

TEST_CASE("software profiles: an unknown stack names the known profiles") {
    CHECK_THROWS_WITH_AS(
        software_profile("no-such-stack"),
        doctest::Contains("no software profile 'no-such-stack' (known: deepspeed, default, flash-attention"),
        ConfigError);
}

TEST_CASE("software profiles: the gradient reduce's dtype and FSDP's sync per micro-batch") {
    // Left out: the weights' dtype (2 bytes for 16-bit weights, 4 for FP32) and the last micro-batch only.
    const SoftwareProfile plain = load_software_profile(load_string(kGood, "software/megatron-lm.yaml"), "megatron-lm");
    CHECK(plain.grad_reduce_dtype == "weights");
    CHECK_FALSE(plain.grad_sync_every_microbatch);
    CHECK(gradient_reduce_bytes(plain, 2, true) == 2);
    CHECK(gradient_reduce_bytes(plain, 1, false) == 2);  // FP8 weights still reduce 16-bit gradients
    CHECK(gradient_reduce_bytes(plain, 4, false) == 4);
    const SoftwareProfile p =
        load_software_profile(load_string(kGood + "grad_reduce_dtype: {value: fp32_if_bf16, source: \"arguments.py\"}\n"
                                                  "grad_sync: {value: every_microbatch, source: \"trainer.py\"}\n",
                                          "software/megatron-lm.yaml"),
                              "megatron-lm");
    CHECK(p.grad_reduce_dtype == "fp32_if_bf16");
    CHECK(p.grad_reduce_dtype_from.text == "arguments.py");
    CHECK(p.grad_sync_every_microbatch);
    CHECK(gradient_reduce_bytes(p, 2, true) == 4);   // BF16 weights: FP32 gradients
    CHECK(gradient_reduce_bytes(p, 2, false) == 2);  // FP16 weights keep FP16 gradients
    SoftwareProfile always = p;
    always.grad_reduce_dtype = "fp32";
    CHECK(gradient_reduce_bytes(always, 2, false) == 4);
    CHECK(
        error_of(kGood + "grad_sync: {value: sometimes, source: \"x\"}\n") ==
        "software/megatron-lm.yaml:9:20: grad_sync.value: 'sometimes' is not one of last_microbatch, every_microbatch");
    CHECK(error_of(kGood + "grad_reduce_dtype: {value: fp64, source: \"x\"}\n") ==
          "software/megatron-lm.yaml:9:28: grad_reduce_dtype.value: 'fp64' is not one of weights, fp32, fp32_if_bf16 "
          "(did you mean 'fp32'?)");
    // The shipped stacks: Composer's FSDP sync (Megatron's FP32 rule is not set yet: docs/validation.md §7).
    CHECK(software_profile("llm-foundry").grad_sync_every_microbatch);
    CHECK_FALSE(software_profile("megatron-core").grad_sync_every_microbatch);
    CHECK(software_profile("").grad_reduce_dtype == "weights");
}

TEST_CASE("software profiles: passes over the unsharded gradient (grad_shard_passes)") {
    const SoftwareProfile plain = load_software_profile(load_string(kGood, "software/megatron-lm.yaml"), "megatron-lm");
    CHECK(plain.grad_shard_passes == 0);  // left out: none
    const SoftwareProfile p = load_software_profile(
        load_string(kGood + "grad_shard_passes: {value: 2, source: \"fsdp\"}\n", "software/megatron-lm.yaml"),
        "megatron-lm");
    CHECK(p.grad_shard_passes == 2);
    CHECK(p.grad_shard_passes_from.text == "fsdp");
    CHECK(error_of(kGood + "grad_shard_passes: {value: 9, source: \"x\"}\n").find("grad_shard_passes.value") !=
          std::string::npos);
    CHECK(software_profile("llm-foundry").grad_shard_passes == 2);
    CHECK(software_profile("megatron-core").grad_shard_passes == 0);
}

TEST_CASE("software profiles: the optimizer's bytes per parameter (optimizer_bytes_per_param)") {
    const SoftwareProfile plain = load_software_profile(load_string(kGood, "software/megatron-lm.yaml"), "megatron-lm");
    CHECK(plain.optimizer_bytes_per_param == 0.0);  // left out: the fused kernel
    const SoftwareProfile p =
        load_software_profile(load_string(kGood + "optimizer_bytes_per_param: {value: 100, source: \"adamw\"}\n",
                                          "software/megatron-lm.yaml"),
                              "megatron-lm");
    CHECK(p.optimizer_bytes_per_param == 100.0);
    CHECK(p.optimizer_bytes_per_param_from.text == "adamw");
    CHECK(error_of(kGood + "optimizer_bytes_per_param: {value: 2000, source: \"x\"}\n")
              .find("optimizer_bytes_per_param.value") != std::string::npos);
    CHECK(error_of(kGood + "optimizer_bytes_per_param: {value: 100}\n").find("optimizer_bytes_per_param") !=
          std::string::npos);  // no evidence, no value
    // Composer's DecoupledAdamW and FSDP's clipping (docs/software-profiles.md §2c); Megatron's fused Adam.
    CHECK(software_profile("llm-foundry").optimizer_bytes_per_param == 100.0);
    CHECK(software_profile("megatron-core").optimizer_bytes_per_param == 0.0);
}

TEST_CASE("software profiles: the training loss's cross-entropy (cross_entropy)") {
    const SoftwareProfile plain = load_software_profile(load_string(kGood, "software/megatron-lm.yaml"), "megatron-lm");
    CHECK_FALSE(plain.cross_entropy_fp32_unfused);  // left out: one fused pass each way
    const SoftwareProfile p = load_software_profile(
        load_string(kGood + "cross_entropy: {value: fp32_unfused, source: \"ce\"}\n", "software/megatron-lm.yaml"),
        "megatron-lm");
    CHECK(p.cross_entropy_fp32_unfused);
    CHECK(p.cross_entropy_from.text == "ce");
    CHECK(error_of(kGood + "cross_entropy: {value: fp32, source: \"x\"}\n").find("cross_entropy.value") !=
          std::string::npos);
    CHECK(error_of(kGood + "cross_entropy: {value: fused}\n").find("cross_entropy") != std::string::npos);
    // Megatron's vocab_parallel_cross_entropy on logits.float() without --cross-entropy-loss-fusion.
    CHECK(software_profile("megatron-core").cross_entropy_fp32_unfused);
    CHECK(software_profile("megatron-lm").cross_entropy_fp32_unfused);
    CHECK_FALSE(software_profile("llm-foundry").cross_entropy_fp32_unfused);
}

TEST_CASE("software profiles: the shipped vLLM 0.7 file keeps vllm.yaml's host, kernel and serving values") {
    // vllm-0.7.yaml is vllm.yaml plus the MLA and MoE keys of that release
    // (docs/moe.md section 7b); its other values are vllm.yaml's, not
    // refitted, and must not drift apart on a refit of either file.
    const SoftwareProfile v07 = software_profile("vllm", "0.7.4", "");
    const SoftwareProfile general = software_profile("vllm");
    CHECK(v07.version == "0.7");
    CHECK(v07.kernel_issue == general.kernel_issue);
    CHECK(v07.launch_queue_depth == general.launch_queue_depth);
    CHECK(v07.kernel_efficiency == general.kernel_efficiency);
    CHECK(v07.fuse_elementwise == general.fuse_elementwise);
    CHECK(v07.overlaps == general.overlaps);
    CHECK(v07.serving_sequence_overhead == general.serving_sequence_overhead);
    CHECK(v07.serving_request_overhead == general.serving_request_overhead);
    CHECK(v07.serving_token_overhead == general.serving_token_overhead);
    CHECK(v07.serving_request_latency == general.serving_request_latency);
}

TEST_CASE(
    "software profiles: vllm 0.7.x gets its release file with the MLA, fused-MoE, quantization and routing keys") {
    const SoftwareProfile p = software_profile("vllm", "0.7.4.dev181", "");
    CHECK(p.version == "0.7");
    CHECK(p.mla_absorbed_weights);
    CHECK(p.fused_moe_chunk_tokens == 32'768);
    CHECK(p.fp8_gemm_ceiling == 0.18);
    CHECK_FALSE(p.mla_decode_weights_from.text.empty());
    const SoftwareProfile now = software_profile("vllm", "0.23.0", "");
    CHECK_FALSE(now.mla_absorbed_weights);
    CHECK(now.fused_moe_chunk_tokens == 0);
    CHECK(now.fp8_gemm_ceiling == 0);
    // A value outside the enum is an error at file:line:column.
    const std::string bad =
        "name: vllm\ndescription: \"t\"\nhost:\n  kernel_issue: {value: 3 us, source: \"s\"}\n"
        "  launch_queue_depth: {value: 64, source: \"s\"}\n"
        "kernel_efficiency: {value: 1.0, source: \"s\"}\nfuse_elementwise: {value: true, source: "
        "\"s\"}\noverlaps: {value: [], source: \"s\"}\n"
        "mla_decode_weights: {value: folded, source: \"s\"}\n";
    // The load error of `bad` with its last line's key and value replaced by `field`.
    const auto error_with = [&bad](const std::string& field) {
        const std::string last = "mla_decode_weights: {value: folded";
        std::string text = bad;
        text.replace(text.find(last), last.size(), field);
        return parasim_test::config_error_of(
            [](const std::string& t) { load_software_profile(load_string(t, "software/vllm.yaml"), "vllm"); }, text);
    };
    const std::string err = error_with("mla_decode_weights: {value: folded");
    CHECK(err.find("software/vllm.yaml:9:") != std::string::npos);
    CHECK(err.find("absorbed") != std::string::npos);
    // An FP8 GEMM ceiling outside (0.01, 1] is a unit slip.
    const std::string low_err = error_with("fp8_gemm_ceiling: {value: 0.001");
    CHECK(low_err.find("software/vllm.yaml:9:") != std::string::npos);
    CHECK(low_err.find("not plausible") != std::string::npos);
    // The input quantization and routing kernels (docs/moe.md section 7b).
    CHECK(p.fp8_input_quant_group == 128);
    CHECK(p.grouped_topk_kernels == 10);
    CHECK_FALSE(p.grouped_topk_kernels_from.text.empty());
    CHECK(now.fp8_input_quant_group == 0);
    CHECK(now.grouped_topk_kernels == 1);
    // No routing without a kernel: 0 is out of range, at file:line:column.
    const std::string zero_err = error_with("grouped_topk_kernels: {value: 0");
    CHECK(zero_err.find("software/vllm.yaml:9:") != std::string::npos);
    // The MLA cache entries padded to 256 bytes (until PR #14842), not today.
    CHECK(p.mla_kv_cache_align_bytes == 256);
    CHECK_FALSE(p.mla_kv_cache_align_bytes_from.text.empty());
    CHECK(now.mla_kv_cache_align_bytes == 0);
    // An alignment that is not a power of two is a slip, at file:line:column.
    const std::string align_err = error_with("mla_kv_cache_align_bytes: {value: 250");
    CHECK(align_err.find("software/vllm.yaml:9:") != std::string::npos);
    CHECK(align_err.find("power of two") != std::string::npos);
}

TEST_SUITE_END();
