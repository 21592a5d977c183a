// Model files, Hugging Face configs and the closed forms derived from them:
// parameter counts and model FLOPs per token.
#include "sim/config/data_dir.h"
#include "tests/test_util.h"

#include <doctest/doctest.h>

#include <string>

#include "sim/config/model_loader.h"
#include "sim/config/yaml_reader.h"
#include "sim/workload/model.h"
#include "sim/workload/operators.h"

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md); a case may override it

using sim::ConfigError;
using sim::config::load_model;
using sim::config::load_model_file;
using sim::config::load_string;
using sim::config::model_path;
using sim::workload::count_parameters;
using sim::workload::ModelSpec;

namespace {

const std::string kData = sim::config::data_dir();

ModelSpec shipped(const std::string& name) { return load_model_file(model_path(name)); }

ModelSpec from_text(const std::string& text) { return load_model(load_string(text, "bad.yaml")); }

std::string error_of(const std::string& text) {
    return parasim_test::config_error_of([](const std::string& t) { from_text(t); }, text);
}

const char* kLlamaLike = R"(name: tiny
layers: 2
hidden: 64
heads: 8
kv_heads: 2
ffn: 128
ffn_kind: swiglu
vocab: 1000
max_seq: 256
norm: rmsnorm
tied_embeddings: false
position: rope
bias: false
)";

}  // namespace

TEST_CASE("GPT-3 175B has 174.6 +- 0.5 B parameters") {
    const ModelSpec m = shipped("gpt3-175b");
    const auto p = count_parameters(m);
    MESSAGE("GPT-3 175B parameters: ", p.total);
    // Expectation: 96 * (12 h^2 + 13 h) + (50257 + 2048) h + 2 h with h = 12288 (tied head).
    const double h = 12288;
    CHECK(p.total == doctest::Approx(96 * (12 * h * h + 13 * h) + (50257 + 2048) * h + 2 * h));
    CHECK(p.total == doctest::Approx(174.6e9).epsilon(0.5 / 174.6));
    CHECK(p.lm_head == 0);
}

