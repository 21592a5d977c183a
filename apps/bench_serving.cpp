// parasim bench serving: the request-level serving simulation's speed
// (issue #15's target: 10,000 requests of Llama 3 8B on one H100 with
// continuous batching in under 10 s on one thread; 100,000 requests on 8
// replicas of Llama 3 70B, tp 4, in under 60 s). Timed from the loaded
// scenario to the summary, as a user waits for it.
#include "apps/cli.h"
#include "sim/config/data_dir.h"
#include "sim/config/scenario.h"
#include "sim/serve/serve_report.h"

#include <fmt/format.h>

#include <chrono>
#include <iostream>

namespace parasim_cli {

int bench_serving(const std::string& format) {
    struct Case {
        const char* label;
        std::vector<std::string> sets;
        const char* scenario = "serving-llama3-8b-h100.yaml";
    };
    const std::vector<Case> cases = {
        {"10k requests, continuous, decode context bucket 16", {}},
        {"10k requests, chunked-prefill (512), bucket 16",
         {"workload.serving.scheduler=chunked-prefill", "workload.serving.max_tokens_per_iteration=512"}},
        {"10k requests, continuous, exact decode contexts", {"workload.serving.decode_context_bucket=1"}},
        {"70B, 8 replicas of tp 4, 100k requests, bucket 16", {}, "serving-llama3-70b-h100-8-replicas.yaml"},
    };
    std::string out = format == "json" ? "["
                                       : fmt::format("{:<52} {:>8} {:>11} {:>10} {:>10} {:>10}\n", "case", "wall s",
                                                     "iterations", "hit rate", "P50 TPOT", "P99 TTFT");
    for (std::size_t i = 0; i < cases.size(); ++i) {
        std::vector<sim::config::Override> ov;
        for (const auto& s : cases[i].sets) ov.push_back(sim::config::parse_override(s));
        const auto sc =
            sim::config::load_scenario(std::string(sim::config::data_dir()) + "/scenarios/" + cases[i].scenario, ov);
        const auto t0 = std::chrono::steady_clock::now();
        const auto r = sim::serve::simulate_serving(sc, sc.strategies.front(), {});
        const auto s = sim::serve::summarize(sc, r);
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double hit = static_cast<double>(r.cache_hits) / static_cast<double>(r.cache_hits + r.cache_misses);
        if (format == "json")
            out += fmt::format(
                "{}\n{{\"case\":\"{}\",\"wall_s\":{},\"iterations\":{},\"cache_hit_rate\":{},"
                "\"tpot_p50_ms\":{},\"ttft_p99_ms\":{}}}",
                i ? "," : "", cases[i].label, wall, r.iterations, hit, s.tpot_ms.p50, s.ttft_ms.p99);
        else
            out += fmt::format("{:<52} {:>8.2f} {:>11} {:>9.1f}% {:>7.2f} ms {:>7.1f} ms\n", cases[i].label, wall,
                               r.iterations, hit * 100, s.tpot_ms.p50, s.ttft_ms.p99);
    }
    if (format == "json") out += "\n]\n";
    std::cout << out;
    return 0;
}

}  // namespace parasim_cli
