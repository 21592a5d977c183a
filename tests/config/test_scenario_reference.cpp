// docs/scenario-reference.md against the loaders: every key a scenario,
// cluster or model loader reads (each `required("key")`, `optional("key")`,
// `get("key")` or `need(..., "key")` in their sources) must be named on that
// page as `key`, so the reference cannot fall behind the code.
#include <doctest/doctest.h>
#include "sim/config/data_dir.h"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

namespace {

const std::string kRoot = sim::config::data_dir();

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    REQUIRE(in);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

TEST_CASE("every key the loaders read is in docs/scenario-reference.md") {
    const std::string doc = read_text(kRoot + "/docs/scenario-reference.md");
    const std::regex key_read(R"re((required|optional|get|has)\("([a-z_0-9]+)"\)|need\([^,()]+, "([a-z_0-9]+)"\))re");
    std::set<std::string> keys;
    for (const char* source : {"sim/config/scenario.cpp", "sim/config/run_details.cpp", "sim/config/serving_spec.cpp",
                               "sim/config/cluster_loader.cpp", "sim/config/model_loader.cpp"}) {
        const std::string code = read_text(kRoot + "/" + source);
        for (std::sregex_iterator it(code.begin(), code.end(), key_read), end; it != end; ++it)
            keys.insert((*it)[2].matched ? (*it)[2].str() : (*it)[3].str());
    }
    // The Hugging Face config.json keys are not scenario keys (docs/workload-model.md lists them).
    static const std::set<std::string> hf_only = {"architectures",
                                                  "n_layer",
                                                  "n_embd",
                                                  "n_head",
                                                  "n_inner",
                                                  "n_positions",
                                                  "num_hidden_layers",
                                                  "hidden_size",
                                                  "num_attention_heads",
                                                  "num_key_value_heads",
                                                  "intermediate_size",
                                                  "vocab_size",
                                                  "max_position_embeddings",
                                                  "tie_word_embeddings",
                                                  "num_local_experts",
                                                  "num_experts_per_tok",
                                                  "rms_norm_eps",
                                                  "hidden_act",
                                                  "head_dim",
                                                  "activation_function",
                                                  "max_sequence_length",
                                                  "layer_norm_epsilon",
                                                  "rotary_dim"};
    CHECK(keys.size() > 60);  // the pattern still finds the loaders' reads
    for (const auto& k : keys) {
        if (hf_only.count(k) && doc.find("`" + k + "`") == std::string::npos) continue;
        CAPTURE(k);
        CHECK(doc.find("`" + k + "`") != std::string::npos);
    }
}

TEST_SUITE_END();
