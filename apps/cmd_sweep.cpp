// parasim sweep SCENARIO: the cross product of the scenario's sweep block,
// simulated in parallel (oneTBB), reported in sweep order whatever the
// thread count.
#include "apps/cli.h"
#include "sim/config/scenario.h"
#include "sim/report/runner.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <unistd.h>

namespace po = boost::program_options;

namespace parasim_cli {

namespace {

std::string show(const YAML::Node& n) {
    if (n.IsScalar()) return n.Scalar();
    YAML::Emitter e;
    e << YAML::Flow << n;
    return e.c_str();
}

struct Point {
    std::vector<sim::config::Override> overrides;
    std::vector<std::string> labels;  // one per sweep field
    std::vector<sim::report::RunMetrics> runs;
    std::string error;  // the point's scenario could not be formed
};

std::vector<Point> cross_product(const std::vector<std::pair<std::string, std::vector<YAML::Node>>>& sweep) {
    std::vector<Point> points(1);
    for (const auto& [path, values] : sweep) {
        std::vector<Point> next;
        for (const auto& p : points)
            for (const auto& v : values) {
                Point q = p;
                q.overrides.push_back(sim::config::make_override(path, v));
                q.labels.push_back(show(v));
                next.push_back(std::move(q));
            }
        points = std::move(next);
    }
    return points;
}

void run_gnuplot(const std::string& dir, const std::string& script_name, const std::string& script) {
    const std::string path = dir + "/" + script_name;
    write_output(path, script);
    const std::string cmd = fmt::format("cd '{}' && gnuplot '{}' 2>&1", dir, script_name);
    if (std::system(cmd.c_str()) != 0) throw UsageError(fmt::format("gnuplot failed on {} (is gnuplot installed?)", path));
}

void write_plots(const std::string& dir, const sim::config::ScenarioSpec& base, const std::vector<Point>& points) {
    std::filesystem::create_directories(dir);
    const auto& sweep = base.sweep;
    // x axis: the 'gpus' field if swept, else the first field.
    std::size_t xf = 0;
    for (std::size_t i = 0; i < sweep.size(); ++i)
        if (sweep[i].first == "gpus") xf = i;
    const std::string xname = sweep.empty() ? "point" : sweep[xf].first;
    std::string dat, plot;
    for (std::size_t s = 0; s < base.strategies.size(); ++s) {
        dat += fmt::format("# strategy {}\n", base.strategies[s].name);
        for (const auto& p : points) {
            if (s >= p.runs.size() || !p.runs[s].tokens_per_s) continue;
            dat += fmt::format("{} {}\n", p.labels.empty() ? "0" : p.labels[xf], *p.runs[s].tokens_per_s);
        }
        dat += "\n\n";
        plot += fmt::format("{}'throughput.dat' index {} with linespoints title '{}'", s ? ", " : "", s,
                            base.strategies[s].name);
    }
    write_output(dir + "/throughput.dat", dat);
    run_gnuplot(dir, "throughput.gp",
                fmt::format("set terminal svg size 800,500\nset output 'throughput.svg'\nset title '{}: throughput'\n"
                            "set xlabel '{}'\nset ylabel 'tokens/s'\nset key left top\nset grid\nplot {}\n",
                            base.name, xname, plot.empty() ? "0 title 'no feasible point'" : plot));
    std::string bars = "label compute memory communication idle\n";
    for (const auto& p : points)
        for (const auto& r : p.runs) {
            if (!r.frac_compute) continue;
            std::string label = r.strategy;
            for (const auto& l : p.labels) label += "/" + l;
            bars += fmt::format("\"{}\" {} {} {} {}\n", label, *r.frac_compute, *r.frac_memory, *r.frac_communication,
                                *r.frac_idle);
        }
    write_output(dir + "/breakdown.dat", bars);
    run_gnuplot(dir, "breakdown.gp",
                fmt::format("set terminal svg size 1000,500\nset output 'breakdown.svg'\nset title '{}: where the time "
                            "goes'\nset style data histograms\nset style histogram rowstacked\nset style fill solid 0.8 "
                            "border -1\nset boxwidth 0.7\nset yrange [0:1]\nset ylabel 'fraction of wall time'\n"
                            "set xtics rotate by -30\nset key outside right\n"
                            "plot 'breakdown.dat' using 2:xtic(1) title columnheader(2), '' using 3 title "
                            "columnheader(3), '' using 4 title columnheader(4), '' using 5 title columnheader(5)\n",
                            base.name));
}

}  // namespace

int cmd_sweep(const Args& args) {
    po::options_description opts("parasim sweep SCENARIO [options]");
    opts.add_options()("help,h", "show this help")("format", po::value<std::string>()->default_value("table"),
                                                     "table | json | csv")(
        "output,o", po::value<std::string>()->default_value(""), "write the report to FILE (atomically)")(
        "set", po::value<std::vector<std::string>>()->composing(), "override a field: PATH=VALUE (repeatable)")(
        "threads", po::value<int>()->default_value(0), "worker threads (0: all cores)")(
        "plot", po::value<std::string>(), "write SVG plots (gnuplot) into DIR")(
        "scenario", po::value<std::string>(), "scenario file with a sweep: block");
    po::positional_options_description pos;
    pos.add("scenario", 1);
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
    if (vm.count("help")) {
        std::cout << opts << "\nThe scenario's sweep: block maps field paths to lists of values, e.g.\n"
                  << "  sweep:\n    gpus: [8, 12, 16]\n    workload.batch: [1, 16]\n";
        return 0;
    }
    if (!vm.count("scenario")) throw UsageError("sweep needs a scenario file (try 'parasim sweep --help')");
    const std::string format = vm["format"].as<std::string>();
    if (format != "table" && format != "json" && format != "csv")
        throw UsageError(fmt::format("--format must be table, json or csv, not '{}'", format));
    const int threads = vm["threads"].as<int>();
    if (threads < 0) throw UsageError("--threads must be >= 0");
    const std::string path = vm["scenario"].as<std::string>();
    std::vector<sim::config::Override> cli;
    if (vm.count("set"))
        for (const auto& s : vm["set"].as<std::vector<std::string>>()) cli.push_back(sim::config::parse_override(s));
    const auto base = sim::config::load_scenario(path, cli);
    if (base.sweep.empty()) throw UsageError(fmt::format("{} has no sweep: block", path));
    auto points = cross_product(base.sweep);
    // Every point is checked before any runs, so a bad value fails fast.
    std::vector<sim::config::ScenarioSpec> specs(points.size());
    for (std::size_t i = 0; i < points.size(); ++i) {
        auto ov = cli;
        ov.insert(ov.end(), points[i].overrides.begin(), points[i].overrides.end());
        specs[i] = sim::config::load_scenario(path, ov);
    }

    const bool progress = isatty(STDERR_FILENO) != 0;
    std::atomic<std::size_t> done{0};
    std::mutex progress_mutex;
    std::exception_ptr failure;
    std::mutex failure_mutex;
    {
        std::unique_ptr<tbb::global_control> limit;
        if (threads > 0)
            limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                          static_cast<std::size_t>(threads));
        tbb::parallel_for(std::size_t{0}, points.size(), [&](std::size_t i) {
            try {
                sim::report::RunOptions ro;
                ro.tolerate_unformable = true;
                for (const auto& r : sim::report::run_scenario(specs[i], ro)) points[i].runs.push_back(r.metrics);
            } catch (...) {
                std::lock_guard<std::mutex> lock(failure_mutex);
                if (!failure) failure = std::current_exception();
            }
            const std::size_t n = ++done;
            if (progress) {
                std::lock_guard<std::mutex> lock(progress_mutex);
                const int width = 40;
                const int filled = static_cast<int>(width * n / points.size());
                fmt::print(stderr, "\r[{}{}] {}/{}", std::string(static_cast<std::size_t>(filled), '#'),
                           std::string(static_cast<std::size_t>(width - filled), ' '), n, points.size());
                if (n == points.size()) fmt::print(stderr, "\n");
            }
        });
    }
    if (failure) std::rethrow_exception(failure);

