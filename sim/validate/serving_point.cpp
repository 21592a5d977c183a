// Serving points: reading and simulating them (see serving_point.h).
#include "sim/validate/serving_point.h"

#include "sim/config/run_details.h"
#include "sim/serve/serve_report.h"
#include "sim/serve/simulator.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>

namespace sim::validate {

namespace {

bool is_latency(Metric m) { return m == Metric::ttft_ms || m == Metric::tpot_ms || m == Metric::e2e_ms; }

// The largest length a distribution can give; 0 when it has no bound.
std::int64_t length_bound(const config::LengthSpec& l) {
    switch (l.kind) {
        case config::LengthDistribution::fixed: return l.value;
        case config::LengthDistribution::uniform:
        case config::LengthDistribution::lognormal: return l.max;
    }
    return 0;
}

// Every map and sequence of `n` in flow style, so that it fits on one line.
void flow_style(YAML::Node n) {
    if (!n.IsMap() && !n.IsSequence()) return;
    n.SetStyle(YAML::EmitterStyle::Flow);
    for (auto it = n.begin(); it != n.end(); ++it) flow_style(n.IsMap() ? it->second : *it);
}

}  // namespace

config::WorkloadSpec read_serving_workload(const config::Node& node, std::vector<std::string>& defaults,
                                           std::string& block) {
    config::MapReader r(node);
    config::WorkloadSpec w;
    w.mode = config::Mode::inference;
    w.precision = config::read_precision(r, false);
    const std::optional<config::Node> flash = r.optional("flash_attention"), attention = r.optional("attention");
    config::apply_attention(w, attention, flash);
    if (!flash && !attention) defaults.push_back("flash_attention=true");
    if (auto n = r.optional("moe")) config::read_moe(*n, w);  // parasim's extension, as a scenario has it
    const config::Node serving = r.required("serving");
    w.serving = config::read_serving(serving, node.file());
    {
        // The block as written, with a trace file's path made absolute: it
        // is read again beside a scenario file that may live elsewhere.
        YAML::Node copy = YAML::Clone(serving.yaml());
        if (w.serving->arrivals == config::ArrivalProcess::trace) copy["arrivals"]["file"] = w.serving->trace_file;
        flow_style(copy);
        YAML::Emitter e;
        e << copy;
        block = e.c_str();
    }
    // As the scenario loader sets a serving workload's static fields: the
    // plan's shapes come from each iteration, not from these.
    w.batch = 1;
    w.prompt_tokens = w.serving->max_tokens_per_iteration;
    w.output_tokens = 1;
    w.decode_steps_simulated = 0;
    r.finish();
    return w;
}

std::int64_t serving_max_seq(const config::ServingSpec& s) {
    if (s.arrivals == config::ArrivalProcess::trace) {
        std::int64_t longest = 0;
        for (const auto& t : s.trace) longest = std::max(longest, t.prompt_tokens + t.output_tokens);
        return longest;
    }
    const std::int64_t prompt = length_bound(s.prompt), output = length_bound(s.output);
    return prompt > 0 && output > 0 ? prompt + output : 0;
}

Statistic read_statistic(const std::optional<config::Node>& node, Metric metric, const config::Node& measured) {
    if (!is_latency(metric)) {
        if (node) node->fail(fmt::format("{} is a throughput over the run: no statistic", to_string(metric)));
        return Statistic::none;
    }
    if (!node)
        measured.fail(
            fmt::format("a serving latency ({}) needs 'statistic: p50 | p90 | p99 | mean'", to_string(metric)));
    const std::string v = node->as_enum({"p50", "p90", "p99", "mean"});
    return v == "p50" ? Statistic::p50 : v == "p90" ? Statistic::p90 : v == "p99" ? Statistic::p99 : Statistic::mean;
}

ServingValue simulate_serving_point(const Point& p, const Setup& s) {
    ServingValue out;
    const auto result = serve::simulate_serving(s.scenario, s.strategy, serve::ServeOptions{});
    const auto sum = serve::summarize(s.scenario, result);
    const config::ServingSpec& spec = *s.scenario.workload.serving;
    if (sum.measured == 0) {
        out.detail = "no request was measured (every request is in the warm-up)";
        return out;
    }
    out.detail = fmt::format(
        "{} replica{} of tp{}{}, {}, KV pool {} blocks of {}, mean batch {:.1f}, {} preemptions, "
        "{} measured requests{}, cluster {} (links of {})",
        result.replicas, result.replicas == 1 ? "" : "s", result.tp,
        result.prefill_replicas > 0 ? fmt::format(" ({} prefill)", result.prefill_replicas) : "",
        spec.scheduler->name(), result.pool.blocks, spec.block_size, sum.mean_batch, result.preemptions, sum.measured,
        sum.overloaded ? ", OVERLOADED" : "", s.scenario.cluster.name, s.link_source);
    const auto pick = [&](const serve::Percentiles& q) -> std::optional<double> {
        if (q.count == 0) return std::nullopt;
        switch (p.statistic) {
            case Statistic::p50: return q.p50;
            case Statistic::p90: return q.p90;
            case Statistic::p99: return q.p99;
            case Statistic::mean: return q.mean;
            case Statistic::none: break;
        }
        return std::nullopt;
    };
    switch (p.metric) {
        case Metric::tokens_per_s: out.value = sum.output_tokens_per_s; break;
        case Metric::tokens_per_s_per_gpu: out.value = sum.output_tokens_per_s / result.gpus; break;
        case Metric::requests_per_s: out.value = sum.requests_per_s; break;
        case Metric::ttft_ms: out.value = pick(sum.ttft_ms); break;
        case Metric::tpot_ms: out.value = pick(sum.tpot_ms); break;
        case Metric::e2e_ms: out.value = pick(sum.e2e_ms); break;
        default: break;
    }
    return out;
}

}  // namespace sim::validate
