// Simulating dataset points and summarising the errors (see validate.h).
#include "sim/validate/validate.h"

#include "sim/core/simulation.h"
#include "sim/exec/comm_tuning.h"
#include "sim/exec/executor.h"
#include "sim/hw/cost_model.h"
#include "sim/net/collective.h"
#include "sim/net/collective/i_collective.h"
#include "sim/net/flow_network.h"
#include "sim/net/topology.h"
#include "sim/parallel/plan.h"
#include "sim/report/metrics.h"
#include "sim/report/runner.h"
#include "sim/validate/serving_point.h"
#include "sim/validate/translate.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

namespace sim::validate {

namespace {

using parallel::Plan;
using parallel::Task;
using parallel::TaskKind;

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) out += sep;
        out += v[i];
    }
    return out;
}

// The point's kernels, one after another on the compute stream of GPU 0.
Time run_kernels(const Setup& s, const hw::CostModel& cm) {
    Plan plan;
    plan.simulated_gpus = {0};
    plan.streams.resize(1);
    plan.gpus_represented = 1;
    std::vector<std::uint32_t> prev;
    for (const auto& k : s.kernels) {
        Task t;
        t.kind = TaskKind::kernel;
        t.stream = parallel::StreamKind::compute;
        t.gpu = 0;
        t.kernel = plan.add_kernel(k);
        prev = {plan.add(t, prev)};
    }
    const net::Topology topo(s.scenario.cluster, 1);
    return exec::execute(plan, s.scenario.gpu, topo, cm).makespan;
}

// One collective over GPUs 0..n-1, every rank simulated (nccl-tests: the
// collective alone on an idle cluster).
Time run_collective(const Setup& s, const CollectiveSpec& c, const hw::CostModel& cm) {
    const int n = s.scenario.gpus;
    Plan plan;
    parallel::Group g;
    g.algorithm = c.algorithm;
    g.tokens = c.tokens;
    for (int i = 0; i < n; ++i) {
        plan.simulated_gpus.push_back(i);
        g.gpus.push_back(i);
        g.members.push_back(static_cast<std::uint32_t>(i));
    }
    plan.streams.resize(static_cast<std::size_t>(n));
    plan.gpus_represented = n;
    Task t;
    t.kind = TaskKind::collective;
    t.stream = parallel::StreamKind::dp_comm;
    t.group = plan.add_group(std::move(g));
    t.gpu = 0;
    t.op = c.op;
    t.bytes = c.bytes;
    plan.add(t, {});
    const net::Topology topo(s.scenario.cluster, n);
    exec::ExecOptions eo;
    eo.collectives = s.scenario.collectives;
    return exec::execute(plan, s.scenario.gpu, topo, cm, eo).makespan;
}

// The algorithm and protocol the collective runs with (as the executor's request resolves).
std::string collective_choice(const Setup& s, const CollectiveSpec& c) {
    const int n = s.scenario.gpus;
    const net::Topology topo(s.scenario.cluster, n);
    Simulation sim;
    net::FlowNetwork flows(sim, topo);
    const net::CollectiveEngine engine(sim, flows, topo);
    net::CollectiveRequest req = exec::make_request(s.scenario.gpu, s.scenario.cluster, *s.scenario.collectives);
    req.op = c.op;
    for (int i = 0; i < n; ++i) req.gpus.push_back(i);
    req.size = c.bytes;
    req.algorithm = c.algorithm;
    req.tokens = c.tokens;
    const auto choice = engine.choose(req);
    return choice.protocol.empty() ? choice.algorithm : choice.algorithm + "/" + choice.protocol;
}

std::optional<double> run_metric(const report::RunMetrics& m, Metric metric, int gpus) {
    switch (metric) {
        case Metric::iteration_s:
            if (m.iteration_ms) return *m.iteration_ms / 1e3;
            break;
        case Metric::tokens_per_s_per_gpu:
            if (m.tokens_per_s) return *m.tokens_per_s / gpus;
            break;
        case Metric::tokens_per_s: return m.tokens_per_s;
        case Metric::ttft_ms: return m.ttft_ms;
        case Metric::tpot_ms: return m.tpot_ms;
        default: break;
    }
    return std::nullopt;
}

