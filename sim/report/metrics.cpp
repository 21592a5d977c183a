// Metrics from an executed plan (definitions in docs/output.md).
#include "sim/report/metrics.h"

#include "sim/report/exchange_time.h"

#include <algorithm>
#include <numeric>

namespace sim::report {

RunMetrics compute_metrics(const config::ScenarioSpec& sc, const parallel::PlanBuild& build,
                           const exec::ExecResult* exec) {
    RunMetrics r;
    r.strategy = build.spec.name;
    r.gpus = sc.gpus;
    r.memory = build.memory;
    r.memory_stage = build.memory_stage;
    r.resolved = build.strategy;
    r.note = build.strategy.partition_note;
    if (build.memory.oom || exec == nullptr) {
        r.feasible = false;
        r.note = build.memory.explanation + (r.note.empty() ? "" : "; " + r.note);
        return r;
    }
    const auto& ex = *exec;
    const double wall = ex.makespan.seconds();
    r.simulated_seconds = wall;
    r.events = ex.events;
    const double nsim = static_cast<double>(ex.gpus.size());
    const double represent = static_cast<double>(sc.gpus) / nsim;  // real GPUs per simulated GPU

    const double peak = sc.gpu.peak_of(sc.workload.precision.compute).per_s;
    const auto& links = sc.cluster.links;
    if (links[0]) r.link_nvlink = ex.link_class_utilization[0];
    if (links[1]) r.link_pcie = ex.link_class_utilization[1];
    if (links[2] && sc.cluster.inter_node != net::InterNode::none) r.link_network = ex.link_class_utilization[2];

    // Each metric covers the whole run. Training: the simulated iteration.
    // Inference: the prefill, plus the last simulated decode step (steady
    // state, at mid-generation context) standing for each of the remaining
    // output_tokens - 1 steps.
    // Per task (inference only; empty: every task weighs 1, and 1.0 * x is
    // x exactly, so training skips an array of the plan's size).
    std::vector<double> weight;
    struct Window {
        Time from, to;
        double scale;
    };
    std::vector<Window> windows;
    double total = wall;
    if (sc.workload.mode == config::Mode::training) {
        windows.push_back({Time{}, ex.makespan, 1.0});
        r.iteration_ms = wall * 1e3;
        r.tokens_per_s = build.tokens_per_iteration / wall;
        r.mfu = build.model_flops / (wall * sc.gpus * peak);
    } else {
        const int m = build.strategy.microbatches;
        const int steps = build.decode_steps;
        const auto& mk = build.plan.markers;
        Time ttft{};
        for (int j = 0; j < m; ++j) ttft = std::max(ttft, ex.task_end[mk[static_cast<std::size_t>(j)]]);
        r.ttft_ms = ttft.seconds() * 1e3;
        windows.push_back({Time{}, ttft, 1.0});
        total = ttft.seconds();
        const double out_tokens = static_cast<double>(sc.workload.output_tokens);
        weight.resize(build.plan.tasks.size());
        for (std::size_t t = 0; t < build.plan.tasks.size(); ++t) {
            const auto& task = build.plan.tasks[t];
            weight[t] = task.phase == parallel::Phase::prefill ? 1.0 : task.step == steps - 1 ? out_tokens - 1 : 0.0;
        }
        if (steps >= 2) {
            auto end = [&](int k, int j) { return ex.task_end[mk[static_cast<std::size_t>(m + k * m + j)]]; };
            double period = 0;
            for (int j = 0; j < m; ++j) period += (end(steps - 1, j) - end(steps - 2, j)).seconds();
            period /= m;
            r.tpot_ms = period * 1e3;
            total = ttft.seconds() + (out_tokens - 1) * period;
            r.tokens_per_s = static_cast<double>(sc.workload.batch) * out_tokens / total;
            r.inv_tps_ms = 1e3 / *r.tokens_per_s;
            const Time a = end(steps - 2, 0), b = end(steps - 1, 0);
            if (b > a) windows.push_back({a, b, (out_tokens - 1) * period / (b - a).seconds()});
        }
    }

    double l2_req = 0, l2_hit = 0, hbm = 0, flops = 0;
    for (std::size_t t = 0; t < ex.kernel_stats_index.size(); ++t) {
        const auto& k = ex.kernel_stats_of(t);
        const double w = weight.empty() ? 1.0 : weight[t];
        l2_req += w * k.l2_requested_bytes;
        l2_hit += w * k.l2_hit_bytes;
        hbm += w * k.hbm_bytes;
        flops += w * k.flops;
    }
    exec::TimeBreakdown sum;
    for (std::uint32_t g = 0; g < ex.gpus.size(); ++g)
        for (const auto& w : windows) {
            // The whole run's breakdown is the executor's own (same arithmetic).
            const auto b = w.from == Time{} && w.to == ex.makespan
                               ? ex.gpus[g].breakdown
                               : exec::breakdown_in(build.plan, ex, g, w.from, w.to);
            sum.compute += b.compute * w.scale;
            sum.memory += b.memory * w.scale;
            sum.communication += b.communication * w.scale;
            sum.idle += b.idle * w.scale;
        }
    if (total > 0) {
        const double denom = total * nsim;
        r.frac_compute = sum.compute / denom;
        r.frac_memory = sum.memory / denom;
        r.frac_communication = sum.communication / denom;
        r.frac_idle = sum.idle / denom;
        r.gpu_busy = (sum.compute + sum.memory) / denom;
        if (has_all_to_all(build.plan)) {
            double a2a = 0;
            for (std::uint32_t g = 0; g < ex.gpus.size(); ++g)
                for (const auto& w : windows)
                    a2a += exposed_all_to_all_seconds(build.plan, ex, g, w.from, w.to) * w.scale;
            r.frac_all_to_all = a2a / denom;
        }
    }
    if (l2_req > 0) r.l2_hit_rate = l2_hit / l2_req;
    r.hbm_bytes = hbm * represent;
    if (sc.workload.mode == config::Mode::training) r.hfu = flops * represent / (wall * sc.gpus * peak);
    return r;
}

}  // namespace sim::report
