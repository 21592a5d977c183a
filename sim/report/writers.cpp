// Table, JSON and CSV writers for run metrics.
#include "sim/report/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace sim::report {

std::string json_number(const std::optional<double>& v) {
    if (!v || !std::isfinite(*v)) return "null";
    return fmt::format("{}", *v);
}

namespace {

// The length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF), or 0.
std::size_t utf8_sequence(const std::string& s, std::size_t i) {
    const auto at = [&](std::size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
    const unsigned b0 = at(i);
    const auto cont = [&](std::size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) { return at(k) >= lo && at(k) <= hi; };
    if (b0 < 0x80) return 1;
    if (b0 >= 0xC2 && b0 <= 0xDF) return cont(i + 1) ? 2 : 0;
    if (b0 >= 0xE0 && b0 <= 0xEF) {
        const unsigned lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
        return cont(i + 1, lo, hi) && cont(i + 2) ? 3 : 0;
    }
    if (b0 >= 0xF0 && b0 <= 0xF4) {
        const unsigned lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
        return cont(i + 1, lo, hi) && cont(i + 2) && cont(i + 3) ? 4 : 0;
    }
    return 0;
}

}  // namespace

// A JSON string literal (RFC 8259) of any bytes: names come from input files,
// which may hold invalid UTF-8; each byte that is not part of a well-formed
// sequence becomes U+FFFD, so the document always parses.
std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (std::size_t i = 0; i < s.size();) {
        const char c = s[i];
        const std::size_t len = utf8_sequence(s, i);
        if (len == 0) {
            out += "\\ufffd";
            ++i;
            continue;
        }
        if (len > 1) {
            out.append(s, i, len);
            i += len;
            continue;
        }
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<int>(c));
                else out += c;
        }
        ++i;
    }
    return out + "\"";
}

// One CSV field (RFC 4180): quoted, with quotes doubled, when it holds a
// comma, a quote or a line break; as is otherwise.
std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string out = "\"";
    for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

std::string gnuplot_string(const std::string& s) {
    std::string out = "'";
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '\'') out += "''";
        else if (u < 0x20 || u == 0x7f) out += ' ';
        else out += c;
    }
    return out + "'";
}

namespace {

std::string stages_json(const parallel::ResolvedStrategy& rs) {
    std::string out = "[";
    for (std::size_t s = 0; s < rs.stage_layers.size(); ++s) {
        out += fmt::format("{}{{\"layers\":[{},{}]", s ? "," : "", rs.stage_layers[s].first, rs.stage_layers[s].second);
        if (s < rs.stage_fit.size()) out += fmt::format(",\"fits\":{}", json_string(rs.stage_fit[s]));
        if (s < rs.stage_working_set_bytes.size())
            out += fmt::format(",\"working_set_bytes\":{}", json_number(rs.stage_working_set_bytes[s]));
        out += "}";
    }
    return out + "]";
}

}  // namespace