    std::string text;
    std::vector<std::string> fields;
    for (const auto& f : base.sweep) fields.push_back(f.first);
    if (format == "json") {
        text = fmt::format("{{\"scenario\":{},\"points\":[", sim::report::json_string(base.name));
        for (std::size_t i = 0; i < points.size(); ++i) {
            text += fmt::format("{}\n{{\"set\":{{", i ? "," : "");
            for (std::size_t f = 0; f < fields.size(); ++f)
                text += fmt::format("{}{}:{}", f ? "," : "", sim::report::json_string(fields[f]),
                                    sim::report::json_string(points[i].labels[f]));
            text += "},\"runs\":[";
            for (std::size_t r = 0; r < points[i].runs.size(); ++r) {
                if (r) text += ",";
                text += sim::report::run_json(points[i].runs[r]);
            }
            text += "]}";
        }
        text += "\n]}\n";
    } else if (format == "csv") {
        std::vector<sim::report::RunMetrics> all;
        std::vector<std::vector<std::string>> extra;
        for (const auto& p : points)
            for (const auto& r : p.runs) {
                all.push_back(r);
                extra.push_back(p.labels);
            }
        text = sim::report::format_csv(all, fields, extra);
    } else {
        std::string header;
        for (const auto& f : fields) header += fmt::format("{:>16} ", f);
        text = fmt::format("sweep {} ({} points)\n{}{:<14} {:>9} {:>12} {:>10} {:>10} {:>12} {:>7}\n", base.name,
                           points.size(), header, "strategy", "feasible", "tokens/s", "TPOT ms", "TTFT ms",
                           "iteration ms", "MFU");
        auto cell = [](const std::optional<double>& v, const char* spec) {
            return v ? fmt::format(fmt::runtime(spec), *v) : std::string("-");
        };
        for (const auto& p : points)
            for (const auto& r : p.runs) {
                std::string line;
                for (const auto& l : p.labels) line += fmt::format("{:>16} ", l);
                text += fmt::format("{}{:<14} {:>9} {:>12} {:>10} {:>10} {:>12} {:>7}\n", line, r.strategy,
                                    r.feasible ? "yes" : "no", cell(r.tokens_per_s, "{:.1f}"), cell(r.tpot_ms, "{:.3f}"),
                                    cell(r.ttft_ms, "{:.2f}"), cell(r.iteration_ms, "{:.1f}"),
                                    r.mfu ? fmt::format("{:.1f}%", *r.mfu * 100) : std::string("-"));
            }
        for (const auto& p : points)
            for (const auto& r : p.runs)
                if (!r.feasible) {
                    std::string at;
                    for (std::size_t f = 0; f < fields.size(); ++f) at += fmt::format(" {}={}", fields[f], p.labels[f]);
                    text += fmt::format("{} at{}: {}\n", r.strategy, at, r.note);
                }
    }
    if (vm.count("plot")) write_plots(vm["plot"].as<std::string>(), base, points);
    write_output(vm["output"].as<std::string>(), text);
    return 0;
}

}  // namespace parasim_cli