TEST_CASE("Llama 3 70B has 70.6 +- 0.3 B parameters") {
    const ModelSpec m = shipped("llama3-70b");
    const auto p = count_parameters(m);
    MESSAGE("Llama 3 70B parameters: ", p.total);
    CHECK(p.total == doctest::Approx(70.6e9).epsilon(0.3 / 70.6));
    CHECK(p.total == doctest::Approx(70'553'706'496.0));  // the published safetensors count
}

TEST_CASE("the reference layer (hidden 8192, 16 x 512 heads, MLP 32768, gelu, no bias) holds about 805 M parameters") {
    const ModelSpec m = shipped("dense16-h8192");
    const auto p = count_parameters(m);
    MESSAGE("reference layer parameters: ", p.per_layer);
    // Expectation: 4 h^2 (attention) + 2 h f (MLP) + 2 norms of 2h.
    CHECK(p.per_layer == doctest::Approx(4.0 * 8192 * 8192 + 2.0 * 8192 * 32768 + 4 * 8192));
    CHECK(p.per_layer == doctest::Approx(805e6).epsilon(0.001));
}

TEST_CASE("other shipped models match their published sizes") {
    CHECK(count_parameters(shipped("llama3-8b")).total == doctest::Approx(8'030'261'248.0));
    CHECK(count_parameters(shipped("llama2-7b")).total == doctest::Approx(6'738'415'616.0));
    const auto mix = count_parameters(shipped("mixtral-8x7b"));
    CHECK(mix.total == doctest::Approx(46'702'792'704.0));
    CHECK(mix.total_active == doctest::Approx(12.9e9).epsilon(0.01));
    CHECK(count_parameters(shipped("llama3-405b")).total == doctest::Approx(405.8e9).epsilon(0.005));
}

TEST_CASE("every shipped model loads") {
    const auto names = sim::config::shipped_models();
    CHECK(names.size() >= 10);
    for (const auto& name : names) {
        CAPTURE(name);
        const ModelSpec m = shipped(name);
        CHECK(m.name == name);
        CHECK(m.heads % m.kv_heads == 0);
        CHECK(m.head_dim > 0);
        CHECK(count_parameters(m).total > 1e8);
    }
}

TEST_CASE("training FLOPs per token of a dense model are within 2% of 6N + 12 * layers * hidden * seq") {
    using namespace sim::workload;
    for (const auto& point :
         {std::pair<std::string, std::int64_t>{"gpt3-175b", 2048}, {"dense16-h8192", 10000}, {"llama3-8b", 8192}}) {
        // Not a structured binding: CAPTURE takes it into a lambda, which clang 14 refuses.
        const std::string& name = point.first;
        const std::int64_t seq = point.second;
        CAPTURE(name);
        const ModelSpec m = shipped(name);
        const double n = count_parameters(m).flop_params;
        const double closed = 6 * n + 12.0 * m.layers * attention_width(m) * seq;
        CHECK(training_flops_per_token(m, seq) == doctest::Approx(closed));
        // The operators' own FLOPs, unfused attention without masking: the
        // attention backward is exactly 2x its forward, as in the closed form.
        OperatorOptions o;
        o.flash_attention = false;
        o.causal = false;
        const double ops = training_hardware_flops_per_token(m, seq, o, Recompute::none);
        MESSAGE(name, ": operators ", ops, " vs closed form ", closed);
        CHECK(ops == doctest::Approx(closed).epsilon(0.02));
        // With N the total parameter count (embedding included) too.
        const double closed_total = 6 * count_parameters(m).total + 12.0 * m.layers * attention_width(m) * seq;
        if (m.tied_embeddings || name == "dense16-h8192") CHECK(ops == doctest::Approx(closed_total).epsilon(0.02));
    }
    // Flash, causal (the default) at GPT-3's own context: still within 2%.
    const ModelSpec gpt3 = shipped("gpt3-175b");
    const double ops = training_hardware_flops_per_token(gpt3, 2048, OperatorOptions{}, Recompute::none);
    CHECK(ops == doctest::Approx(training_flops_per_token(gpt3, 2048)).epsilon(0.02));
}

TEST_CASE("hardware FLOPs exceed model FLOPs by the recomputed forward") {
    using namespace sim::workload;
    const ModelSpec m = shipped("gpt3-175b");
    OperatorOptions o;
    o.flash_attention = false;
    o.causal = false;
    const double none = training_hardware_flops_per_token(m, 2048, o, Recompute::none);
    const double full = training_hardware_flops_per_token(m, 2048, o, Recompute::full);
    const double selective = training_hardware_flops_per_token(m, 2048, o, Recompute::selective);
    // Full recompute adds one forward of every layer: about a third of 6N + 12lhs (2N + 4lhs).
    CHECK((full - none) ==
          doctest::Approx(2 * count_parameters(m).per_layer * m.layers + 4.0 * m.layers * attention_width(m) * 2048)
              .epsilon(0.01));
    // Selective recomputes only QK^T and PV: 4 * layers * a * d * seq per token.
    CHECK((selective - none) == doctest::Approx(4.0 * m.layers * attention_width(m) * 2048).epsilon(0.01));
}

TEST_CASE("inference FLOPs per token are 2N + 4 * layers * hidden * context and match the decode operators") {
    using namespace sim::workload;
    const ModelSpec m = shipped("llama3-8b");
    const std::int64_t ctx = 4096;
    const double closed = 2 * count_parameters(m).flop_params + 4.0 * m.layers * attention_width(m) * ctx;
    CHECK(inference_flops_per_token(m, ctx) == doctest::Approx(closed));
    OperatorOptions o;
    o.inference = true;
    const PassShape decode{1, 1, ctx};
    const double ops = m.layers * total_flops(layer_forward(m, 0, 0, decode, o)) +
                       total_flops(embedding_forward(m, 0, decode, o)) +
                       total_flops(head_forward(m, 0, decode, o, false));
    CHECK(ops == doctest::Approx(closed).epsilon(0.005));
}

TEST_CASE("a Hugging Face config.json of Llama 3 8B gives the same model and operators as models/llama3-8b.yaml") {
    using namespace sim::workload;
    const ModelSpec yaml = shipped("llama3-8b");
    const ModelSpec hf = load_model_file(kData + "/tests/data/hf/llama3-8b/config.json");
    CHECK(hf.name == "llama3-8b");
    CHECK(hf.layers == yaml.layers);
    CHECK(hf.hidden == yaml.hidden);
    CHECK(hf.heads == yaml.heads);
    CHECK(hf.kv_heads == yaml.kv_heads);
    CHECK(hf.head_dim == yaml.head_dim);
    CHECK(hf.ffn == yaml.ffn);
    CHECK(hf.ffn_kind == yaml.ffn_kind);
    CHECK(hf.vocab == yaml.vocab);
    CHECK(hf.max_seq == yaml.max_seq);
    CHECK(hf.norm == yaml.norm);
    CHECK(hf.tied_embeddings == yaml.tied_embeddings);
    CHECK(hf.position == yaml.position);
    CHECK(hf.bias.qkv == yaml.bias.qkv);
    CHECK(hf.bias.out == yaml.bias.out);
    CHECK(hf.bias.mlp == yaml.bias.mlp);
    CHECK(hf.experts == yaml.experts);

    auto same = [](const std::vector<Operator>& a, const std::vector<Operator>& b) {
        REQUIRE(a.size() == b.size());
        for (std::size_t i = 0; i < a.size(); ++i) {
            const auto& x = a[i].kernel;
            const auto& y = b[i].kernel;
            CAPTURE(x.name);
            CHECK(x.name == y.name);
            CHECK(x.kind == y.kind);
            CHECK(x.dtype == y.dtype);
            CHECK(x.flops == y.flops);
            CHECK(x.bytes_read == y.bytes_read);
            CHECK(x.bytes_written == y.bytes_written);
            CHECK(x.m == y.m);
            CHECK(x.n == y.n);
            CHECK(x.k == y.k);
            CHECK(x.batch == y.batch);
            CHECK(a[i].tp_sync == b[i].tp_sync);
            CHECK(a[i].tp_sync_bytes == b[i].tp_sync_bytes);
        }
    };
    OperatorOptions o;
    o.tp = 2;
    const PassShape train{2, 2048, 2048};
    same(layer_forward(hf, 3, 0, train, o), layer_forward(yaml, 3, 0, train, o));
    same(layer_backward(hf, 3, 0, train, o, Recompute::selective),
         layer_backward(yaml, 3, 0, train, o, Recompute::selective));
    same(embedding_forward(hf, 0, train, o), embedding_forward(yaml, 0, train, o));
    same(head_forward(hf, 0, train, o, true), head_forward(yaml, 0, train, o, true));
    same(head_backward(hf, 0, train, o), head_backward(yaml, 0, train, o));
    o.inference = true;
    same(layer_forward(hf, 0, 0, PassShape{8, 1, 1000}, o), layer_forward(yaml, 0, 0, PassShape{8, 1, 1000}, o));
    CHECK(count_parameters(hf).total == count_parameters(yaml).total);
}

TEST_CASE("the other Hugging Face architectures load") {
    const ModelSpec mix = load_model_file(kData + "/tests/data/hf/mixtral-8x7b/config.json");
    CHECK(mix.experts == 8);
    CHECK(mix.top_k == 2);
    CHECK(count_parameters(mix).total == count_parameters(shipped("mixtral-8x7b")).total);
    const ModelSpec gpt2 = load_model_file(kData + "/tests/data/hf/gpt2/config.json");
    CHECK(gpt2.tied_embeddings);
    CHECK(gpt2.position == sim::workload::PositionKind::learned);
    CHECK(gpt2.ffn == 4 * 768);
    CHECK(count_parameters(gpt2).total == doctest::Approx(124'439'808.0));  // GPT-2 small, published count
    const ModelSpec pythia = load_model_file(kData + "/tests/data/hf/pythia-1b/config.json");
    CHECK(pythia.norm == sim::workload::NormKind::layernorm);
    CHECK(pythia.bias.mlp);
    CHECK(count_parameters(pythia).total == doctest::Approx(1'011'781'632.0));  // Pythia-1B, published count
}

TEST_CASE("an unknown Hugging Face architecture is refused with its name and the supported list") {
    const auto node = load_string("{\n  \"architectures\": [\"FalconForCausalLM\"],\n  \"hidden_size\": 64\n}\n",
                                  "falcon/config.json");
    CHECK_THROWS_WITH_AS(sim::config::load_hf_config(node),
                         doctest::Contains("falcon/config.json:2:20: architectures: architecture 'FalconForCausalLM' "
                                           "is not supported (supported: LlamaForCausalLM"),
                         ConfigError);
}

TEST_CASE("a model file with a missing field is refused with file:line:column") {
    std::string text = kLlamaLike;
    text.replace(text.find("vocab: 1000\n"), 12, "");
    CHECK(error_of(text) == "bad.yaml:1:1: missing required field 'vocab'");
}

TEST_CASE("heads not dividing hidden without head_dim is refused at the heads line") {
    std::string text = kLlamaLike;
    text.replace(text.find("heads: 8\n"), 9, "heads: 6\n");
    text.replace(text.find("kv_heads: 2\n"), 12, "kv_heads: 3\n");
    CHECK(error_of(text) == "bad.yaml:4:8: heads: heads (6) does not divide hidden (64); give head_dim explicitly");
    // With head_dim given, the same heads are fine.
    const ModelSpec m = from_text(text + "head_dim: 16\n");
    CHECK(m.head_dim == 16);
    CHECK(sim::workload::attention_width(m) == 96);
}

TEST_CASE("kv_heads not dividing heads is refused at the kv_heads line") {
    std::string text = kLlamaLike;
    text.replace(text.find("kv_heads: 2\n"), 12, "kv_heads: 3\n");
    CHECK(error_of(text) == "bad.yaml:5:11: kv_heads: kv_heads (3) does not divide heads (8)");
}

TEST_CASE("model file errors: unknown keys, bad enums, bad numbers, MoE") {
    CHECK(error_of(std::string(kLlamaLike) + "hiden_act: silu\n") ==
          "bad.yaml:14:1: unknown key 'hiden_act' (valid keys: attention, bias, block, ffn, ffn_kind, head_dim, heads, "
          "hidden, kv_heads, layers, max_seq, moe, mtp_layers, name, norm, position, rotary_dim, source, "
          "tied_embeddings, vocab)");
    CHECK(error_of(std::string(kLlamaLike) + "kv_head: 2\n") ==
          "bad.yaml:14:1: unknown key 'kv_head' (did you mean 'kv_heads'?)");
    std::string text = kLlamaLike;
    text.replace(text.find("swiglu"), 6, "swigelu");
    CHECK(error_of(text) == "bad.yaml:7:11: ffn_kind: 'swigelu' is not one of gelu, swiglu (did you mean 'swiglu'?)");
    text = kLlamaLike;
    text.replace(text.find("layers: 2"), 9, "layers: 0");
    CHECK(error_of(text) == "bad.yaml:2:9: layers: 0 is out of range [1, 1048573]");
    CHECK(error_of(std::string(kLlamaLike) + "moe: {experts: 4, top_k: 5}\n") ==
          "bad.yaml:14:26: moe.top_k: top_k (5) exceeds experts (4)");
    CHECK(error_of(std::string(kLlamaLike) + "moe: {experts: 4, top_k: 2, groups: 3, group_limit: 1}\n") ==
          "bad.yaml:14:37: moe.groups: groups (3) does not divide experts (4)");
    CHECK(error_of(std::string(kLlamaLike) + "moe: {experts: 4, top_k: 2, group_limit: 1}\n") ==
          "bad.yaml:14:42: moe.group_limit: group_limit needs groups (the expert groups a token picks among)");
    CHECK(error_of(std::string(kLlamaLike) + "moe: {experts: 4, top_k: 2, groups: 2, group_limit: 3}\n") ==
          "bad.yaml:14:53: moe.group_limit: 3 is out of range [1, 2]");
    CHECK(error_of(std::string(kLlamaLike) + "moe: {experts: 4, topk: 2}\n") ==
          "bad.yaml:14:19: unknown key 'moe.topk' (did you mean 'top_k'?)");
}

TEST_CASE("model references resolve by name, directory or path") {
    CHECK(model_path("llama3-8b") == kData + "/models/llama3-8b.yaml");
    CHECK(model_path(kData + "/tests/data/hf/llama3-8b") == kData + "/tests/data/hf/llama3-8b/config.json");
    CHECK(model_path("some/file.yaml") == "some/file.yaml");
    CHECK(model_path("gpt-1.3b") == kData + "/models/gpt-1.3b.yaml");
    CHECK_THROWS_WITH_AS(model_path("llama3-8c"), doctest::Contains("(did you mean 'llama3-8b'?)"), ConfigError);
    const auto scenario = load_string("model: lama3-8b\n", "s.yaml");
    sim::config::MapReader r(scenario);
    CHECK_THROWS_WITH_AS(sim::config::load_model_ref(r.required("model")),
                         doctest::Contains("s.yaml:1:8: model: no model named 'lama3-8b'"), ConfigError);
    const auto inline_model =
        load_string(std::string("model:\n") +
                        "  name: x\n  layers: 2\n  hidden: 64\n  heads: 4\n"
                        "  ffn: 256\n  ffn_kind: gelu\n  vocab: 100\n  max_seq: 128\n"
                        "  norm: layernorm\n  tied_embeddings: true\n  position: learned\n  bias: true\n",
                    "s.yaml");
    sim::config::MapReader r2(inline_model);
    const ModelSpec m = sim::config::load_model_ref(r2.required("model"));
    CHECK(m.head_dim == 16);
    CHECK(m.kv_heads == 4);
    CHECK(m.where.to_string() == "s.yaml:2:3");
}

TEST_SUITE_END();
