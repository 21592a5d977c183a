// parasim plan SCENARIO: the best parallel plans of a scenario's search:
// block by simulation (sim/search/, docs/planning.md): the counts, the
// ranked top N with run's metrics, the Pareto front, why the winner wins,
// JSON / CSV / SVG, and --explain ID, a runnable scenario for one candidate.
#include "apps/cli.h"
#include "apps/command_line.h"
#include "apps/scaleout.h"
#include "sim/config/scenario.h"
#include "sim/report/runner.h"
#include "sim/search/search.h"

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

namespace po = boost::program_options;

namespace parasim_cli {

namespace {

using sim::search::Outcome;
using sim::search::SearchResult;

bool training_of(const sim::config::ScenarioSpec& sc) { return sc.workload.mode == sim::config::Mode::training; }

// The Pareto front among plans meeting every constraint: training trades
// tokens/s (more is better) against memory per GPU (less is better);
// inference the objective (throughput, more is better) against TPOT (less
// is better): TTFT against TPOT alone has one point, batch 1 wins both.
// Ids by the first axis.
std::vector<std::size_t> pareto_front(const SearchResult& res, bool training) {
    struct P {
        std::size_t id;
        double a, b;  // both "less is better"
    };
    std::vector<P> pts;
    for (const auto id : res.ranked) {
        const auto& m = *res.outcomes[id].metrics;
        if (training) pts.push_back({id, -m.tokens_per_s.value_or(0), res.outcomes[id].memory_bytes});
        else if (m.tpot_ms) pts.push_back({id, -*res.outcomes[id].value, *m.tpot_ms});
    }
    std::stable_sort(pts.begin(), pts.end(),
                     [](const P& x, const P& y) { return x.a < y.a || (x.a == y.a && x.b < y.b); });
    std::vector<std::size_t> out;
    double best_b = 0;
    for (const auto& p : pts)
        if (out.empty() || p.b < best_b) {
            out.push_back(p.id);
            best_b = p.b;
        }
    return out;
}

std::string objective_cell(const sim::search::SearchSpec& spec, double v) {
    switch (spec.objective) {
        case sim::search::Objective::tokens_per_s: return fmt::format("{:.1f} tok/s", v);
        case sim::search::Objective::tokens_per_s_per_gpu: return fmt::format("{:.1f} tok/s/GPU", v);
        case sim::search::Objective::cost: return fmt::format("${:.4f}/Mtok", -v);
        case sim::search::Objective::time_to_budget: return fmt::format("{:.2f} days", -v / 86400.0);
    }
    return "";
}

// The family of a plan: its (tp, pp) shape, the axis a user trades.
std::string family(const Outcome& o) {
    return fmt::format("tp{}xpp{}", o.metrics->resolved.tp, o.metrics->resolved.pp);
}

std::string why_winner(const SearchResult& res) {
    if (res.ranked.empty()) return "";
    const Outcome& win = res.outcomes[res.ranked.front()];
    std::vector<std::pair<std::string, const Outcome*>> cols{{"winner", &win}};
    if (res.ranked.size() > 1) cols.emplace_back("runner-up", &res.outcomes[res.ranked[1]]);
    for (const auto id : res.ranked)
        if (family(res.outcomes[id]) != family(win)) {
            cols.emplace_back("best " + family(res.outcomes[id]), &res.outcomes[id]);
            break;
        }
    std::string t = "\nWhy the winner wins (ms of the simulated wall time, per GPU):\n";
    t += fmt::format("{:<16}", "");
    for (const auto& [label, o] : cols) t += fmt::format(" {:>24}", label);
    t += "\n" + fmt::format("{:<16}", "plan");
    for (const auto& [label, o] : cols) t += fmt::format(" {:>24}", o->candidate.strategy.name.substr(0, 24));
    t += "\n";
    const auto row = [&](const char* name, auto get) {
        t += fmt::format("{:<16}", name);
        for (const auto& [label, o] : cols) {
            const auto& m = *o->metrics;
            const double wall = m.simulated_seconds * 1e3;
            const auto v = get(m, wall);
            t += fmt::format(" {:>24}", v ? fmt::format("{:.1f}", *v) : std::string("-"));
        }
        t += "\n";
    };
    using M = sim::report::RunMetrics;
    const auto part = [](const std::optional<double>& f, double wall) {
        return f ? std::optional<double>(*f * wall) : std::nullopt;
    };
    row("compute", [&](const M& m, double w) { return part(m.frac_compute, w); });
    row("memory-bound", [&](const M& m, double w) { return part(m.frac_memory, w); });
    row("communication", [&](const M& m, double w) { return part(m.frac_communication, w); });
    row("idle (bubbles)", [&](const M& m, double w) { return part(m.frac_idle, w); });
    row("wall", [&](const M&, double w) { return std::optional<double>(w); });
    row("memory GB", [&](const M& m, double) { return std::optional<double>(m.memory.breakdown.total() / 1e9); });
    return t;
}

using sim::search::counts_line;

std::string format_report(const sim::config::ScenarioSpec& sc, const SearchResult& res, int top, double wall_s) {
    const bool training = training_of(sc);
    std::string t =
        fmt::format("plan {}: objective {}, GPU counts", sc.name, sim::search::to_string(res.spec.objective));
    for (const int g : res.spec.gpus) t += fmt::format(" {}", g);
    t += "\n" + counts_line(res) + "\n\n";
    t += fmt::format("{:>4} {:>7} {:<44} {:>5} {:>22} {:>12} {:>10}\n", "rank", "id", "plan", "GPUs", "objective",
                     training ? "iter ms" : "TPOT ms", training ? "bound ms" : "TTFT ms");
    std::vector<sim::report::RunMetrics> runs;
    for (std::size_t r = 0; r < res.ranked.size() && r < static_cast<std::size_t>(top); ++r) {
        const auto& o = res.outcomes[res.ranked[r]];
        const auto& m = *o.metrics;
        t += fmt::format(
            "{:>4} {:>7} {:<44} {:>5} {:>22} {:>12} {:>10}\n", r + 1, o.candidate.id, o.candidate.strategy.name,
            o.candidate.gpus, objective_cell(res.spec, *o.value),
            training ? fmt::format("{:.1f}", m.iteration_ms.value_or(0)) : fmt::format("{:.2f}", m.tpot_ms.value_or(0)),
            training ? fmt::format("{:.1f}", o.bound_s * 1e3) : fmt::format("{:.1f}", m.ttft_ms.value_or(0)));
        runs.push_back(m);
    }
    t += "\nThe top plans as `parasim run` reports them:\n";
    t += sim::report::format_table(sc, runs);
    const auto front = pareto_front(res, training);
    t += training ? "\nPareto front (tokens/s vs memory per GPU):\n" : "\nPareto front (objective vs TPOT):\n";
    for (const auto id : front) {
        const auto& o = res.outcomes[id];
        const auto& m = *o.metrics;
        t += training ? fmt::format("  #{:<7} {:<44} {:>12.1f} tok/s {:>8.1f} GB\n", id, o.candidate.strategy.name,
                                    m.tokens_per_s.value_or(0), o.memory_bytes / 1e9)
                      : fmt::format("  #{:<7} {:<44} {:>22}  TPOT {:>8.2f} ms  TTFT {:>9.1f} ms\n", id,
                                    o.candidate.strategy.name, objective_cell(res.spec, *o.value),
                                    m.tpot_ms.value_or(0), m.ttft_ms.value_or(0));
    }
    t += why_winner(res);
    (void)wall_s;
    t += "\n`parasim plan SCENARIO --explain ID` prints a runnable scenario for any candidate.\n";
    return t;
}

std::string format_plan_json(const sim::config::ScenarioSpec& sc, const SearchResult& res, int top) {
    std::string t = fmt::format(
        "{{\"scenario\":{},\"objective\":{},\"counts\":{{\"generated\":{},\"equivalent\":{},"
        "\"invalid\":{},\"over_memory\":{},\"pruned\":{},\"simulated\":{},\"feasible\":{}}},"
        "\"ranked\":[",
        sim::report::json_string(sc.name), sim::report::json_string(sim::search::to_string(res.spec.objective)),
        res.generated, res.equivalent, res.invalid, res.over_memory, res.pruned, res.simulated, res.ranked.size());
    for (std::size_t r = 0; r < res.ranked.size() && r < static_cast<std::size_t>(top); ++r) {
        const auto& o = res.outcomes[res.ranked[r]];
        t += fmt::format(
            "{}\n{{\"rank\":{},\"id\":{},\"gpus\":{},\"objective\":{},\"bound_s\":{},\"memory_bytes\":{},"
            "\"run\":{}}}",
            r ? "," : "", r + 1, o.candidate.id, o.candidate.gpus, sim::report::json_number(*o.value),
            sim::report::json_number(o.bound_s), sim::report::json_number(o.memory_bytes),
            sim::report::run_json(*o.metrics));
    }
    t += "\n],\"pareto\":[";
    const auto front = pareto_front(res, training_of(sc));
    for (std::size_t i = 0; i < front.size(); ++i) t += fmt::format("{}{}", i ? "," : "", front[i]);
    return t + "]}\n";
}

std::string format_plan_csv(const SearchResult& res) {
    std::vector<sim::report::RunMetrics> runs;
    std::vector<std::vector<std::string>> extra;
    for (std::size_t r = 0; r < res.ranked.size(); ++r) {
        const auto& o = res.outcomes[res.ranked[r]];
        runs.push_back(*o.metrics);
        extra.push_back({std::to_string(r + 1), std::to_string(o.candidate.id), sim::report::json_number(*o.value),
                         sim::report::json_number(o.bound_s), sim::report::json_number(o.memory_bytes)});
    }
    return sim::report::format_csv(runs, {"rank", "id", "objective", "bound_s", "memory_bytes"}, extra);
}

void add_front_plot(const std::string& dir, const sim::config::ScenarioSpec& sc, const SearchResult& res,
                    OutputSet& outputs) {
    using sim::report::gnuplot_string;
    const bool training = training_of(sc);
    std::string dat, labels;
    for (const auto id : pareto_front(res, training)) {
        const auto& o = res.outcomes[id];
        const auto& m = *o.metrics;
        const double x = training ? o.memory_bytes / 1e9 : m.tpot_ms.value_or(0);
        const double y = training ? m.tokens_per_s.value_or(0) : *o.value;
        dat += fmt::format("{} {}\n", x, y);
        labels +=
            fmt::format("set label {} at {},{} offset 1,0 font ',9'\n", gnuplot_string("#" + std::to_string(id)), x, y);
    }
    const std::string gp = fmt::format(
        "set terminal svg size 800,500 noenhanced\nset output 'front.svg'\nset title {}\nset xlabel {}\nset ylabel {}\n"
        "set grid\n{}plot 'front.dat' using 1:2 with linespoints pt 7 title {}\n",
        gnuplot_string(sc.name + ": Pareto front"), gnuplot_string(training ? "memory per GPU (GB)" : "TPOT (ms)"),
        gnuplot_string(training ? "tokens/s" : sim::search::to_string(res.spec.objective)), labels,
        gnuplot_string("plans on the front"));
    std::string work = (std::filesystem::temp_directory_path() / "parasim-plan-XXXXXX").string();
    if (!mkdtemp(work.data())) throw UsageError(fmt::format("--plot: cannot create {}", work));
    const CleanupOnSignal watch_folder(work, true);
    std::vector<std::unique_ptr<CleanupOnSignal>> watch;
    for (const char* name : {"gnuplot.log", "front.svg", "front.dat", "front.gp"})
        watch.push_back(std::make_unique<CleanupOnSignal>(work + "/" + name));
    std::string svg;
    try {
        std::ofstream(std::filesystem::path(work) / "front.dat") << dat;
        std::ofstream(std::filesystem::path(work) / "front.gp") << gp;
        run_gnuplot(work, "front.gp");
        std::ifstream in(std::filesystem::path(work) / "front.svg", std::ios::binary);
        std::stringstream text;
        text << in.rdbuf();
        svg = text.str();
    } catch (...) {
        std::filesystem::remove_all(work);
        throw;
    }
    std::filesystem::remove_all(work);
    outputs.add_directory(dir);
    outputs.add(dir + "/front.dat", dat);
    outputs.add(dir + "/front.gp", gp);
    outputs.add(dir + "/front.svg", svg);
}

// A runnable scenario for candidate `id`: the scenario file with its search:
// and sweep: blocks removed, the GPU count and workload knobs of the
// candidate, and one strategy (the first strategy's other fields kept).
std::string explain(const std::string& path, const sim::config::ScenarioSpec& sc, std::size_t id, bool with_overrides) {
    const auto spec = sim::search::read_search(sc);
    const auto cands = sim::search::enumerate(sc, spec);
    if (id >= cands.size())
        throw UsageError(fmt::format("--explain {}: the search has candidates 0 to {}", id, cands.size() - 1));
    const auto& c = cands[id];
    YAML::Node root = YAML::Clone(sim::config::load_file(path).yaml());
    root.remove("search");
    root.remove("sweep");
    root["gpus"] = c.gpus;
    if (training_of(sc)) {
        root["workload"]["micro_batch"] = c.micro_batch;
        root["workload"]["recompute"] = sim::search::to_string(c.recompute);
    } else {
        root["workload"]["batch"] = c.batch;
    }
    YAML::Node st = YAML::Clone(root["strategies"][0]);
    st.remove("partition");
    st.remove("microbatches");
    const auto& s = c.strategy;
    const auto degree = [](int v) {
        return v == sim::config::StrategySpec::kAuto ? std::string("auto") : std::to_string(v);
    };
    st["name"] = s.name;
    st["tp"] = s.tp;
    st["cp"] = s.cp;
    if (s.pp != sim::config::StrategySpec::kUnset) st["pp"] = degree(s.pp);
    if (s.dp != sim::config::StrategySpec::kUnset) st["dp"] = degree(s.dp);
    st["sp"] = s.sp;
    st["zero"] = s.zero;
    st["schedule"] = std::string(s.schedule->name());
    if (s.schedule->uses_virtual_stages()) st["virtual_stages"] = s.virtual_stages;
    else st.remove("virtual_stages");
    for (const auto& [key, v] : {std::pair<const char*, int>{"first_stage_layers", s.first_stage_layers},
                                 std::pair<const char*, int>{"last_stage_layers", s.last_stage_layers}}) {
        if (v > 0) st[key] = v;
        else st.remove(key);
    }
    YAML::Node list(YAML::NodeType::Sequence);
    list.push_back(st);
    root["strategies"] = list;
    YAML::Emitter e;
    e << root;
    return fmt::format(
        "# candidate #{} of `parasim plan {}` (run it with `parasim run`; relative paths resolve\n"
        "# beside the file it is saved in){}\n{}\n",
        id, path, with_overrides ? "\n# the --set options given to plan are not written here: give them to run" : "",
        e.c_str());
}

}  // namespace

int cmd_plan(const Args& args) {
    CommandLine cl({"plan", "scenario", "scenario file with a search: block", "a scenario file", {}});
    cl.add()("top", po::value<int>()->default_value(5), "plans to rank and keep (the k of the bound)")(
        "threads", po::value<int>()->default_value(0),
        "worker threads (0: all cores; rank 0's under MPI, where 0 means 1)")(
        "no-prune", "simulate every candidate that fits memory (exhaustive; for checking the bound)")(
        "json", po::value<std::string>(), "write the ranked plans as JSON to FILE")(
        "csv", po::value<std::string>(), "write every plan meeting the constraints as CSV to FILE")(
        "plot", po::value<std::string>(), "write the Pareto front as SVG (gnuplot) into DIR")(
        "explain", po::value<std::size_t>(), "print a runnable scenario for candidate ID and exit");
    if (!cl.parse(args,
                  "The scenario's search: block names the space, constraints and objective "
                  "(docs/planning.md), e.g.\n  search:\n    space: {tp: auto, pp: auto, micro_batch: [1, 2]}\n"))
        return 0;
    const auto& vm = cl.vm();
    const int top = cl.int_at_least("top", 1);
    const int threads = cl.int_at_least("threads", 0);
    const std::string& path = cl.input();
    const std::vector<sim::config::Override> cli = cl.overrides();
    const auto sc = sim::config::load_scenario(path, cli);
    if (!sc.search) throw UsageError(fmt::format("{} has no search: block (docs/planning.md)", path));
    ScaleOut scale;  // MPI ranks, when started by mpirun or srun
    if (vm.count("explain")) {
        if (scale.reports()) fmt::print("{}", explain(path, sc, vm["explain"].as<std::size_t>(), !cli.empty()));
        return 0;
    }

    sim::search::SearchOptions so;
    so.prune = !vm.count("no-prune");
    so.keep = top;
    so.threads = threads;
    so.executor = [&scale, threads](sim::search::OrderedWork& work) { return scale.run(work, threads); };
    if (isatty(STDERR_FILENO) != 0 && scale.reports())
        so.progress = [](std::size_t done, std::size_t planned) {
            fmt::print(stderr, "\rsimulated {}/{} planned", done, planned);
        };
    const auto start = std::chrono::steady_clock::now();
    const auto res = sim::search::run_search(sc, so);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!res.complete) return 0;  // a helper rank: rank 0 reports
    if (so.progress) fmt::print(stderr, "\n");
    if (res.ranked.empty()) throw sim::ConfigError(sc.search->location(), sim::search::no_plan_message(res));

    OutputSet outputs;
    std::string plot_failure;
    if (vm.count("plot")) {
        try {
            add_front_plot(vm["plot"].as<std::string>(), sc, res, outputs);
        } catch (const PlotError& e) {
            plot_failure = e.what();
            outputs = OutputSet{};
        }
    }
    if (vm.count("json")) outputs.add(vm["json"].as<std::string>(), format_plan_json(sc, res, top));
    if (vm.count("csv")) outputs.add(vm["csv"].as<std::string>(), format_plan_csv(res));
    outputs.add(cl.output(), format_report(sc, res, top, wall));
    outputs.commit();
    if (!plot_failure.empty()) throw UsageError(plot_failure + " (the report was written; no plot files)");
    return 0;
}

}  // namespace parasim_cli
