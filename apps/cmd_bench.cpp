// parasim bench: speed benchmarks (targets live here, not in timed tests).
#include "apps/cli.h"
#include "sim/core/hold_bench.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include <iostream>

namespace po = boost::program_options;

namespace parasim_cli {

namespace {

int bench_engine(const std::string& format, std::uint64_t seed) {
    struct Case {
        std::uint64_t pending, events;
    };
    const Case cases[] = {{1000, 20'000'000}, {100'000, 10'000'000}, {1'000'000, 10'000'000}};
    std::string out;
    if (format == "json") out += "[";
    else out += fmt::format("{:>10} {:>12} {:>18} {:>20} {:>8}\n", "pending", "events", "events/s", "baseline events/s", "speedup");
    bool first = true;
    for (const Case& c : cases) {
        const auto r = sim::run_hold_benchmark(c.pending, c.events, seed);
        if (r.engine_checksum != r.baseline_checksum) throw std::runtime_error("hold model: engine and baseline disagree");
        if (format == "json") {
            out += fmt::format("{}\n{{\"pending\":{},\"events_per_s\":{:.0f},\"baseline_events_per_s\":{:.0f}}}",
                               first ? "" : ",", c.pending, r.engine_events_per_s, r.baseline_events_per_s);
        } else {
            out += fmt::format("{:>10} {:>12} {:>18.0f} {:>20.0f} {:>7.2f}x\n", c.pending, c.events,
                               r.engine_events_per_s, r.baseline_events_per_s,
                               r.engine_events_per_s / r.baseline_events_per_s);
        }
        first = false;
    }
    if (format == "json") out += "\n]\n";
    fmt::print("{}", out);
    return 0;
}

}  // namespace

int cmd_bench(const Args& args) {
    po::options_description opts("parasim bench engine|scale [options]");
    opts.add_options()("help,h", "show this help")("format", po::value<std::string>()->default_value("table"),
                                                     "table | json")(
        "seed", po::value<std::uint64_t>()->default_value(1), "seed of the hold model's generator")(
        "which", po::value<std::string>(), "engine | scale");
    po::positional_options_description pos;
    pos.add("which", 1);
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
    if (vm.count("help")) {
        std::cout << opts << "\n  engine  the hold model at 10^3, 10^5 and 10^6 pending events vs std::priority_queue\n"
                  << "  scale   whole simulations from 16 to 16,384 GPUs\n";
        return 0;
    }
    const std::string format = vm["format"].as<std::string>();
    if (format != "table" && format != "json") throw UsageError(fmt::format("--format must be table or json, not '{}'", format));
    if (!vm.count("which")) throw UsageError("bench needs a benchmark name: engine or scale");
    const std::string which = vm["which"].as<std::string>();
    if (which == "engine") return bench_engine(format, vm["seed"].as<std::uint64_t>());
    if (which == "scale") return bench_scale(format);
    throw UsageError(fmt::format("unknown benchmark '{}' (expected engine or scale)", which));
}

}  // namespace parasim_cli