std::string run_json(const RunMetrics& m) {
    const auto& b = m.memory.breakdown;
    const auto& rs = m.resolved;
    std::string out = "{";
    out += fmt::format("\"strategy\":{},\"gpus\":{},\"feasible\":{}", json_string(m.strategy), m.gpus,
                       m.feasible ? "true" : "false");
    out += fmt::format(",\"parallelism\":{{\"tp\":{},\"cp\":{},\"pp\":{},\"dp\":{},\"microbatches\":{},\"stages\":{}}}",
                       rs.tp, rs.cp, rs.pp, rs.dp, rs.microbatches, stages_json(rs));
    if (rs.ep > 1) out.insert(out.size() - 1, fmt::format(",\"ep\":{}", rs.ep));  // inside "parallelism"
    if (rs.expert_tp() != rs.tp) out.insert(out.size() - 1, fmt::format(",\"etp\":{}", rs.expert_tp()));
    out += fmt::format(",\"note\":{}", json_string(m.note));
    out += fmt::format(
        ",\"memory\":{{\"per_gpu_peak_bytes\":{},\"capacity_bytes\":{},\"oom\":{},\"stage\":{},\"breakdown\":{{"
        "\"weights\":{},\"gradients\":{},\"optimizer\":{},\"activations\":{},\"kv_cache\":{},\"workspace\":{}}}}}",
        json_number(b.total()), m.memory.capacity.value, m.memory.oom ? "true" : "false", m.memory_stage,
        json_number(b.weights), json_number(b.gradients), json_number(b.optimizer), json_number(b.activations),
        json_number(b.kv_cache), json_number(b.workspace));
    if (b.expert_weights > 0) {
        // The experts' part of weights / gradients / optimizer, inside "memory".
        out.insert(out.size() - 1, fmt::format(",\"experts\":{{\"weights\":{},\"gradients\":{},\"optimizer\":{}}}",
                                               json_number(b.expert_weights), json_number(b.expert_gradients),
                                               json_number(b.expert_optimizer)));
    }
    out += fmt::format(
        ",\"metrics\":{{\"tokens_per_s\":{},\"tpot_ms\":{},\"inv_tps_ms\":{},\"ttft_ms\":{},\"iteration_ms\":{},"
        "\"mfu\":{},\"hfu\":{},\"l2_hit_rate\":{},\"hbm_bytes\":{},\"gpu_busy\":{},"
        "\"link_utilization\":{{\"nvlink\":{},\"pcie\":{},\"network\":{}}},"
        "\"breakdown\":{{\"compute\":{},\"memory\":{},\"communication\":{},\"idle\":{}}}}}",
        json_number(m.tokens_per_s), json_number(m.tpot_ms), json_number(m.inv_tps_ms), json_number(m.ttft_ms),
        json_number(m.iteration_ms), json_number(m.mfu), json_number(m.hfu), json_number(m.l2_hit_rate),
        json_number(m.hbm_bytes), json_number(m.gpu_busy), json_number(m.link_nvlink), json_number(m.link_pcie),
        json_number(m.link_network), json_number(m.frac_compute), json_number(m.frac_memory),
        json_number(m.frac_communication), json_number(m.frac_idle));
    if (m.frac_all_to_all) {  // inside "metrics"."breakdown"
        out.insert(out.size() - 2, fmt::format(",\"all_to_all\":{}", json_number(m.frac_all_to_all)));
    }
    out += fmt::format(",\"simulation\":{{\"events\":{},\"simulated_seconds\":{}}}", m.events,
                       json_number(m.simulated_seconds));
    return out + "}";
}

std::string format_json(const std::string& scenario, const std::vector<RunMetrics>& runs,
                        const std::string& extra_members) {
    std::string out = fmt::format("{{\"scenario\":{},\"runs\":[", json_string(scenario));
    for (std::size_t i = 0; i < runs.size(); ++i) out += (i ? ",\n" : "\n") + run_json(runs[i]);
    return out + "\n]" + (extra_members.empty() ? "" : ",\n" + extra_members) + "}\n";
}

std::string format_csv(const std::vector<RunMetrics>& runs, const std::vector<std::string>& extra_columns,
                       const std::vector<std::vector<std::string>>& extra_values) {
    std::string out;
    for (const auto& c : extra_columns) out += csv_field(c) + ",";
    out +=
        "strategy,gpus,tp,pp,dp,microbatches,feasible,per_gpu_peak_bytes,capacity_bytes,tokens_per_s,tpot_ms,"
        "inv_tps_ms,ttft_ms,iteration_ms,mfu,hfu,l2_hit_rate,hbm_bytes,gpu_busy,link_nvlink,link_pcie,"
        "link_network,frac_compute,frac_memory,frac_communication,frac_idle\n";
    auto n = [](const std::optional<double>& v) { return v ? fmt::format("{}", *v) : std::string(); };
    for (std::size_t i = 0; i < runs.size(); ++i) {
        const auto& m = runs[i];
        if (i < extra_values.size())
            for (const auto& v : extra_values[i]) out += csv_field(v) + ",";
        out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                           csv_field(m.strategy), m.gpus, m.resolved.tp, m.resolved.pp, m.resolved.dp,
                           m.resolved.microbatches, m.feasible ? "true" : "false", m.memory.breakdown.total(),
                           m.memory.capacity.value, n(m.tokens_per_s), n(m.tpot_ms), n(m.inv_tps_ms), n(m.ttft_ms),
                           n(m.iteration_ms), n(m.mfu), n(m.hfu), n(m.l2_hit_rate), n(m.hbm_bytes), n(m.gpu_busy),
                           n(m.link_nvlink), n(m.link_pcie), n(m.link_network), n(m.frac_compute), n(m.frac_memory),
                           n(m.frac_communication), n(m.frac_idle));
    }
    return out;
}

// A run is flagged as tight above this share of the GPU's memory: the rest is
// headroom for what parasim does not count (the CUDA context, NCCL's
// buffers, the allocator's fragmentation). source: vLLM's default
// gpu_memory_utilization = 0.9 (vllm/engine/arg_utils.py, EngineArgs), the
// share a widely used stack dares to plan for.
constexpr double kTightMemoryShare = 0.9;