Outcome simulate_point(const Point& p, config::GpuCatalog& catalog, const ShippedClusters& shipped,
                       const std::string& software_dir) {
    Outcome o;
    o.id = p.id;
    o.kind = p.kind;
    o.metric = p.metric;
    o.statistic = p.statistic;
    o.measured = p.measured;
    o.defaults = p.defaults;
    o.annotated = p.annotated;
    o.software = p.software.name;
    o.gpu = p.hardware.gpu;
    const auto skip = [&](std::string why) {
        o.skipped = true;
        o.reason = std::move(why);
        return o;
    };
    try {
        const Setup s = translate(p, catalog, shipped, software_dir);
        o.defaults = s.defaults;
        o.moe = s.scenario.model.experts > 0;
        if (s.skip) return skip(*s.skip);
        const auto cm = hw::make_cost_model("roofline");
        double value = 0;
        switch (p.kind) {
            case Kind::training:
            case Kind::inference: {
                report::RunOptions ro;
                ro.tolerate_unformable = true;
                const auto run = report::run_strategy(s.scenario, s.strategy, ro);
                const auto& m = run.metrics;
                if (!m.feasible) return skip("parasim cannot run it as published: " + m.note);
                const auto v = run_metric(m, p.metric, p.hardware.gpus);
                if (!v)
                    return skip(
                        fmt::format("the simulation does not produce {} for this workload", to_string(p.metric)));
                value = *v;
                const auto& r = m.resolved;
                o.detail = fmt::format("tp{} pp{} dp{}{}{}{}{}, {} micro-batches, cluster {} (links of {})", r.tp, r.pp,
                                       r.dp, r.cp > 1 ? fmt::format(" cp{}", r.cp) : "", r.sp ? " sp" : "",
                                       r.zero > 0 ? fmt::format(" zero{}", r.zero) : "",
                                       r.virtual_stages > 1 ? fmt::format(" v{}", r.virtual_stages) : "",
                                       r.microbatches, s.scenario.cluster.name, s.link_source);
                break;
            }
            case Kind::serving: {
                const ServingValue v = simulate_serving_point(p, s);
                if (!v.value)
                    return skip(v.detail.empty()
                                    ? fmt::format("the serving run does not produce {}", to_string(p.metric))
                                    : v.detail);
                value = *v.value;
                o.detail = v.detail;
                break;
            }
            case Kind::gemm:
            case Kind::attention: {
                value = run_kernels(s, *cm).seconds() * 1e6;
                std::vector<std::string> names;
                for (const auto& k : s.kernels) names.push_back(k.name);
                o.detail = join(names, " + ");
                break;
            }
            case Kind::memory: {
                const double t = run_kernels(s, *cm).seconds();
                value = p.memory.bytes.as_double() / t / 1e9;
                o.detail = s.kernels.front().name;
                break;
            }
            case Kind::collective: {
                const Time t = run_collective(s, p.collective, *cm);
                if (p.metric == Metric::time_us) {
                    value = t.seconds() * 1e6;
                } else if (p.metric == Metric::rdma_GBps) {
                    // DeepEP's count: each token once per node it reaches, its own node included.
                    const auto& k = p.collective.tokens;
                    const int nodes = std::max(1, p.hardware.gpus / s.scenario.cluster.gpus_per_node);
                    value =
                        p.collective.bytes.as_double() * net::nodes_per_token(k, nodes) / k.top_k / t.seconds() / 1e9;
                } else {
                    value = net::bus_bandwidth(p.collective.op, p.collective.bytes, p.hardware.gpus, t) / 1e9;
                }
                o.detail = fmt::format("{} over {} GPUs, {}, cluster {} (links of {})", net::to_string(p.collective.op),
                                       p.hardware.gpus, collective_choice(s, p.collective), s.scenario.cluster.name,
                                       s.link_source);
                break;
            }
        }
        o.simulated = value;
        o.error = (value - p.measured) / p.measured;
    } catch (const ModelError& e) {
        return skip(e.what());
    } catch (const ConfigError& e) {
        return skip(e.what());
    }
    return o;
}

// "ttft_ms p99" for a serving latency, the metric alone otherwise.
std::string metric_name(const Outcome& o) {
    std::string out = to_string(o.metric);
    if (o.statistic != Statistic::none) out.append(" ").append(to_string(o.statistic));
    return out;
}

std::string percent(double f) { return fmt::format("{:+.1f}%", f * 100); }

std::string number(double v) {
    if (v == 0) return "0";
    const double a = std::fabs(v);
    if (a >= 1e6 || a < 1e-3) return fmt::format("{:.4g}", v);
    return fmt::format("{:.{}f}", v, a >= 1000 ? 0 : a >= 100 ? 1 : a >= 10 ? 2 : 3);
}

}  // namespace

