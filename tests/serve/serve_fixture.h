// Serving test scenarios: Llama 3 8B on one H100 with a serving block the
// test writes, loaded from a file in the system temp folder.
#pragma once

#include "sim/config/scenario.h"
#include "sim/serve/serve_report.h"
#include "sim/serve/simulator.h"

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <string>

namespace serve_test {

// The engine's physics without the profile's fitted host times and its
// disaggregated handover (test_serving_host.cpp and
// test_serving_handover.cpp set their own): hand-computed answers stay exact.
inline void no_host_times(sim::config::ScenarioSpec& sc) {
    sc.profile.serving_sequence_overhead = sim::Time{};
    sc.profile.serving_request_overhead = sim::Time{};
    sc.profile.serving_token_overhead = sim::Time{};
    sc.profile.serving_request_latency = sim::Time{};
    sc.profile.serving_kv_descriptor_post = sim::Time{};
    sc.profile.serving_first_token_on_decode = false;
}

// A scenario whose workload.serving block is `serving` (YAML lines indented
// by 4 spaces) on `gpus` GPUs of `cluster` with tensor parallelism `tp`
// (gpus / tp replicas).
inline sim::config::ScenarioSpec scenario(const std::string& serving, const std::string& name = "s", int gpus = 1,
                                          int tp = 1, const std::string& cluster = "dgx-h100") {
    static int counter = 0;
    const auto path = std::filesystem::temp_directory_path() /
                      ("parasim-serve-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".yaml");
    {
        std::ofstream f(path);
        f << "name: " << name << "\nsoftware: {name: vllm}\ncluster: " << cluster << "\ngpus: " << gpus
          << "\nmodel: llama3-8b\n"
          << "workload:\n  mode: serving\n  dtype: bf16\n  serving:\n"
          << serving << "strategies:\n  - name: tp" << tp << "\n    tp: " << tp << "\n";
    }
    auto sc = sim::config::load_scenario(path.string(), {});
    std::filesystem::remove(path);
    no_host_times(sc);
    return sc;
}

// A pool too small for its load: 22% of 80 GiB leaves ~1.9 GB after 17 GB of
// weights and workspace, about 890 blocks of 16 tokens (14,000 tokens), for
// 40 sequences of 2,048 arriving at once: sequences are preempted.
inline const std::string kSmallPool =
    "    arrivals: {process: poisson, rate: 50}\n"
    "    prompt_tokens: {distribution: fixed, value: 512}\n"
    "    output_tokens: {distribution: fixed, value: 1536}\n"
    "    requests: 40\n    gpu_memory_utilization: 0.22\n    decode_context_bucket: 16\n";

struct Served {
    sim::serve::ServeResult result;
    sim::serve::ServeSummary summary;
};

// Runs scenario(block, ...) under its first strategy and summarizes it.
inline Served serve_with(const std::string& block, int gpus = 1, int tp = 1, const std::string& cluster = "dgx-h100") {
    const auto sc = scenario(block, "s", gpus, tp, cluster);
    Served s{sim::serve::simulate_serving(sc, sc.strategies.front(), {}), {}};
    s.summary = sim::serve::summarize(sc, s.result);
    return s;
}

}  // namespace serve_test