std::string format_table(const config::ScenarioSpec& sc, const std::vector<RunMetrics>& runs) {
    // Which way a ratio to the first strategy is good: higher, lower, or
    // neither (a share of time or a utilisation is not better either way).
    enum class Better { higher, lower, neither };
    struct Row {
        std::string label;
        std::vector<std::string> cells;
        std::vector<std::optional<double>> values;  // for ratios
        Better better = Better::neither;
    };
    std::vector<Row> rows;
    auto add = [&](const std::string& label, auto cell, auto value, Better better = Better::neither) {
        Row r{label, {}, {}, better};
        for (const auto& m : runs) {
            r.cells.push_back(cell(m));
            r.values.push_back(value(m));
        }
        rows.push_back(std::move(r));
    };
    auto num = [&](const std::string& label, std::optional<double> RunMetrics::*field, const char* spec,
                   double scale = 1.0, Better better = Better::neither) {
        add(
            label,
            [&](const RunMetrics& m) {
                return m.*field ? fmt::format(fmt::runtime(spec), *(m.*field) * scale) : std::string("-");
            },
            [&](const RunMetrics& m) { return m.*field; }, better);
    };
    const auto none = [](const RunMetrics&) { return std::optional<double>(); };
    add(
        "GPUs (tp x pp x dp)",
        [](const RunMetrics& m) {
            const auto& r = m.resolved;
            std::string s = r.cp > 1 ? fmt::format("{} ({}x{}x{}, cp {})", m.gpus, r.tp, r.pp, r.dp, r.cp)
                                     : fmt::format("{} ({}x{}x{})", m.gpus, r.tp, r.pp, r.dp);
            if (r.ep > 1) s.insert(s.size() - 1, fmt::format(", ep {}", r.ep));
            if (r.expert_tp() != r.tp) s.insert(s.size() - 1, fmt::format(", etp {}", r.expert_tp()));
            return s;
        },
        none);
    add(
        "micro-batches", [](const RunMetrics& m) { return fmt::format("{}", m.resolved.microbatches); }, none);
    add(
        "feasible", [](const RunMetrics& m) { return m.feasible ? std::string("yes") : std::string("OUT OF MEMORY"); },
        none);
    add(
        "memory per GPU (peak)",
        [](const RunMetrics& m) {
            return fmt::format("{} / {}", format_bytes(m.memory.breakdown.total()),
                               format_bytes(m.memory.capacity.as_double()));
        },
        [](const RunMetrics& m) { return std::optional<double>(m.memory.breakdown.total()); }, Better::lower);
    add(
        "  weights / grads / optim",
        [](const RunMetrics& m) {
            const auto& b = m.memory.breakdown;
            return fmt::format("{} / {} / {}", format_bytes(b.weights), format_bytes(b.gradients),
                               format_bytes(b.optimizer));
        },
        none);
    if (sc.model.experts > 0) {
        add(
            "  of which experts",
            [](const RunMetrics& m) {
                const auto& b = m.memory.breakdown;
                return fmt::format("{} / {} / {}", format_bytes(b.expert_weights), format_bytes(b.expert_gradients),
                                   format_bytes(b.expert_optimizer));
            },
            none);
    }
    add(
        "  activations / KV / workspace",
        [](const RunMetrics& m) {
            const auto& b = m.memory.breakdown;
            return fmt::format("{} / {} / {}", format_bytes(b.activations), format_bytes(b.kv_cache),
                               format_bytes(b.workspace));
        },
        none);
    const bool inference = sc.workload.mode == config::Mode::inference;
    num("tokens/s (TPS)", &RunMetrics::tokens_per_s, "{:.1f}", 1.0, Better::higher);
    if (inference) {
        num("TPOT, per sequence (ms)", &RunMetrics::tpot_ms, "{:.3f}", 1.0, Better::lower);
        num("TPS^-1 (ms per token)", &RunMetrics::inv_tps_ms, "{:.4f}", 1.0, Better::lower);
        num("TTFT (ms)", &RunMetrics::ttft_ms, "{:.2f}", 1.0, Better::lower);
    } else {
        num("iteration (ms)", &RunMetrics::iteration_ms, "{:.2f}", 1.0, Better::lower);
        num("MFU", &RunMetrics::mfu, "{:.1f}%", 100.0, Better::higher);
        num("HFU", &RunMetrics::hfu, "{:.1f}%", 100.0, Better::higher);
    }
    num("L2 hit rate", &RunMetrics::l2_hit_rate, "{:.1f}%", 100.0);
    num("HBM traffic (GB)", &RunMetrics::hbm_bytes, "{:.1f}", 1e-9, Better::lower);
    num("GPU busy", &RunMetrics::gpu_busy, "{:.1f}%", 100.0);
    num("NVLink utilisation", &RunMetrics::link_nvlink, "{:.1f}%", 100.0);
    num("PCIe utilisation", &RunMetrics::link_pcie, "{:.1f}%", 100.0);
    num("network utilisation", &RunMetrics::link_network, "{:.1f}%", 100.0);
    num("time: compute", &RunMetrics::frac_compute, "{:.1f}%", 100.0);
    num("time: memory", &RunMetrics::frac_memory, "{:.1f}%", 100.0);
    num("time: communication", &RunMetrics::frac_communication, "{:.1f}%", 100.0);
    if (std::any_of(runs.begin(), runs.end(), [](const RunMetrics& m) { return m.frac_all_to_all.has_value(); }))
        num("  of which all-to-all", &RunMetrics::frac_all_to_all, "{:.1f}%", 100.0);
    num("time: idle", &RunMetrics::frac_idle, "{:.1f}%", 100.0);

    std::vector<std::string> headers{"metric"};
    for (const auto& m : runs) headers.push_back(m.strategy);
    for (std::size_t k = 1; k < runs.size(); ++k) headers.push_back(runs[k].strategy + " / " + runs[0].strategy);
    std::vector<std::vector<std::string>> grid;
    for (const auto& r : rows) {
        std::vector<std::string> line{r.label};
        line.insert(line.end(), r.cells.begin(), r.cells.end());
        for (std::size_t k = 1; k < runs.size(); ++k) {
            const auto& a = r.values[0];
            const auto& b = r.values[k];
            std::string ratio;
            // A base that is zero but for rounding (an idle share of 1e-16
            // from subtracting the busy shares) gives no meaningful ratio.
            if (a && b && std::abs(*a) > 1e-12 * std::abs(*b)) {
                ratio = fmt::format("{:.2f}x", *b / *a);
                const bool up = *b > *a, down = *b < *a;
                if (r.better == Better::higher && (up || down)) ratio += up ? " better" : " worse";
                if (r.better == Better::lower && (up || down)) ratio += down ? " better" : " worse";
            }
            line.push_back(ratio);
        }
        grid.push_back(std::move(line));
    }
    std::vector<std::size_t> width(headers.size(), 0);
    for (std::size_t c = 0; c < headers.size(); ++c) width[c] = headers[c].size();
    for (const auto& line : grid)
        for (std::size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
    std::string out =
        fmt::format("scenario {}: {} on {} ({} GPU{} of {}), model {}", sc.name, inference ? "inference" : "training",
                    sc.cluster.name, sc.gpus, sc.gpus == 1 ? "" : "s", sc.gpu.name, sc.model.name);
    if (sc.software.given())
        out += fmt::format(", software {}{}", sc.software.name,
                           sc.software.version.empty() ? "" : " " + sc.software.version);
    out += "\n";
    auto emit = [&](const std::vector<std::string>& line) {
        for (std::size_t c = 0; c < line.size(); ++c)
            out += c == 0 ? fmt::format("{:<{}}", line[c], width[c]) : fmt::format("  {:>{}}", line[c], width[c]);
        out += "\n";
    };
    emit(headers);
    std::size_t total = 0;
    for (auto w : width) total += w + 2;
    out += std::string(total - 2, '-') + "\n";
    for (const auto& line : grid) emit(line);
    for (const auto& m : runs)
        if (!m.note.empty()) out += fmt::format("{}: {}\n", m.strategy, m.note);
    for (const auto& m : runs)
        if (m.feasible && m.memory.breakdown.total() > kTightMemoryShare * m.memory.capacity.as_double())
            out += fmt::format(
                "{}: memory is tight: {} of {} ({:.0f}%), above the {:.0f}% that leaves room for the "
                "CUDA context, NCCL buffers and allocator fragmentation (docs/output.md)\n",
                m.strategy, format_bytes(m.memory.breakdown.total()), format_bytes(m.memory.capacity.as_double()),
                100.0 * m.memory.breakdown.total() / m.memory.capacity.as_double(), 100.0 * kTightMemoryShare);
    for (const auto& m : runs)
        if (m.mfu && m.hfu && *m.hfu < *m.mfu) {
            out +=
                "HFU < MFU: MFU counts model FLOPs by the usual convention (6N per token plus attention, causal "
                "masking not halved); HFU counts what the kernels execute (causal attention skips half, recompute "
                "adds), so with causal attention and little recompute HFU comes out lower (docs/output.md)\n";
            break;
        }
    return out;
}

}  // namespace sim::report