void summarise(Report& r) {
    r.kinds = {};
    r.all = {};
    std::array<double, kKindCount> sum{};
    double sum_all = 0;
    const auto add = [](KindSummary& k, const Outcome& o) {
        if (o.skipped) {
            ++k.skipped;
            return;
        }
        ++k.simulated;
        if (k.worst_id.empty() || std::fabs(o.error) > std::fabs(k.worst_error)) {
            k.worst_id = o.id;
            k.worst_error = o.error;
        }
    };
    for (const auto& o : r.outcomes) {
        const auto i = static_cast<std::size_t>(o.kind);
        add(r.kinds[i], o);
        add(r.all, o);
        if (!o.skipped) {
            sum[i] += std::fabs(o.error);
            sum_all += std::fabs(o.error);
        }
    }
    for (std::size_t i = 0; i < kKindCount; ++i)
        if (r.kinds[i].simulated > 0) r.kinds[i].mape = sum[i] / r.kinds[i].simulated;
    if (r.all.simulated > 0) r.all.mape = sum_all / r.all.simulated;

    std::map<std::pair<Kind, std::string>, std::pair<KindSummary, double>> stacks;
    for (const auto& o : r.outcomes) {
        if (o.kind != Kind::training && o.kind != Kind::inference && o.kind != Kind::serving) continue;
        auto& [k, total] = stacks[{o.kind, o.software.empty() ? "unstated" : o.software}];
        add(k, o);
        if (!o.skipped) total += std::fabs(o.error);
    }
    r.by_software.clear();
    for (auto& [key, value] : stacks) {
        auto& [k, total] = value;
        if (k.simulated > 0) k.mape = total / k.simulated;
        r.by_software.push_back({key.first, key.second, k});
    }
}

Report validate(const Dataset& d, const ValidateOptions& options) {
    Report r;
    r.dataset = d.file;
    r.annotations = options.annotations;
    std::vector<const Point*> todo;
    for (const auto& p : d.points) {
        if (!options.ids.empty() && std::find(options.ids.begin(), options.ids.end(), p.id) == options.ids.end())
            continue;
        if (!options.kinds.empty() &&
            std::find(options.kinds.begin(), options.kinds.end(), p.kind) == options.kinds.end())
            continue;
        todo.push_back(&p);
    }
    config::GpuCatalog catalog(options.gpu_dir.empty() ? config::default_gpu_dir() : options.gpu_dir,
                               options.attention_fit);
    const ShippedClusters shipped;
    r.outcomes.resize(todo.size());
    std::atomic<std::size_t> next{0};
    std::exception_ptr failure;
    std::mutex failure_mutex;
    const auto work = [&] {
        for (std::size_t i = next++; i < todo.size(); i = next++) {
            try {
                r.outcomes[i] = simulate_point(*todo[i], catalog, shipped, options.software_dir);
            } catch (...) {
                std::lock_guard<std::mutex> lock(failure_mutex);
                if (!failure) failure = std::current_exception();
            }
        }
    };
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    const std::size_t jobs =
        std::min<std::size_t>(todo.size(), options.jobs > 0 ? static_cast<std::size_t>(options.jobs) : hw);
    std::vector<std::thread> threads;
    for (std::size_t j = 1; j < jobs; ++j) threads.emplace_back(work);
    work();
    for (auto& t : threads) t.join();
    if (failure) std::rethrow_exception(failure);
    summarise(r);
    return r;
}

std::string format_table(const Report& r) {
    std::size_t wid = 2;
    for (const auto& o : r.outcomes) wid = std::max(wid, o.id.size());
    std::string out =
        fmt::format("validation of {}{} ({} points)\n\n", r.dataset,
                    r.annotations.empty() ? "" : fmt::format(" with annotations {}", r.annotations), r.outcomes.size());
    out += fmt::format("{:<{}}  {:<10}  {:<20}  {:>12}  {:>12}  {:>8}\n", "id", wid, "kind", "metric", "measured",
                       "simulated", "error");
    out += std::string(wid + 72, '-') + "\n";
    for (const auto& o : r.outcomes) {
        out += fmt::format("{:<{}}  {:<10}  {:<20}  {:>12}  {:>12}  {:>8}\n", o.id, wid, to_string(o.kind),
                           metric_name(o), number(o.measured), o.skipped ? "skipped" : number(o.simulated),
                           o.skipped ? "-" : percent(o.error));
    }
    out += fmt::format("\n{:<11}  {:>9}  {:>7}  {:>7}  {}\n", "kind", "simulated", "skipped", "MAPE", "worst point");
    out += std::string(72, '-') + "\n";
    const auto row = [&](const char* name, const KindSummary& k) {
        if (k.simulated == 0 && k.skipped == 0) return;
        out += fmt::format("{:<11}  {:>9}  {:>7}  {:>7}  {}\n", name, k.simulated, k.skipped,
                           k.mape ? fmt::format("{:.1f}%", *k.mape * 100) : "-",
                           k.worst_id.empty() ? "-" : fmt::format("{} ({})", k.worst_id, percent(k.worst_error)));
    };
    for (Kind k : kAllKinds) row(to_string(k), r.kinds[static_cast<std::size_t>(k)]);
    row("all", r.all);
    if (!r.by_software.empty()) {
        out += fmt::format("\n{:<28}  {:>9}  {:>7}  {:>7}  {}\n", "whole runs by software", "simulated", "skipped",
                           "MAPE", "worst point");
        out += std::string(89, '-') + "\n";
        for (const auto& st : r.by_software) {
            const auto& k = st.summary;
            out += fmt::format("{:<28}  {:>9}  {:>7}  {:>7}  {}\n",
                               fmt::format("{} / {}", to_string(st.kind), st.software), k.simulated, k.skipped,
                               k.mape ? fmt::format("{:.1f}%", *k.mape * 100) : "-",
                               k.worst_id.empty() ? "-" : fmt::format("{} ({})", k.worst_id, percent(k.worst_error)));
        }
    }
    bool any = false;
    for (const auto& o : r.outcomes)
        if (o.skipped) {
            if (!any) out += "\nskipped (not simulated, not in the MAPE):\n";
            any = true;
            out += fmt::format("  {}: {}\n", o.id, o.reason);
        }
    any = false;
    for (const auto& o : r.outcomes)
        if (!o.defaults.empty()) {
            if (!any) out += "\ndefaults applied (the source did not state these fields):\n";
            any = true;
            out += fmt::format("  {}: {}\n", o.id, join(o.defaults));
        }
    any = false;
    for (const auto& o : r.outcomes)
        if (!o.annotated.empty()) {
            if (!any) out += fmt::format("\nannotated (stated by {}, not by the dataset):\n", r.annotations);
            any = true;
            out += fmt::format("  {}: {}\n", o.id, join(o.annotated));
        }
    return out;
}

