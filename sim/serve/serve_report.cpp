// Serving metrics and writers.
#include "sim/serve/serve_report.h"

#include "sim/report/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string_view>

namespace sim::serve {

Percentiles percentiles(std::vector<double> v) {
    Percentiles p;
    p.count = v.size();
    if (v.empty()) return p;
    std::sort(v.begin(), v.end());
    const auto rank = [&](double q) {
        const auto r = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
        return v[std::clamp<std::size_t>(r, 1, v.size()) - 1];
    };
    p.p50 = rank(0.50);
    p.p90 = rank(0.90);
    p.p99 = rank(0.99);
    p.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    return p;
}

ServeSummary summarize(const config::ScenarioSpec& sc, const ServeResult& r) {
    const auto& sv = *sc.workload.serving;
    ServeSummary s;
    std::vector<double> queue, ttft, tpot, e2e, gap, arrive, kv_transfer, kv_wait, waited;
    double ttft_sum = 0, kv_sum = 0;
    double first_arrival = INFINITY, last_arrival = 0, last_finish = 0, out_tokens = 0, all_tokens = 0;
    std::size_t good = 0;
    for (std::size_t i = static_cast<std::size_t>(sv.warmup_requests); i < r.records.size(); ++i) {
        const auto& rec = r.records[i];
        const auto& q = rec.request;
        ++s.measured;
        queue.push_back((rec.first_scheduled_s - q.arrival_s) * 1e3);
        waited.push_back(queue.back() / 1e3 + (rec.decode_replica >= 0 ? rec.kv_wait_s : 0));
        const double t1 = (rec.first_token_s - q.arrival_s) * 1e3;
        ttft.push_back(t1);
        if (rec.decode_replica >= 0) {
            kv_transfer.push_back(rec.kv_transfer_s * 1e3);
            kv_wait.push_back(rec.kv_wait_s * 1e3);
            kv_sum += rec.kv_transfer_s * 1e3;
        }
        ttft_sum += t1;
        s.prefix_hit_rate += rec.prefix_hit_tokens > 0 ? 1 : 0;
        s.prefix_tokens_skipped += rec.prefix_hit_tokens;
        std::optional<double> t2;
        if (q.output > 1) {
            t2 = (rec.finish_s - rec.first_token_s) * 1e3 / static_cast<double>(q.output - 1);
            tpot.push_back(*t2);
            gap.push_back(rec.max_gap_s * 1e3);
        }
        e2e.push_back((rec.finish_s - q.arrival_s) * 1e3);
        arrive.push_back(q.arrival_s);
        first_arrival = std::min(first_arrival, q.arrival_s);
        last_arrival = std::max(last_arrival, q.arrival_s);
        last_finish = std::max(last_finish, rec.finish_s);
        out_tokens += static_cast<double>(q.output);
        all_tokens += static_cast<double>(q.prompt + q.output);
        const bool ok_ttft = !sv.slo_ttft_ms || t1 <= *sv.slo_ttft_ms;
        const bool ok_tpot = !sv.slo_tpot_ms || !t2 || *t2 <= *sv.slo_tpot_ms;
        good += ok_ttft && ok_tpot ? 1 : 0;
    }
    s.queue_ms = percentiles(queue);
    s.ttft_ms = percentiles(ttft);
    s.tpot_ms = percentiles(tpot);
    s.e2e_ms = percentiles(e2e);
    s.max_gap_ms = percentiles(gap);
    s.kv_transfer_ms = percentiles(kv_transfer);
    s.kv_wait_ms = percentiles(kv_wait);
    s.kv_transfer_share = ttft_sum > 0 ? kv_sum / ttft_sum : 0;
    if (s.measured == 0) return s;
    s.prefix_hit_rate /= static_cast<double>(s.measured);
    s.window_s = last_finish - first_arrival;
    if (last_arrival > first_arrival)
        s.offered_rate = static_cast<double>(s.measured - 1) / (last_arrival - first_arrival);
    if (s.window_s > 0) {
        s.requests_per_s = static_cast<double>(s.measured) / s.window_s;
        s.output_tokens_per_s = out_tokens / s.window_s;
        s.total_tokens_per_s = all_tokens / s.window_s;
        if (sv.slo_ttft_ms || sv.slo_tpot_ms) {
            s.goodput_per_s = static_cast<double>(good) / s.window_s;
            s.slo_attainment = static_cast<double>(good) / static_cast<double>(s.measured);
        }
    }
    // Least-squares slope of the wait (s) on arrival time (s): queueing
    // delay, and, disaggregated, the wait for the decode pool's blocks,
    // where an overloaded decode pool's backlog waits (its prefill replicas
    // keep up, so their queue alone stays flat).
    const double n = static_cast<double>(arrive.size());
    const double ma = std::accumulate(arrive.begin(), arrive.end(), 0.0) / n;
    const double mq = std::accumulate(waited.begin(), waited.end(), 0.0) / n;
    double sxy = 0, sxx = 0;
    for (std::size_t i = 0; i < arrive.size(); ++i) {
        sxy += (arrive[i] - ma) * (waited[i] - mq);
        sxx += (arrive[i] - ma) * (arrive[i] - ma);
    }
    s.queue_slope = sxx > 0 ? sxy / sxx : 0;
    s.overloaded = s.queue_slope >= kOverloadSlope;
    s.mean_batch = r.mean_batch;
    s.peak_kv_use = r.pool.blocks > 0 && r.decode_tp == 0
                        ? static_cast<double>(r.peak_kv_blocks) / static_cast<double>(r.pool.blocks)
                        : 0;
    if (r.decode_tp > 0)  // pools of two sizes: the largest share of its own pool
        for (const auto& q : r.replica_stats)
            s.peak_kv_use = std::max(
                s.peak_kv_use,
                static_cast<double>(q.peak_kv_blocks) /
                    static_cast<double>(std::string_view(q.role) != "decode" ? r.pool.blocks : r.decode_pool.blocks));
    return s;
}

namespace {

std::string pct_row(const char* name, const Percentiles& p) {
    return fmt::format("  {:<22} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f}\n", name, p.p50, p.p90, p.p99, p.mean);
}

std::string pct_json(const Percentiles& p) {
    using report::json_number;
    return fmt::format("{{\"p50\":{},\"p90\":{},\"p99\":{},\"mean\":{},\"count\":{}}}", json_number(p.p50),
                       json_number(p.p90), json_number(p.p99), json_number(p.mean), p.count);
}

}  // namespace

std::string serve_table(const config::ScenarioSpec& sc, const ServeResult& r, const ServeSummary& s) {
    const auto& sv = *sc.workload.serving;
    std::string out = fmt::format("scenario {}: serving, strategy {} on {} x {}, scheduler {}\n", sc.name, r.strategy,
                                  r.gpus, sc.gpu.name, sv.scheduler->name());
    if (r.replicas > 1 && r.prefill_replicas > 0 && (r.attention_dp > 0 || r.decode_dp > 0)) {
        // Engines of data-parallel-attention ranks in either pool.
        const int p_group = r.attention_dp > 0 ? r.attention_dp : r.tp;
        const int decode_units = r.replicas - r.prefill_replicas;
        out += fmt::format("  disaggregated: {} prefill {} of {} + {} decode {} of {}, router {}\n",
                           r.prefill_replicas / (r.attention_dp > 0 ? r.attention_dp : 1),
                           r.attention_dp > 0 ? "engine(s) with attention_dp, dp" : "replica(s), tp", p_group,
                           r.decode_dp > 0 ? decode_units / r.decode_dp : decode_units,
                           r.decode_dp > 0 ? "engine(s) with attention_dp, dp" : "replica(s), tp",
                           r.decode_dp > 0 ? r.decode_dp : r.decode_tp, r.router);
    } else if (r.replicas > 1) {
        out += r.prefill_replicas > 0
                   ? fmt::format(
                         "  disaggregated: {} prefill replicas of tp {} + {} decode replicas of tp {}, router {}\n",
                         r.prefill_replicas, r.tp, r.replicas - r.prefill_replicas,
                         r.decode_tp > 0 ? r.decode_tp : r.tp, r.router)
                   : fmt::format("  {} replicas of tp {}, router {}\n", r.replicas, r.tp, r.router);
    }
    if (r.attention_dp > 0 && r.prefill_replicas == 0)
        out += fmt::format(
            "  data-parallel attention: {} engine(s) of {} ranks in lockstep (experts over the engine's GPUs); each "
            "rank's KV pool below\n",
            r.replicas / r.attention_dp, r.attention_dp);
    if (sv.prefilled)
        out +=
            "  prefilled: every request arrives with its cache in place and its first token (a decode server "
            "alone); TTFT is the wait for blocks and a place\n";
    if (r.pp > 1)
        out += fmt::format(
            "  pipeline parallel: {} stages of tp {} per replica, up to {} batches in flight; stage {} "
            "binds the KV pool\n",
            r.pp, r.tp, r.pp, r.pool.binding_stage);
    out += fmt::format("  requests {} ({} measured after a warm-up of {}), offered {:.3f} req/s\n", r.records.size(),
                       s.measured, sv.warmup_requests, s.offered_rate);
    out += fmt::format("  KV pool {} blocks x {} tokens ({:.3g} GB; weights {:.3g} GB, workspace {:.3g} GB)\n",
                       r.pool.blocks, r.pool.block_size,
                       static_cast<double>(r.pool.blocks * r.pool.block_size) * r.pool.bytes_per_token / 1e9,
                       r.pool.memory.weights / 1e9, r.pool.memory.workspace / 1e9);
    if (r.decode_tp > 0)
        out += fmt::format(
            "  decode replicas' KV pool {} blocks x {} tokens ({:.3g} GB; weights {:.3g} GB)\n", r.decode_pool.blocks,
            r.decode_pool.block_size,
            static_cast<double>(r.decode_pool.blocks * r.decode_pool.block_size) * r.decode_pool.bytes_per_token / 1e9,
            r.decode_pool.memory.weights / 1e9);
    out += fmt::format("  {:<22} {:>10} {:>10} {:>10} {:>10}\n", "latency (ms)", "P50", "P90", "P99", "mean");
    out += pct_row("queueing delay", s.queue_ms);
    out += pct_row("TTFT", s.ttft_ms);
    out += pct_row("TPOT", s.tpot_ms);
    out += pct_row("longest token gap", s.max_gap_ms);
    out += pct_row("end to end", s.e2e_ms);
    if (r.prefill_replicas > 0) {
        out += pct_row("KV transfer", s.kv_transfer_ms);
        out += pct_row("wait for decode blocks", s.kv_wait_ms);
        out += fmt::format("  KV transfer share of TTFT {:.1f}%, {:.3g} GB moved\n", s.kv_transfer_share * 100,
                           r.kv_bytes_moved / 1e9);
    }
    out += fmt::format("  throughput {:.3f} req/s, {:.1f} output tokens/s, {:.1f} tokens/s ({:.1f} per GPU)\n",
                       s.requests_per_s, s.output_tokens_per_s, s.total_tokens_per_s, s.total_tokens_per_s / r.gpus);
    if (s.goodput_per_s)
        out += fmt::format("  goodput {:.3f} req/s ({:.1f}% of requests meet the SLOs)\n", *s.goodput_per_s,
                           *s.slo_attainment * 100);
    out += fmt::format("  iterations {}, mean batch {:.1f}, peak KV use {:.1f}%, preemptions {}\n", r.iterations,
                       s.mean_batch, s.peak_kv_use * 100, r.preemptions);
    if (r.replicas > 1) {
        out += fmt::format("  {:<8} {:<8} {:>6} {:>9} {:>11} {:>8} {:>12} {:>8}\n", "replica", "role", "GPUs",
                           "requests", "iterations", "busy %", "preemptions", "peak KV");
        for (std::size_t i = 0; i < r.replica_stats.size(); ++i) {
            const auto& q = r.replica_stats[i];
            out += fmt::format("  {:<8} {:<8} {:>6} {:>9} {:>11} {:>7.1f}% {:>12} {:>7.1f}%\n", i, q.role,
                               fmt::format("{}-{}", q.first_gpu, q.first_gpu + q.tp * q.pp - 1), q.requests,
                               q.iterations, r.end_s > 0 ? q.busy_s / r.end_s * 100 : 0.0, q.preemptions,
                               static_cast<double>(q.peak_kv_blocks) /
                                   static_cast<double>(q.tp == r.tp ? r.pool.blocks : r.decode_pool.blocks) * 100);
        }
    }
    if (sv.shared_prefix_tokens > 0)
        out += fmt::format("  prefix cache ({} shared tokens): {:.1f}% of requests hit it, {} prompt tokens skipped\n",
                           sv.shared_prefix_tokens, s.prefix_hit_rate * 100, s.prefix_tokens_skipped);
    if (sv.swap_preemption)
        out +=
            fmt::format("  preemption by swap: {:.3g} GB out, {:.3g} GB in per GPU over PCIe, {:.3f} s of iterations\n",
                        r.swap_out_bytes / 1e9, r.swap_in_bytes / 1e9, r.swap_time_s);
    if (r.clamped > 0) out += fmt::format("  {} requests cut to the model's max_seq\n", r.clamped);
    const std::string_view wait = r.prefill_replicas > 0 ? "queueing and decode-block wait" : "queueing delay";
    out += s.overloaded ? fmt::format(
                              "  OVERLOADED: {} grows {:.3f} s per s of arrivals; the offered load is "
                              "above what this replica serves\n",
                              wait, s.queue_slope)
                        : fmt::format("  not overloaded ({} trend {:.3f} s per s)\n", wait, s.queue_slope);
    return out;
}

std::string serve_json(const config::ScenarioSpec& sc, const ServeResult& r, const ServeSummary& s) {
    using report::json_number;
    using report::json_string;
    const auto& sv = *sc.workload.serving;
    std::string out = fmt::format(
        "{{\"scenario\":{},\"mode\":\"serving\",\"strategy\":{},\"gpus\":{},\"scheduler\":{},\"requests\":{},"
        "\"measured\":{},\"warmup_requests\":{},\"offered_rate\":{},",
        json_string(sc.name), json_string(r.strategy), r.gpus, json_string(std::string(sv.scheduler->name())),
        r.records.size(), s.measured, sv.warmup_requests, json_number(s.offered_rate));
    out += fmt::format(
        "\"kv_pool\":{{\"blocks\":{},\"block_size\":{},\"bytes_per_token\":{},\"weights_bytes\":{},"
        "\"workspace_bytes\":{},\"budget_bytes\":{}}},",
        r.pool.blocks, r.pool.block_size, json_number(r.pool.bytes_per_token), json_number(r.pool.memory.weights),
        json_number(r.pool.memory.workspace), json_number(r.pool.budget_bytes));
    out += fmt::format("\"queue_ms\":{},\"ttft_ms\":{},\"tpot_ms\":{},\"max_gap_ms\":{},\"e2e_ms\":{},",
                       pct_json(s.queue_ms), pct_json(s.ttft_ms), pct_json(s.tpot_ms), pct_json(s.max_gap_ms),
                       pct_json(s.e2e_ms));
    out += fmt::format(
        "\"requests_per_s\":{},\"output_tokens_per_s\":{},\"tokens_per_s\":{},\"tokens_per_s_per_gpu\":{},"
        "\"goodput_per_s\":{},\"slo_attainment\":{},",
        json_number(s.requests_per_s), json_number(s.output_tokens_per_s), json_number(s.total_tokens_per_s),
        json_number(s.total_tokens_per_s / r.gpus), json_number(s.goodput_per_s), json_number(s.slo_attainment));
    out += fmt::format(
        "\"iterations\":{},\"mean_batch\":{},\"peak_kv_use\":{},\"preemptions\":{},\"clamped\":{},"
        "\"queue_slope\":{},\"overloaded\":{},\"iteration_cache\":{{\"hits\":{},\"misses\":{}}},",
        r.iterations, json_number(s.mean_batch), json_number(s.peak_kv_use), r.preemptions, r.clamped,
        json_number(s.queue_slope), s.overloaded ? "true" : "false", r.cache_hits, r.cache_misses);
    if (r.pp > 1) out += fmt::format("\"pp\":{},\"kv_binding_stage\":{},", r.pp, r.pool.binding_stage);
    if (r.replicas > 1) {
        out += fmt::format("\"router\":{},\"tp\":{},\"prefill_replicas\":{},", json_string(r.router), r.tp,
                           r.prefill_replicas);
        if (r.decode_dp > 0) out += fmt::format("\"decode_dp\":{},", r.decode_dp);
        out += "\"replicas\":[";
        for (std::size_t i = 0; i < r.replica_stats.size(); ++i) {
            const auto& q = r.replica_stats[i];
            out += fmt::format(
                "{}{{\"role\":\"{}\",\"first_gpu\":{},\"tp\":{},\"requests\":{},\"iterations\":{},\"busy_s\":{},"
                "\"preemptions\":{},\"peak_kv_blocks\":{}}}",
                i ? "," : "", q.role, q.first_gpu, q.tp, q.requests, q.iterations, json_number(q.busy_s), q.preemptions,
                q.peak_kv_blocks);
        }
        out += "],";
    }
    if (r.prefill_replicas > 0)
        out += fmt::format("\"kv_transfer_ms\":{},\"kv_wait_ms\":{},\"kv_transfer_share\":{},\"kv_bytes_moved\":{},",
                           pct_json(s.kv_transfer_ms), pct_json(s.kv_wait_ms), json_number(s.kv_transfer_share),
                           json_number(r.kv_bytes_moved));
    if (sv.prefilled) out += "\"prefilled\":true,";
    if (sv.shared_prefix_tokens > 0)
        out += fmt::format("\"prefix_cache\":{{\"shared_prefix_tokens\":{},\"hit_rate\":{},\"tokens_skipped\":{}}},",
                           sv.shared_prefix_tokens, json_number(s.prefix_hit_rate), s.prefix_tokens_skipped);
    if (sv.swap_preemption)
        out += fmt::format("\"swap\":{{\"out_bytes\":{},\"in_bytes\":{},\"time_s\":{}}},",
                           json_number(r.swap_out_bytes), json_number(r.swap_in_bytes), json_number(r.swap_time_s));
    out += "\"timeline\":[";
    for (std::size_t i = 0; i < r.timeline.size(); ++i) {
        const auto& p = r.timeline[i];
        out += fmt::format("{}[{},{},{},{},{}]", i ? "," : "", json_number(p.t_s), p.batch, p.tokens, p.kv_blocks,
                           p.waiting);
    }
    out += "],\"timeline_columns\":[\"t_s\",\"batch\",\"tokens\",\"kv_blocks\",\"waiting\"]}\n";
    return out;
}

std::string serve_requests_csv(const ServeResult& r, std::int64_t warmup) {
    // Several replicas add where each request ran and, disaggregated, its KV transfer.
    const bool where = r.replicas > 1;
    std::string out =
        "request,warmup,arrival_s,prompt_tokens,output_tokens,queue_ms,ttft_ms,tpot_ms,e2e_ms,max_gap_ms,"
        "preemptions";
    out += where ? ",replica,decode_replica,kv_wait_ms,kv_transfer_ms\n" : "\n";
    using report::json_number;
    for (std::size_t i = 0; i < r.records.size(); ++i) {
        const auto& rec = r.records[i];
        const auto& q = rec.request;
        const std::optional<double> tpot =
            q.output > 1
                ? std::optional<double>((rec.finish_s - rec.first_token_s) * 1e3 / static_cast<double>(q.output - 1))
                : std::nullopt;
        out += fmt::format(
            "{},{},{},{},{},{},{},{},{},{},{}", i, static_cast<std::int64_t>(i) < warmup ? 1 : 0,
            json_number(q.arrival_s), q.prompt, q.output, json_number((rec.first_scheduled_s - q.arrival_s) * 1e3),
            json_number((rec.first_token_s - q.arrival_s) * 1e3), tpot ? json_number(tpot) : "",
            json_number((rec.finish_s - q.arrival_s) * 1e3), json_number(rec.max_gap_s * 1e3), rec.preemptions);
        if (where)
            out += fmt::format(",{},{},{},{}", rec.replica, rec.decode_replica, json_number(rec.kv_wait_s * 1e3),
                               json_number(rec.kv_transfer_s * 1e3));
        out += '\n';
    }
    return out;
}

}  // namespace sim::serve
