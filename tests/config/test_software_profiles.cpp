// Software profiles (topologies/software/*.yaml): every shipped stack has a
// profile that loads; malformed profiles are refused at file:line:column,
// and a value without its evidence (source: / fitted_on:) is an error. A
// profile that `extends:` another starts from its base's values and evidence
// and replaces only the keys it states; a base is a profile of the same
// folder, and cycles, unknown bases, paths and over-long chains are one
// ConfigError at the `extends:` of the file that names the bad base.
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

// kGood as the general vllm profile, with a serving block: the base of the
// `extends:` tests (docs/software-profiles.md §2a).
// kGood with `extra` keys after it, loaded as megatron-lm's file.
SoftwareProfile good_with(const std::string& extra = "") {
    return load_software_profile(load_string(kGood + extra, "software/megatron-lm.yaml"), "megatron-lm");
}

std::string base_profile() {
    return replace(kGood, "name: megatron-lm", "name: vllm") +
           "serving:\n"
           "  sequence_overhead: {value: 40 us, fitted_on: \"base serving\"}\n"
           "  request_overhead: {value: 10 ms, source: \"base intake\"}\n";
}

// A release file with only a name, a version, its base and a description.
std::string release(const std::string& version, const std::string& base) {
    return "name: vllm\nversion: \"" + version + "\"\nextends: " + base + "\ndescription: \"release " + version +
           "\"\n";
}

// A fresh folder of profiles for one test case.
struct Folder {
    fs::path dir;
    explicit Folder(const std::string& name) : dir(parasim_test::private_temp(name)) {
        fs::remove_all(dir);
        fs::create_directories(dir);
    }
    ~Folder() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    Folder(const Folder&) = delete;
    Folder& operator=(const Folder&) = delete;
    void write(const std::string& stem, const std::string& text) const {
        std::ofstream(dir / (stem + ".yaml")) << text;
    }
    std::string file(const std::string& stem) const { return (dir / (stem + ".yaml")).string(); }
    std::string error_of(const std::string& stem) const {
        return parasim_test::config_error_of([this](const std::string& s) { software_profile(s, dir.string()); }, stem);
    }
};

}  // namespace

