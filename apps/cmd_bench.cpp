// parasim bench: speed benchmarks (targets live here, not in timed tests).
#include "apps/cli.h"
#include "apps/command_line.h"
#include "apps/hold_bench.h"
#include "sim/config/data_dir.h"
#include "sim/config/scenario.h"
#include "sim/core/limits.h"
#include "sim/report/runner.h"
#include "sim/search/search.h"
#include "sim/validate/validate.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include <iostream>

namespace po = boost::program_options;

namespace parasim_cli {

namespace {

// Each population runs `repeat` times, engine and baseline alternating, and
// the best rate of each is reported: on a shared machine the slowest runs
// measure the neighbours, and alternating keeps a slow spell from landing on
// one side only.
int bench_engine(const std::string& format, std::uint64_t seed, int repeat) {
    struct Case {
        std::uint64_t pending, events;
    };
    const Case cases[] = {{1000, 20'000'000}, {100'000, 10'000'000}, {1'000'000, 10'000'000}};
    std::string out;
    if (format == "json") out += "[";
    else
        out += fmt::format("{:>10} {:>12} {:>18} {:>20} {:>8}\n", "pending", "events", "events/s", "baseline events/s",
                           "speedup");
    bool first = true;
    for (const Case& c : cases) {
        HoldResult r;
        for (int i = 0; i < repeat; ++i) {
            const auto once = run_hold_benchmark(c.pending, c.events, seed);
            if (once.engine_checksum != once.baseline_checksum)
                throw std::runtime_error("hold model: engine and baseline disagree");
            r.engine_events_per_s = std::max(r.engine_events_per_s, once.engine_events_per_s);
            r.baseline_events_per_s = std::max(r.baseline_events_per_s, once.baseline_events_per_s);
        }
        if (format == "json") {
            out += fmt::format("{}\n{{\"pending\":{},\"events_per_s\":{:.0f},\"baseline_events_per_s\":{:.0f}}}",
                               first ? "" : ",", c.pending, r.engine_events_per_s, r.baseline_events_per_s);
        } else {
            out +=
                fmt::format("{:>10} {:>12} {:>18.0f} {:>20.0f} {:>7.2f}x\n", c.pending, c.events, r.engine_events_per_s,
                            r.baseline_events_per_s, r.engine_events_per_s / r.baseline_events_per_s);
        }
        first = false;
    }
    if (format == "json") out += "\n]\n";
    fmt::print("{}", out);
    return 0;
}

double peak_rss_bytes() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) * 1024.0;  // Linux reports KiB
}

// User + system CPU seconds of this process so far.
double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    const auto s = [](const timeval& t) {
        return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
    };
    return s(u.ru_utime) + s(u.ru_stime);
}

// Whole simulations, each timed in the same run: plan building and execution
// (what a user waits for), not loading the YAML. Wall and CPU time (user +
// system, getrusage) per case; peak RSS is the process's so far, so cases
// run from the smallest to the largest footprint.
int bench_scale_impl(const std::string& format) {
    struct Case {
        const char* label;
        const char* scenario;
        std::vector<std::string> sets;
        bool collapse = true;
    };
    // GPT-3 175B at TP8 PP8 on `gpus` A100s (the global batch is fixed, so
    // DP grows and each replica's micro-batches shrink).
    const auto gpt3 = [](int gpus) {
        return std::vector<std::string>{fmt::format("gpus={}", gpus),
                                        fmt::format("strategies=[{{name: tp8-pp8-dp{0}, tp: 8, pp: 8, dp: {0}, "
                                                    "schedule: 1f1b}}]",
                                                    gpus / 64)};
    };
    // Every GPU of a fixed global batch simulated is about 50 M tasks: above the
    // default plan-tasks limit, which guards against hostile scenarios, not
    // this program's own cases.
    sim::limits().plan_tasks = std::max<std::uint64_t>(sim::limits().plan_tasks, 400'000'000);
    const std::string root = sim::config::data_dir();
    const std::vector<Case> cases = {
        {"partitioning 16xH100 tp8-pp2: prefill",
         "/scenarios/partitioning-16xh100-feasible.yaml",
         {"workload.decode_steps_simulated=0", "strategies=[{name: tp8-pp2, tp: 8, pp: 2}]"}},
        {"partitioning 16xH100 tp8-pp2: prefill + 1 decode step",
         "/scenarios/partitioning-16xh100-feasible.yaml",
         {"workload.decode_steps_simulated=1", "strategies=[{name: tp8-pp2, tp: 8, pp: 2}]"}},
        {"partitioning 16xH100 layerwise: prefill + 1 decode step",
         "/scenarios/partitioning-16xh100-feasible.yaml",
         {"workload.decode_steps_simulated=1",
          "strategies=[{name: layerwise, partition: {method: cache-aware, capacity: l2}}]"}},
        {"GPT-3 175B, 1024 A100, TP8 PP8 DP16 1F1B: 1 iteration", "/scenarios/bench/gpt3-175b-1024xa100.yaml", {}},
        {"Llama 3 405B, 16384 H100, TP8 PP16 DP128: 1 iteration", "/scenarios/bench/llama3-405b-16384xh100.yaml", {}},
        {"GPT-3 175B, 4096 A100, TP8 PP8 DP64: 1 iteration", "/scenarios/bench/gpt3-175b-1024xa100.yaml", gpt3(4096)},
        {"GPT-3 175B, 16384 A100, TP8 PP8 DP256: 1 iteration", "/scenarios/bench/gpt3-175b-1024xa100.yaml",
         gpt3(16384)},
        // MoE: 58 MoE layers' dispatch and combine over EP groups of 64 GPUs
        // on 8 nodes (deepep), about 28 000 all-to-alls an iteration (#16).
        {"DeepSeek-V3, 2048 H800, PP16 EP64 DP128: 1 iteration", "/scenarios/bench/deepseek-v3-2048xh800.yaml", {}},
        {"uncollapsed GPT-3 175B, 1024 A100, DP16: 1 iteration", "/scenarios/bench/gpt3-175b-1024xa100.yaml",
         gpt3(1024), false},
        {"uncollapsed GPT-3 175B, 4096 A100, DP64: 1 iteration", "/scenarios/bench/gpt3-175b-1024xa100.yaml",
         gpt3(4096), false},
        {"uncollapsed GPT-3 175B, 16384 A100, DP256: 1 iteration", "/scenarios/bench/gpt3-175b-1024xa100.yaml",
         gpt3(16384), false},
        {"uncollapsed Llama 3 405B, 16384 H100, DP128: 1 iteration",
         "/scenarios/bench/llama3-405b-16384xh100.yaml",
         {},
         false},
    };
    std::string out = format == "json" ? "["
                                       : fmt::format("{:<58} {:>8} {:>8} {:>12} {:>12} {:>12}\n", "case", "wall s",
                                                     "CPU s", "events", "events/s", "peak RSS");
    // Points simulated through validate's path, timed like the cases. They run
    // before the uncollapsed cases, whose footprint would mask their peak RSS.
    // One large collective alone: its cost is what limits DP all-reduces at
    // thousands of GPUs (#18). DeepSeek-V3 on 1024 H100 at sequence 2048:
    // direct all-to-alls that pipeline sends often contend with (#16).
    bool validate_done = false;
    const auto validate_cases = [&] {
        validate_done = true;
        const struct {
            const char* label;
            const char* dataset;
            int gpus;
        } points[] = {
            {"1 GiB ring all-reduce, 1024 H100 (validate path)",
             "/tests/data/validation/bench-allreduce-ring-1024.yaml", 1024},
            {"DeepSeek-V3, 1024 H100, EP64 direct, seq 2048 (validate)",
             "/tests/data/validation/bench-deepseek-v3-1024xh100.yaml", 1024},
        };
        for (const auto& p : points) {
            const auto dataset = sim::validate::load_dataset(root + p.dataset);
            const double cpu0 = cpu_seconds();
            const auto t0 = std::chrono::steady_clock::now();
            const auto report = sim::validate::validate(dataset, {});
            const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const double cpu = cpu_seconds() - cpu0;
            if (report.outcomes.empty() || report.outcomes.front().skipped)
                throw std::runtime_error(fmt::format("bench case '{}' was not simulated", p.label));
            const double rss = peak_rss_bytes();
            if (format == "json")
                out += fmt::format(
                    ",\n{{\"case\":\"{}\",\"gpus\":{},\"collapse\":true,\"wall_s\":{},\"cpu_s\":{},"
                    "\"events\":null,\"events_per_s\":null,\"peak_rss_bytes\":{}}}",
                    p.label, p.gpus, wall, cpu, rss);
            else
                out += fmt::format("{:<58} {:>8.3f} {:>8.3f} {:>12} {:>12} {:>12}\n", p.label, wall, cpu, "-", "-",
                                   sim::format_bytes(rss));
        }
    };
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const auto& c = cases[i];
        if (!c.collapse && !validate_done) validate_cases();
        std::vector<sim::config::Override> ov;
        for (const auto& s : c.sets) ov.push_back(sim::config::parse_override(s));
        const auto sc = sim::config::load_scenario(root + c.scenario, ov);
        sim::report::RunOptions options;
        options.collapse = c.collapse;
        const double cpu0 = cpu_seconds();
        const auto t0 = std::chrono::steady_clock::now();
        const auto run = sim::report::run_strategy(sc, sc.strategies.front(), options);
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double cpu = cpu_seconds() - cpu0;
        if (!run.metrics.feasible)
            throw std::runtime_error(fmt::format("bench case '{}' is not feasible: {}", c.label, run.metrics.note));
        const double events = static_cast<double>(run.metrics.events);
        const double rss = peak_rss_bytes();
        if (format == "json")
            out += fmt::format(
                "{}\n{{\"case\":\"{}\",\"gpus\":{},\"collapse\":{},\"wall_s\":{},\"cpu_s\":{},"
                "\"events\":{},\"events_per_s\":{},\"peak_rss_bytes\":{}}}",
                i ? "," : "", c.label, sc.gpus, c.collapse, wall, cpu, run.metrics.events, events / wall, rss);
        else
            out += fmt::format("{:<58} {:>8.3f} {:>8.3f} {:>12} {:>12.0f} {:>12}\n", c.label, wall, cpu,
                               run.metrics.events, events / wall, sim::format_bytes(rss));
    }
    if (!validate_done) validate_cases();
    if (format == "json") out += "\n]\n";
    fmt::print("{}", out);
    return 0;
}

}  // namespace