std::string format_json(const Report& r) {
    using report::json_number;
    using report::json_string;
    std::string out = "{\"dataset\":" + json_string(r.dataset);
    if (!r.annotations.empty()) out += ",\"annotations\":" + json_string(r.annotations);
    out += ",\"points\":[";
    for (std::size_t i = 0; i < r.outcomes.size(); ++i) {
        const auto& o = r.outcomes[i];
        if (i) out += ',';
        out += fmt::format("{{\"id\":{},\"kind\":{},\"metric\":{},\"measured\":{},\"simulated\":{},\"error\":{}",
                           json_string(o.id), json_string(to_string(o.kind)), json_string(to_string(o.metric)),
                           json_number(o.measured), o.skipped ? "null" : json_number(o.simulated),
                           o.skipped ? "null" : json_number(o.error));
        if (o.statistic != Statistic::none) out += ",\"statistic\":" + json_string(to_string(o.statistic));
        if (o.skipped) out += ",\"skipped\":" + json_string(o.reason);
        if (!o.detail.empty()) out += ",\"detail\":" + json_string(o.detail);
        if (!o.software.empty()) out += ",\"software\":" + json_string(o.software);
        out += ",\"gpu\":" + json_string(o.gpu);
        if (o.moe) out += ",\"moe\":true";
        const auto strings = [&](const std::vector<std::string>& v) {
            std::string list = "[";
            for (std::size_t j = 0; j < v.size(); ++j) {
                if (j) list += ',';
                list += json_string(v[j]);
            }
            list += ']';
            return list;
        };
        out += ",\"defaults\":" + strings(o.defaults);
        if (!o.annotated.empty()) out += ",\"annotated\":" + strings(o.annotated);
        out += '}';
    }
    out += "],\"mape\":{\"all\":" + json_number(r.all.mape);
    for (Kind k : kAllKinds)
        out += fmt::format(",{}:{}", json_string(to_string(k)), json_number(r.kinds[static_cast<std::size_t>(k)].mape));
    out += "},\"worst\":{";
    bool first = true;
    for (Kind k : kAllKinds) {
        const auto& s = r.kinds[static_cast<std::size_t>(k)];
        if (s.worst_id.empty()) continue;
        out += fmt::format("{}{}:{{\"id\":{},\"error\":{}}}", first ? "" : ",", json_string(to_string(k)),
                           json_string(s.worst_id), json_number(s.worst_error));
        first = false;
    }
    out += "},\"counts\":{";
    for (std::size_t i = 0; i < kKindCount; ++i) {
        const auto& s = r.kinds[i];
        out += fmt::format("{}{}:{{\"simulated\":{},\"skipped\":{}}}", i ? "," : "",
                           json_string(to_string(kAllKinds[i])), s.simulated, s.skipped);
    }
    out += fmt::format(",\"all\":{{\"simulated\":{},\"skipped\":{}}}}}", r.all.simulated, r.all.skipped);
    out += ",\"by_software\":[";
    for (std::size_t i = 0; i < r.by_software.size(); ++i) {
        const auto& st = r.by_software[i];
        out += fmt::format("{}{{\"kind\":{},\"software\":{},\"simulated\":{},\"skipped\":{},\"mape\":{}}}",
                           i ? "," : "", json_string(to_string(st.kind)), json_string(st.software),
                           st.summary.simulated, st.summary.skipped, json_number(st.summary.mape));
    }
    out += "]}\n";
    return out;
}

}  // namespace sim::validate
