// Expected-error lookup for a scenario (see error_band.h).
#include "sim/report/error_band.h"
#include "sim/config/data_dir.h"

#include "sim/config/yaml_reader.h"
#include "sim/report/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace sim::report {

Bands load_bands(const std::string& path) {
    Bands out;
    const config::Node root = config::load_file(path);
    config::MapReader r(root);
    out.source = r.required("source").as_string();
    for (const auto& e : r.required("bands").elements()) {
        config::MapReader b(e);
        ValidatedBand v;
        v.kind = b.required("kind").as_enum({"training", "inference", "serving"});
        if (auto m = b.optional("metric")) v.metric = m->as_enum({"throughput", "median", "p99"});
        if (auto g = b.optional("gpu")) v.gpu = g->as_string();
        if (auto s = b.optional("software")) v.software = s->as_string();
        v.mape = b.required("mape").as_number(0, 100);
        v.n = static_cast<int>(b.required("n").as_int(1, 1 << 20));
        if (auto f = b.optional("fitted")) v.fitted = f->as_bool();
        if (auto u = b.optional("set")) v.unseen = u->as_enum({"reference", "unseen"}) == "unseen";
        if (auto m = b.optional("moe")) v.moe = m->as_bool();
        b.finish();
        out.bands.push_back(std::move(v));
    }
    r.finish();
    return out;
}

const Bands& shipped_bands() {
    static const Bands bands = load_bands(std::string(sim::config::data_dir()) + "/docs/validation-bands.yaml");
    return bands;
}

ErrorBand expected_error(const config::ScenarioSpec& sc, const Bands& bands) {
    ErrorBand out;
    const std::string kind = sc.workload.serving                          ? "serving"
                             : sc.workload.mode == config::Mode::training ? "training"
                                                                          : "inference";
    const std::string gpu = sc.gpu.name, software = sc.software.given() ? sc.software.name : "";
    // A model with routed experts is judged by MoE runs only (serving bands do not split).
    const bool moe = kind != "serving" && sc.model.experts > 0;
    std::string metric;   // the metric class looked for ("" for runs)
    bool unseen = false;  // which set's bands are looked in
    const auto find = [&](const std::string& g, const std::string& s) -> const ValidatedBand* {
        for (const auto& b : bands.bands)
            if (b.kind == kind && b.gpu == g && b.software == s && b.metric == metric && b.unseen == unseen &&
                b.moe == moe)
                return &b;
        return nullptr;
    };
    const auto covered = [&](auto field, const std::string& value) {
        return std::any_of(bands.bands.begin(), bands.bands.end(),
                           [&](const ValidatedBand& b) { return b.kind == kind && b.*field == value; });
    };
    // Narrowest first; a band of fewer than kMinPoints runs is not a band.
    std::vector<std::pair<std::string, std::string>> order;
    if (!software.empty()) order.insert(order.end(), {{gpu, software}, {"", software}});
    order.insert(order.end(), {{gpu, ""}, {"", ""}});
    const auto narrowest = [&]() -> std::optional<ValidatedBand> {
        for (const auto& [g, s] : order)
            if (const auto* b = find(g, s); b && b->n >= kMinPoints) return *b;
        return std::nullopt;
    };
    if (kind == "serving") {
        out.serving = true;
        for (const char* m : kServingMetrics) {
            metric = m;
            if (auto b = narrowest()) out.by_metric.push_back(*b);
            else
                out.warnings.push_back(
                    fmt::format("no band for serving {} metrics: too few published points were validated", m));
        }
        if (!out.by_metric.empty()) out.band = out.by_metric.front();
    } else {
        out.band = narrowest();
        unseen = true;
        out.unseen_band = narrowest();
    }
    if (!covered(&ValidatedBand::gpu, gpu))
        out.warnings.push_back(
            fmt::format("no published {} run on {} was validated: the figure above is for other GPUs", kind, gpu));
    if (!software.empty() && !covered(&ValidatedBand::software, software))
        out.warnings.push_back(
            fmt::format("no published {} run with {} was validated: the figure above is for other "
                        "software stacks",
                        kind, software));
    return out;
}

std::string format_error_band(const ErrorBand& e) {
    std::string out;
    if (e.serving) {
        for (const auto& b : e.by_metric) {
            std::string what = "serving";
            if (!b.gpu.empty()) what += " on " + b.gpu;
            if (!b.software.empty()) what += " with " + b.software;
            out += fmt::format("expected error: {} ({}): MAPE {:.1f}% over {} published points (docs/serving.md)\n",
                               what, b.metric, 100 * b.mape, b.n);
        }
        if (e.by_metric.empty()) out = "expected error: no validated band for serving runs (docs/serving.md)\n";
        for (const auto& w : e.warnings) out += "warning: " + w + "\n";
        return out;
    }
    const auto what = [](const ValidatedBand& b) {
        std::string w = b.kind + (b.moe ? " (MoE)" : "");
        if (!b.gpu.empty()) w += " on " + b.gpu;
        if (!b.software.empty()) w += " with " + b.software;
        return w;
    };
    if (e.band) {
        const auto& b = *e.band;
        out = fmt::format("expected error: {}: MAPE {:.1f}% over {} published runs{} (docs/validation.md)\n", what(b),
                          100 * b.mape, b.n, b.fitted ? ", in-sample (the stack's efficiency was fitted on them)" : "");
    }
    if (e.unseen_band) {
        const auto& b = *e.unseen_band;
        out += fmt::format(
            "expected error: {}: MAPE {:.1f}% over {} published runs parasim was never fitted to (docs/validation.md "
            "section 5)\n",
            what(b), 100 * b.mape, b.n);
    }
    if (!e.band && !e.unseen_band)
        out = "expected error: no validated band for this kind of run (docs/validation.md)\n";
    for (const auto& w : e.warnings) out += "warning: " + w + "\n";
    return out;
}

std::string error_band_json_member(const ErrorBand& e) {
    const auto band_json = [](const std::optional<ValidatedBand>& o) -> std::string {
        if (!o) return "null";
        const auto& b = *o;
        return fmt::format(
            "{{\"kind\":{},\"moe\":{},\"gpu\":{},\"software\":{},\"mape\":{},\"n\":{},\"in_sample\":{}}}",
            json_string(b.kind), b.moe ? "true" : "false", json_string(b.gpu), json_string(b.software),
            json_number(b.mape), b.n, b.fitted ? "true" : "false");
    };
    const std::string band = band_json(e.band);
    std::string warnings;
    for (std::size_t i = 0; i < e.warnings.size(); ++i) {
        if (i) warnings += ',';
        warnings += json_string(e.warnings[i]);
    }
    std::string by_metric;
    if (e.serving) {
        by_metric = ",\"by_metric\":[";
        for (std::size_t i = 0; i < e.by_metric.size(); ++i) {
            const auto& b = e.by_metric[i];
            by_metric += fmt::format("{}{{\"metric\":{},\"gpu\":{},\"software\":{},\"mape\":{},\"n\":{}}}",
                                     i ? "," : "", json_string(b.metric), json_string(b.gpu), json_string(b.software),
                                     json_number(b.mape), b.n);
        }
        by_metric += "]";
    }
    const std::string unseen = e.serving ? "" : ",\"unseen_band\":" + band_json(e.unseen_band);
    return fmt::format("\"expected_error\":{{\"band\":{}{},\"warnings\":[{}]{}}}", band, unseen, warnings, by_metric);
}

}  // namespace sim::report