int bench_scale(const std::string& format) { return bench_scale_impl(format); }

// A plan search with 2 threads, k = 1 (the best plan): its wall and CPU
// time and counts (docs/planning.md). `which` is gpt3 (GPT-3 175B on 1024
// A100s, scenarios/plan-gpt3-175b-1024xa100.yaml, target < 60 s) or
// llama3-405b (Llama 3 405B on 16,384 H100s,
// scenarios/plan-llama3-405b-16384xh100.yaml, target < 5 min). `set`
// narrows the space for a quicker run (--set search.space.tp=[8]).
static int bench_plan(const std::string& format, const std::string& which, const std::vector<std::string>& set) {
    struct Case {
        const char *name, *file, *label, *json_case;
        double target_s;
    };
    static const Case cases[] = {
        {"gpt3", "plan-gpt3-175b-1024xa100.yaml", "GPT-3 175B on 1024 A100", "plan gpt3-175b 1024xA100", 60},
        {"llama3-405b", "plan-llama3-405b-16384xh100.yaml", "Llama 3 405B on 16384 H100", "plan llama3-405b 16384xH100",
         300},
    };
    const Case* c = nullptr;
    for (const auto& k : cases)
        if (which == k.name) c = &k;
    if (!c) throw UsageError(fmt::format("unknown plan case '{}' (expected gpt3 or llama3-405b)", which));
    std::vector<sim::config::Override> ov;
    for (const auto& s : set) ov.push_back(sim::config::parse_override(s));
    const auto sc = sim::config::load_scenario(std::string(sim::config::data_dir()) + "/scenarios/" + c->file, ov);
    sim::search::SearchOptions so;
    so.threads = 2;
    so.keep = 1;  // the question the target asks: the best plan
    if (isatty(STDERR_FILENO) != 0)
        so.progress = [](std::size_t done, std::size_t planned) {
            fmt::print(stderr, "\rsimulated {}/{} planned", done, planned);
        };
    const double cpu0 = cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    const auto res = sim::search::run_search(sc, so);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu = cpu_seconds() - cpu0;
    const std::string best =
        res.ranked.empty() ? std::string("none") : res.outcomes[res.ranked.front()].candidate.strategy.name;
    if (format == "json")
        fmt::print(
            "{{\"case\":{},\"threads\":2,\"wall_s\":{:.2f},\"cpu_s\":{:.2f},\"generated\":{},"
            "\"equivalent\":{},\"invalid\":{},\"over_memory\":{},\"pruned\":{},\"simulated\":{},\"best\":{}}}\n",
            sim::report::json_string(c->json_case), wall, cpu, res.generated, res.equivalent, res.invalid,
            res.over_memory, res.pruned, res.simulated, sim::report::json_string(best));
    else
        fmt::print("plan {} (2 threads): {:.1f} s wall, {:.1f} s CPU, target < {:g} s\n{}\nbest: {}\n", c->label, wall,
                   cpu, c->target_s, sim::search::counts_line(res), best);
    return 0;
}