TEST_CASE("software profiles: a complete file is read with its evidence") {
    const SoftwareProfile p = good_with();
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
    const fs::path dir = parasim_test::private_temp("test-software-versions");
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

TEST_CASE("software profiles: the shipped TensorRT-LLM 0.5 and 0.6 files time generation attention per query head") {
    const SoftwareProfile old = software_profile("tensorrt-llm", "0.6.1", "");
    CHECK(old.version == "0.6");
    CHECK(old.decode_attention_issue > 0);
    CHECK(old.decode_attention_issue_from.kind == "fitted_on");
    // 0.5 ran the same generation kernel: its file extends 0.6's.
    const SoftwareProfile v05 = software_profile("tensorrt-llm", "0.5.0", "");
    CHECK(v05.version == "0.5");
    CHECK(v05.decode_attention_issue > 0);
    CHECK(software_profile("tensorrt-llm", "1.0", "").decode_attention_issue == 0);
    CHECK(software_profile("tensorrt-llm").decode_attention_issue == 0);
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
    const SoftwareProfile p = good_with(serving);
    CHECK(p.serving_sequence_overhead == Time::us(40));
    CHECK(p.serving_sequence_overhead_from.kind == "fitted_on");
    CHECK(p.serving_token_overhead == Time::us(100));
    CHECK(p.serving_request_overhead == Time{});  // absent: no cost
    const SoftwareProfile none = good_with();
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
    const SoftwareProfile plain = good_with();
    CHECK(plain.grad_reduce_dtype == "weights");
    CHECK_FALSE(plain.grad_sync_every_microbatch);
    CHECK(gradient_reduce_bytes(plain, 2, true) == 2);
    CHECK(gradient_reduce_bytes(plain, 1, false) == 2);  // FP8 weights still reduce 16-bit gradients
    CHECK(gradient_reduce_bytes(plain, 4, false) == 4);
    const SoftwareProfile p = good_with(
        "grad_reduce_dtype: {value: fp32_if_bf16, source: \"arguments.py\"}\n"
        "grad_sync: {value: every_microbatch, source: \"trainer.py\"}\n");
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
    // The shipped stacks: Composer's FSDP sync; Megatron's FP32 rule for BF16 (docs/validation.md §7).
    CHECK(software_profile("llm-foundry").grad_sync_every_microbatch);
    CHECK_FALSE(software_profile("megatron-core").grad_sync_every_microbatch);
    CHECK(software_profile("").grad_reduce_dtype == "weights");
    CHECK(software_profile("megatron-core").grad_reduce_dtype == "fp32_if_bf16");
    CHECK(software_profile("megatron-lm").grad_reduce_dtype == "fp32_if_bf16");
    // llm-foundry's benchmark runs got Composer's DEFAULT mixed precision: an FP32 reduce.
    CHECK(software_profile("llm-foundry").grad_reduce_dtype == "fp32");
}

TEST_CASE("software profiles: a bucket's passes before its reduce (grad_prereduce), delay_grad_reduce") {
    const SoftwareProfile plain = good_with();
    CHECK_FALSE(plain.grad_prereduce_nan_check);  // left out: none
    CHECK_FALSE(plain.grad_prereduce_scale);
    CHECK_FALSE(plain.delay_grad_reduce);
    const SoftwareProfile p = good_with(
        "grad_prereduce: {value: [scale], source: \"ddp\"}\n"
        "delay_grad_reduce: {value: true, source: \"pp\"}\n");
    CHECK_FALSE(p.grad_prereduce_nan_check);
    CHECK(p.grad_prereduce_scale);
    CHECK(p.grad_prereduce_from.text == "ddp");
    CHECK(p.delay_grad_reduce);
    CHECK(error_of(kGood + "grad_prereduce: {value: [scale, scale], source: \"x\"}\n").find("listed twice") !=
          std::string::npos);
    CHECK(error_of(kGood + "grad_prereduce: {value: [nan-check], source: \"x\"}\n").find("did you mean") !=
          std::string::npos);
    // Megatron-Core r0.8 (and 0.9, which extends it): the NaN-check norm and the 1/dp scale, delayed later ranks.
    for (const char* name : {"megatron-core", "megatron-core-0.9"}) {
        CHECK(software_profile(name).grad_prereduce_nan_check);
        CHECK(software_profile(name).grad_prereduce_scale);
        CHECK(software_profile(name).delay_grad_reduce);
    }
    CHECK_FALSE(software_profile("megatron-lm").grad_prereduce_scale);
}

TEST_CASE("software profiles: passes over the unsharded gradient (grad_shard_passes)") {
    const SoftwareProfile plain = good_with();
    CHECK(plain.grad_shard_passes == 0);  // left out: none
    const SoftwareProfile p = good_with("grad_shard_passes: {value: 2, source: \"fsdp\"}\n");
    CHECK(p.grad_shard_passes == 2);
    CHECK(p.grad_shard_passes_from.text == "fsdp");
    CHECK(error_of(kGood + "grad_shard_passes: {value: 9, source: \"x\"}\n").find("grad_shard_passes.value") !=
          std::string::npos);
    CHECK(software_profile("llm-foundry").grad_shard_passes == 2);
    CHECK(software_profile("megatron-core").grad_shard_passes == 0);
}

TEST_CASE("software profiles: the optimizer's bytes per parameter (optimizer_bytes_per_param)") {
    const SoftwareProfile plain = good_with();
    CHECK(plain.optimizer_bytes_per_param == 0.0);  // left out: the fused kernel
    const SoftwareProfile p = good_with("optimizer_bytes_per_param: {value: 100, source: \"adamw\"}\n");
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

TEST_CASE("software profiles: a static batch's prefill sub-batch bound (prefill_max_tokens)") {
    const SoftwareProfile plain = good_with();
    CHECK(plain.prefill_max_tokens == 0);  // left out: one pass
    const SoftwareProfile p = good_with("prefill_max_tokens: {value: 4104, source: \"config\"}\n");
    CHECK(p.prefill_max_tokens == 4104);
    CHECK(p.prefill_max_tokens_from.text == "config");
    CHECK(error_of(kGood + "prefill_max_tokens: {value: -1, source: \"x\"}\n").find("prefill_max_tokens.value") !=
          std::string::npos);
    CHECK(error_of(kGood + "prefill_max_tokens: {value: 100}\n").find("prefill_max_tokens") != std::string::npos);
    // TurboMind's max_context_token_num of lmdeploy's A100 benchmark: 4 x session_len 4104 (§2f).
    CHECK(software_profile("lmdeploy").prefill_max_tokens == 16416);
    CHECK(software_profile("tensorrt-llm").prefill_max_tokens == 0);
}

TEST_CASE("software profiles: a decode step's engine work beside the model's kernels (decode_step)") {
    const SoftwareProfile plain = good_with();
    CHECK(plain.decode_step_kernels == 0);  // left out: none of it
    CHECK(plain.decode_step_host_syncs == 0);
    CHECK(plain.decode_step_copy_bytes == 0);
    const SoftwareProfile p = good_with(
        "decode_step:\n  kernels: {value: 4, source: \"k\"}\n  host_syncs: {value: 2, source: \"s\"}\n"
        "  sync_latency: {value: 2 us, source: \"l\"}\n  copy_per_sequence: {value: 16416 B, source: \"c\"}\n");
    CHECK(p.decode_step_kernels == 4);
    CHECK(p.decode_step_host_syncs == 2);
    CHECK(p.decode_step_sync_latency == Time::us(2));
    CHECK(p.decode_step_copy_bytes == 16416);
    CHECK(p.decode_step_copy_bytes_from.text == "c");
    CHECK(error_of(kGood + "decode_step:\n  kernel: {value: 4, source: \"x\"}\n").find("did you mean 'kernels'") !=
          std::string::npos);
    CHECK(error_of(kGood + "decode_step:\n  sync_latency: {value: 2 ms, source: \"x\"}\n").find("above 1 ms") !=
          std::string::npos);
    CHECK(error_of(kGood + "decode_step:\n  host_syncs: {value: 2}\n").find("host_syncs") != std::string::npos);
    // TurboMind v0.1.0a1 (§2g): sampling tail, stop criterion and gather; two waits; session_len x 4 bytes.
    const SoftwareProfile lm = software_profile("lmdeploy");
    CHECK(lm.decode_step_kernels == 4);
    CHECK(lm.decode_step_host_syncs == 2);
    CHECK(lm.decode_step_copy_bytes == 16416);
    CHECK(software_profile("vllm").decode_step_host_syncs == 0);
}

TEST_CASE("software profiles: the MoE router's kernels each way (moe_router_kernels, moe_router_bwd_kernels)") {
    const SoftwareProfile plain = good_with();
    CHECK(plain.moe_router_kernels == 1);  // left out: one routing kernel each way
    CHECK(plain.moe_router_bwd_kernels == 1);
    const SoftwareProfile p = good_with(
        "moe_router_kernels: {value: 56, source: \"router\"}\n"
        "moe_router_bwd_kernels: {value: 28, source: \"autograd\"}\n");
    CHECK(p.moe_router_kernels == 56);
    CHECK(p.moe_router_kernels_from.text == "router");
    CHECK(p.moe_router_bwd_kernels == 28);
    CHECK(p.moe_router_bwd_kernels_from.text == "autograd");
    CHECK(error_of(kGood + "moe_router_kernels: {value: 0, source: \"x\"}\n").find("moe_router_kernels.value") !=
          std::string::npos);
    CHECK(error_of(kGood + "moe_router_bwd_kernels: {value: 300, source: \"x\"}\n")
              .find("moe_router_bwd_kernels.value") != std::string::npos);
    CHECK(error_of(kGood + "moe_router_kernels: {value: 5}\n").find("moe_router_kernels") != std::string::npos);
    // NeMo 25.04's Megatron-Core router for DeepSeek-V3, counted in its code (docs/moe.md section 3i).
    CHECK(software_profile("nemo").moe_router_kernels == 54);  // gating's two FP32 casts: router_dtype
    CHECK(software_profile("nemo").moe_router_bwd_kernels == 26);
    CHECK(software_profile("megatron-bridge").moe_router_kernels == 1);
}

TEST_CASE("software profiles: Megatron-Core 0.9's unfused permutation (moe_permute) and its release file") {
    CHECK_FALSE(good_with().moe_permute_unfused);  // left out: fused
    const SoftwareProfile p = good_with("moe_permute: {value: unfused, source: \"moe_utils.py\"}\n");
    CHECK(p.moe_permute_unfused);
    CHECK(p.moe_permute_from.text == "moe_utils.py");
    CHECK_FALSE(good_with("moe_permute: {value: fused, source: \"x\"}\n").moe_permute_unfused);
    CHECK(error_of(kGood + "moe_permute: {value: pytorch, source: \"x\"}\n").find("moe_permute.value") !=
          std::string::npos);
    // Megatron-Core 0.9 (the unseen Mixtral point) gets its release file; the
    // r0.8.0 dense runs keep megatron-core.yaml, whose fitted efficiency 0.9 inherits.
    const SoftwareProfile v09 = software_profile("megatron-core", "0.9", "");
    const SoftwareProfile base = software_profile("megatron-core", "r0.8.0", "");
    CHECK(v09.version == "0.9");
    CHECK(v09.moe_permute_unfused);
    CHECK(v09.moe_dispatcher == "alltoall");
    CHECK(v09.moe_router_kernels == 26);
    CHECK(v09.moe_router_bwd_kernels == 13);
    CHECK(v09.kernel_efficiency == base.kernel_efficiency);
    CHECK(v09.kernel_efficiency_from.text == base.kernel_efficiency_from.text);
    CHECK_FALSE(base.moe_permute_unfused);
    CHECK(base.moe_dispatcher == "auto");
}

TEST_CASE("software profiles: MLA's rotary embedding, fused or unfused (mla_rope)") {
    CHECK_FALSE(good_with().mla_rope_unfused);  // left out: in the up projections' epilogues
    const SoftwareProfile p = good_with("mla_rope: {value: unfused, source: \"rope\"}\n");
    CHECK(p.mla_rope_unfused);
    CHECK(p.mla_rope_from.text == "rope");
    CHECK_FALSE(good_with("mla_rope: {value: fused, source: \"rope\"}\n").mla_rope_unfused);
    CHECK(error_of(kGood + "mla_rope: {value: split, source: \"x\"}\n").find("mla_rope") != std::string::npos);
    CHECK(error_of(kGood + "mla_rope: {value: unfused}\n").find("mla_rope") != std::string::npos);
    // NeMo 25.04's DeepSeek-V3: YaRN RoPE without apply_rope_fusion (docs/moe.md section 3j).
    CHECK(software_profile("nemo").mla_rope_unfused);
    CHECK_FALSE(software_profile("megatron-bridge").mla_rope_unfused);
}

TEST_CASE("software profiles: the training loss's cross-entropy (cross_entropy)") {
    const SoftwareProfile plain = good_with();
    CHECK_FALSE(plain.cross_entropy_fp32_unfused);  // left out: one fused pass each way
    const SoftwareProfile p = good_with("cross_entropy: {value: fp32_unfused, source: \"ce\"}\n");
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

TEST_CASE("software profiles: the userbuffers method after a row-parallel forward GEMM (tp_comm_row_fprop)") {
    const SoftwareProfile plain = good_with();
    CHECK_FALSE(plain.tp_comm_row_fprop_pipeline);  // left out: the ring exchange of tp token chunks
    CHECK(plain.tp_comm_pipeline_splits == 4);
    CHECK(plain.tp_comm_pipeline_sms == 16);
    const SoftwareProfile p = good_with(
        "tp_comm_row_fprop: {value: pipeline, source: \"te\"}\n"
        "tp_comm_pipeline_splits: {value: 8, source: \"s\"}\n"
        "tp_comm_pipeline_sms: {value: 32, source: \"m\"}\n");
    CHECK(p.tp_comm_row_fprop_pipeline);
    CHECK(p.tp_comm_row_fprop_from.text == "te");
    CHECK(p.tp_comm_pipeline_splits == 8);
    CHECK(p.tp_comm_pipeline_sms == 32);
    CHECK(error_of(kGood + "tp_comm_row_fprop: {value: bulk, source: \"x\"}\n").find("tp_comm_row_fprop.value") !=
          std::string::npos);
    CHECK(error_of(kGood + "tp_comm_pipeline_splits: {value: 0, source: \"x\"}\n").find("tp_comm_pipeline_splits") !=
          std::string::npos);
    // Userbuffers runs on at most 32 SMs (NVTE_MAX_SMS).
    CHECK(error_of(kGood + "tp_comm_pipeline_sms: {value: 64, source: \"x\"}\n").find("tp_comm_pipeline_sms") !=
          std::string::npos);
    CHECK(error_of(kGood + "tp_comm_pipeline_sms: {value: 16}\n").find("tp_comm_pipeline_sms") != std::string::npos);
    // Modelled, not set: Megatron-Core r0.8's TE default, which makes the four runs worse (docs/validation.md §7).
    CHECK_FALSE(software_profile("megatron-core").tp_comm_row_fprop_pipeline);
}

TEST_CASE("software profiles: memory-bound kernels' shares of the streaming rate (memory_bound)") {
    const SoftwareProfile plain = good_with();
    CHECK(plain.memory_bound.norm == 1.0);  // left out: fused kernels at the streaming rate
    CHECK(plain.memory_bound.activation_bwd == 1.0);
    const SoftwareProfile p = good_with(
        "memory_bound:\n  norm: {value: 0.5, source: \"ln\"}\n"
        "  norm_bwd: {value: 0.25, source: \"lnb\"}\n");
    CHECK(p.memory_bound.norm == 0.5);
    CHECK(p.memory_bound.norm_bwd == 0.25);
    CHECK(p.memory_bound.activation == 1.0);  // a class left out keeps 1
    CHECK(p.memory_bound_norm_bwd_from.text == "lnb");
    CHECK(error_of(kGood + "memory_bound:\n  norm: {value: 1.5, source: \"x\"}\n").find("memory_bound.norm.value") !=
          std::string::npos);
    CHECK(error_of(kGood + "memory_bound:\n  norm: {value: 0.001, source: \"x\"}\n").find("not plausible") !=
          std::string::npos);
    CHECK(error_of(kGood + "memory_bound:\n  norm: {value: 0.5}\n").find("memory_bound.norm") != std::string::npos);
    CHECK(error_of(kGood + "memory_bound:\n  rope: {value: 0.5, source: \"x\"}\n").find("rope") != std::string::npos);
    // llm-foundry's MPT runs eager PyTorch LayerNorm and GeLU, measured on the H200; Megatron-Core's are fused.
    CHECK(software_profile("llm-foundry").memory_bound.norm == 0.53);
    CHECK(software_profile("llm-foundry").memory_bound.norm_bwd == 0.35);
    CHECK(software_profile("llm-foundry").memory_bound.activation == 0.78);
    CHECK(software_profile("megatron-core").memory_bound.norm_bwd == 1.0);
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
    // The grouped FP8 GEMM family is cutlass or deepgemm (docs/moe.md section 4); only hai-llm runs DeepGEMM.
    const std::string family_err = error_with("fp8_grouped_gemm: {value: triton");
    CHECK(family_err.find("software/vllm.yaml:9:") != std::string::npos);
    CHECK(family_err.find("deepgemm") != std::string::npos);
    CHECK_FALSE(p.fp8_grouped_gemm_dense);
    CHECK(software_profile("hai-llm").fp8_grouped_gemm_dense);
    CHECK_FALSE(software_profile("hai-llm").fp8_grouped_gemm_from.text.empty());
    // The input quantization and routing kernels (docs/moe.md section 7b).
    CHECK(p.fp8_input_quant_group == 128);
    CHECK(p.grouped_topk_kernels == 10);
    CHECK_FALSE(p.grouped_topk_kernels_from.text.empty());
    CHECK(now.fp8_input_quant_group == 0);
    CHECK(now.grouped_topk_kernels == 1);
    // No routing without a kernel: 0 is out of range, at file:line:column.
    const std::string zero_err = error_with("grouped_topk_kernels: {value: 0");
    CHECK(zero_err.find("software/vllm.yaml:9:") != std::string::npos);
    // The MLA prompt's tensors at the memory profile's peak (docs/moe.md section 7b), not today.
    CHECK(p.mla_prefill_eager);
    CHECK_FALSE(p.mla_prefill_workspace_from.text.empty());
    CHECK_FALSE(now.mla_prefill_eager);
    const std::string peak_err = error_with("mla_prefill_workspace: {value: lazy");
    CHECK(peak_err.find("software/vllm.yaml:9:") != std::string::npos);
    CHECK(peak_err.find("eager") != std::string::npos);
    // The MLA cache entries padded to 256 bytes (until PR #14842), not today.
    CHECK(p.mla_kv_cache_align_bytes == 256);
    CHECK_FALSE(p.mla_kv_cache_align_bytes_from.text.empty());
    CHECK(now.mla_kv_cache_align_bytes == 0);
    // An alignment that is not a power of two is a slip, at file:line:column.
    const std::string align_err = error_with("mla_kv_cache_align_bytes: {value: 250");
    CHECK(align_err.find("software/vllm.yaml:9:") != std::string::npos);
    CHECK(align_err.find("power of two") != std::string::npos);
    // The memory held outside PyTorch's allocator, 2.53 GiB (issue #13074's
    // log), only in the 0.7 file; 100 GB a GPU is a unit slip.
    CHECK(p.non_torch_memory_bytes == doctest::Approx(2.53 * 1073741824.0));
    CHECK_FALSE(p.non_torch_memory_from.text.empty());
    CHECK(now.non_torch_memory_bytes == 0);
    const std::string non_torch_err = error_with("non_torch_memory: {value: 100 GB");
    CHECK(non_torch_err.find("software/vllm.yaml:9:") != std::string::npos);
    CHECK(non_torch_err.find("outside the allocator") != std::string::npos);
}

TEST_CASE("software extends: a release overrides the keys it states and keeps its base's others with their evidence") {
    const Folder f("parasim-test-software-extends");
    f.write("vllm", base_profile());
    f.write("vllm-0.7", release("0.7", "vllm") +
                            "host:\n  kernel_issue: {value: 2 us, source: \"release issue\"}\n"
                            "overlaps: {value: [tp_comm], source: \"release overlaps\"}\n"
                            "serving:\n  request_overhead: {value: 5 ms, fitted_on: \"release runs\"}\n"
                            "grouped_topk_kernels: {value: 10, source: \"release routing\"}\n");
    const SoftwareProfile p = software_profile("vllm", "0.7.4", f.dir.string());
    // The file's own identity.
    CHECK(p.name == "vllm");
    CHECK(p.version == "0.7");
    CHECK(p.description == "release 0.7");
    // Stated: the release's value and evidence.
    CHECK(p.kernel_issue == Time::us(2));
    CHECK(p.kernel_issue_from.text == "release issue");
    CHECK(p.grouped_topk_kernels == 10);
    CHECK(p.serving_request_overhead == Time::us(5000));
    CHECK(p.serving_request_overhead_from.kind == "fitted_on");
    // A list is replaced whole, not appended to.
    CHECK(p.overlaps == std::vector<std::string>{"tp_comm"});
    CHECK(p.overlaps_from.text == "release overlaps");
    // Not stated: the base's value and the base's evidence, key by key
    // (the host block's other key, the serving block's other key).
    CHECK(p.launch_queue_depth == 64);
    CHECK(p.launch_queue_depth_from.text == "a test");
    CHECK(p.kernel_efficiency == doctest::Approx(0.9));
    CHECK(p.kernel_efficiency_from.kind == "fitted_on");
    CHECK(p.kernel_efficiency_from.text == "points a, b");
    CHECK_FALSE(p.fuse_elementwise);
    CHECK(p.serving_sequence_overhead == Time::us(40));
    CHECK(p.serving_sequence_overhead_from.text == "base serving");
    // Neither states it: the loader's default, no evidence.
    CHECK(p.serving_token_overhead == Time{});
    CHECK(p.serving_token_overhead_from.kind.empty());
    // The base is unchanged by its release.
    const SoftwareProfile base = software_profile("vllm", f.dir.string());
    CHECK(base.kernel_issue == Time::us(7));
    CHECK(base.grouped_topk_kernels == 1);
    CHECK(base.overlaps.size() == 2);
}

TEST_CASE("software extends: a chain reads the nearest file that states a key") {
    const Folder f("parasim-test-software-extends-chain");
    f.write("vllm", base_profile());
    f.write("vllm-0.7", release("0.7", "vllm") + "host:\n  kernel_issue: {value: 2 us, source: \"0.7\"}\n");
    f.write("vllm-0.7.1", release("0.7.1", "vllm-0.7") + "kernel_efficiency: {value: 0.5, source: \"0.7.1\"}\n");
    const SoftwareProfile p = software_profile("vllm", "0.7.1", f.dir.string());
    CHECK(p.kernel_efficiency == doctest::Approx(0.5));  // its own
    CHECK(p.kernel_issue == Time::us(2));                // its base's
    CHECK(p.kernel_issue_from.text == "0.7");
    CHECK(p.launch_queue_depth == 64);  // its base's base's
    CHECK(p.launch_queue_depth_from.text == "a test");
    // The same files give the same profile in any order of loading.
    const SoftwareProfile again = software_profile("vllm", "0.7.1", f.dir.string());
    CHECK(again.kernel_issue_from.text == p.kernel_issue_from.text);
    CHECK(again.description == p.description);
}

TEST_CASE("software extends: a stated key still needs its evidence and its bounds, in the release's file") {
    const Folder f("parasim-test-software-extends-checks");
    f.write("vllm", base_profile());
    f.write("vllm-0.7", release("0.7", "vllm") + "kernel_efficiency: {value: 0.5}\n");
    CHECK(f.error_of("vllm-0.7") ==
          f.file("vllm-0.7") + ":5:20: kernel_efficiency: a value needs its evidence: source: or fitted_on:");
    f.write("vllm-0.7", release("0.7", "vllm") + "host:\n  kernel_issue: {value: 20 ms, source: \"x\"}\n");
    CHECK(f.error_of("vllm-0.7") ==
          f.file("vllm-0.7") + ":6:25: host.kernel_issue.value: a per-kernel host cost above 10 ms is not plausible");
    f.write("vllm-0.7", release("0.7", "vllm") + "kernel_eficiency: {value: 0.5, source: \"x\"}\n");
    CHECK(f.error_of("vllm-0.7").find("did you mean 'kernel_efficiency'") != std::string::npos);
    // Its own identity is not inherited: the description is required.
    f.write("vllm-0.7", "name: vllm\nversion: \"0.7\"\nextends: vllm\n");
    CHECK(f.error_of("vllm-0.7").find(f.file("vllm-0.7") + ":1:1:") == 0);
    // A broken base is reported in the base's file.
    f.write("vllm", replace(base_profile(), "value: 64", "value: 0"));
    f.write("vllm-0.7", release("0.7", "vllm"));
    CHECK(f.error_of("vllm-0.7").find(f.file("vllm") + ":5:31: host.launch_queue_depth.value:") == 0);
}

TEST_CASE("software extends: cycles, unknown bases, paths and long chains are errors at the extends: key") {
    const Folder f("parasim-test-software-extends-errors");
    f.write("vllm", base_profile());
    // A file that extends itself, and two that extend each other: the error
    // is in the file whose base closes the cycle.
    f.write("vllm-0.7", release("0.7", "vllm-0.7"));
    CHECK(f.error_of("vllm-0.7") ==
          f.file("vllm-0.7") + ":3:10: extends: profiles extend one another in a cycle: vllm-0.7 -> vllm-0.7");
    f.write("vllm-0.7", release("0.7", "vllm-0.8"));
    f.write("vllm-0.8", release("0.8", "vllm-0.7"));
    CHECK(f.error_of("vllm-0.7") == f.file("vllm-0.8") +
                                        ":3:10: extends: profiles extend one another in a cycle: vllm-0.7 -> vllm-0.8 "
                                        "-> vllm-0.7");
    CHECK(f.error_of("vllm-0.8") == f.file("vllm-0.7") +
                                        ":3:10: extends: profiles extend one another in a cycle: vllm-0.8 -> vllm-0.7 "
                                        "-> vllm-0.8");
    fs::remove(f.file("vllm-0.8"));
    // A base that is not in the folder.
    f.write("vllm-0.7", release("0.7", "vllm-0.6"));
    CHECK(f.error_of("vllm-0.7") == f.file("vllm-0.7") +
                                        ":3:10: extends: no software profile 'vllm-0.6' in the profile's folder "
                                        "(known: vllm, vllm-0.7)");
    // A base in another folder: a path is not a profile name, relative or absolute.
    for (const std::string& path : {std::string("../vllm"), std::string("sub/vllm"), (f.dir / "vllm").string()}) {
        CAPTURE(path);
        f.write("vllm-0.7", release("0.7", path));
        CHECK(f.error_of("vllm-0.7") == f.file("vllm-0.7") + ":3:10: extends: '" + path +
                                            "' is not a profile name: a base is a file of the same folder, named "
                                            "without '.yaml' (letters, digits, '.', '-' or '_')");
    }
    // Eight files in a chain load; a ninth is refused at the eighth's extends:.
    f.write("vllm-1", release("1", "vllm"));
    for (int i = 2; i <= 8; ++i)
        f.write("vllm-" + std::to_string(i), release(std::to_string(i), "vllm-" + std::to_string(i - 1)));
    CHECK(software_profile("vllm-7", f.dir.string()).kernel_issue == Time::us(7));  // 8 files: vllm-7 .. vllm
    CHECK(f.error_of("vllm-8").find(f.file("vllm-1") +
                                    ":3:10: extends: more than 8 profiles extend one another (vllm-8 -> vllm-7") == 0);
    // A profile read from text has no folder to look in.
    CHECK(parasim_test::config_error_of(
              [](const std::string& t) { load_software_profile(load_string(t, "software/vllm-0.7.yaml"), "vllm-0.7"); },
              release("0.7", "vllm")) ==
          "software/vllm-0.7.yaml:3:10: extends: a profile read from text has no folder to find its base in");
}

TEST_CASE("software extends: the shipped release files state only what differs from their base") {
    // tensorrt-llm-0.5.yaml extends tensorrt-llm-0.6.yaml and vllm-0.7.yaml
    // extends vllm.yaml: the inherited values carry the base file's evidence.
    const SoftwareProfile v05 = software_profile("tensorrt-llm-0.5");
    const SoftwareProfile v06 = software_profile("tensorrt-llm-0.6");
    CHECK(v05.decode_attention_issue_from.text == v06.decode_attention_issue_from.text);
    const SoftwareProfile v07 = software_profile("vllm-0.7");
    const SoftwareProfile vllm = software_profile("vllm");
    CHECK(v07.serving_sequence_overhead_from.text == vllm.serving_sequence_overhead_from.text);
    CHECK(v07.kernel_issue_from.text == vllm.kernel_issue_from.text);
    CHECK(v07.mla_absorbed_weights);  // its own key
    CHECK_FALSE(vllm.mla_absorbed_weights);
}

TEST_SUITE_END();
