// libFuzzer target: arbitrary bytes as a Hugging Face config.json (and, since
// both take a parsed map, as a parasim model file). docs/testing.md says how
// to build and run it.
#include "fuzz_common.h"
#include "sim/config/model_loader.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    parasim_fuzz::expect_clean([&] {
        const auto node = sim::config::load_string(text, "fuzz/config.json");
        parasim_fuzz::expect_clean([&] { sim::config::load_hf_config(node); });
        parasim_fuzz::expect_clean([&] { sim::config::load_model(node); });
    });
    return 0;
}