int cmd_bench(const Args& args) {
    CommandLine cl({.command = "bench",
                    .input = "which",
                    .input_help = "engine | scale | serving | plan",
                    .missing_input = "a benchmark name: engine, scale, serving or plan",
                    .formats = {"table", "json"},
                    .output = false,
                    .limits = false});
    cl.add()("seed", po::value<std::uint64_t>()->default_value(1), "seed of the hold model's generator")(
        "repeat", po::value<int>()->default_value(3), "engine: runs per population; the best of each side is reported")(
        "case", po::value<std::string>()->default_value("gpt3"), "plan: gpt3 | llama3-405b");
    if (!cl.parse(args,
                  "  engine  the hold model at 10^3, 10^5 and 10^6 pending events vs std::priority_queue\n"
                  "  scale   whole simulations from 16 to 16,384 GPUs\n"
                  "  serving 10,000 requests of Llama 3 8B on one H100 (parasim serve)\n"
                  "  plan    a plan search, 2 threads: GPT-3 175B on 1024 A100s (--case gpt3) or\n"
                  "          Llama 3 405B on 16,384 H100s (--case llama3-405b)\n"))
        return 0;
    const auto& vm = cl.vm();
    const std::string& format = cl.format();
    const int repeat = cl.int_at_least("repeat", 1);
    const std::string& which = cl.input();
    if (which == "engine") return bench_engine(format, vm["seed"].as<std::uint64_t>(), repeat);
    if (which == "scale") return bench_scale(format);
    if (which == "serving") return bench_serving(format);
    if (which == "plan")
        return bench_plan(format, vm["case"].as<std::string>(),
                          vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{});
    throw UsageError(fmt::format("unknown benchmark '{}' (expected engine, scale, serving or plan)", which));
}

}  // namespace parasim_cli
