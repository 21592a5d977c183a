// Expert histograms: reading and checking (see expert_histogram.h).
#include "sim/config/expert_histogram.h"

#include "sim/config/csv_reader.h"

#include <algorithm>
#include <cmath>

namespace sim::config {

namespace {

// Puts a row's value for expert `id` into `t`, refusing a second row for it.
void put(workload::ExpertTable& t, const CsvRow& row, std::int64_t id, double v, const std::string& whose) {
    const auto i = static_cast<std::size_t>(id);
    if (t.weight.size() <= i) {
        t.weight.resize(i + 1, 0.0);
        t.line.resize(i + 1, 0);
        t.row.resize(i + 1);
    }
    if (t.line[i] > 0) row.fail(fmt::format("expert {}{} has a row already, at line {}", id, whose, t.line[i]));
    t.weight[i] = v;
    t.line[i] = row.where.line;
    t.row[i] = row.shown;
    t.last_line = row.where.line;
}

// A list of ids for a message: the first eight, then how many more.
std::string id_list(const std::vector<std::int64_t>& ids) {
    std::string s;
    for (std::size_t j = 0; j < ids.size() && j < 8; ++j) s += (j == 0 ? "" : ", ") + std::to_string(ids[j]);
    if (ids.size() > 8) s += fmt::format(" and {} more", ids.size() - 8);
    return s;
}

// Checks one table against the model's experts: no row past them, a row for
// each, a positive finite sum. `whose` names the layer in messages (empty
// without a layer column); `end` is where a missing row is reported.
void check_table(const workload::ExpertTable& t, const workload::ModelSpec& model, const std::string& file,
                 const std::string& whose, int end_line) {
    const auto experts = static_cast<std::size_t>(model.experts);
    for (std::size_t i = experts; i < t.line.size(); ++i)
        if (t.line[i] > 0)
            throw ConfigError(SourceLocation{file, t.line[i], 1},
                              fmt::format("row '{}': expert {} is past the {} experts of model '{}' (ids 0 to {})",
                                          t.row[i], i, model.experts, model.name, model.experts - 1));
    std::vector<std::int64_t> missing;
    double sum = 0;
    for (std::size_t i = 0; i < experts; ++i) {
        if (i >= t.line.size() || t.line[i] == 0) missing.push_back(static_cast<std::int64_t>(i));
        else sum += t.weight[i];
    }
    const SourceLocation end{file, end_line, 1};
    if (!missing.empty())
        throw ConfigError(end, fmt::format("no row for expert{} {}{}: model '{}' has {} experts, each needs one row{}",
                                           missing.size() == 1 ? "" : "s", id_list(missing), whose, model.name,
                                           model.experts, whose.empty() ? "" : " in each MoE layer"));
    if (!(sum > 0))
        throw ConfigError(end, fmt::format("the experts' loads{} sum to 0: the histogram routes no token", whose));
    if (!std::isfinite(sum))
        throw ConfigError(end, fmt::format("the experts' loads{} sum past the largest number", whose));
}

}  // namespace

workload::ExpertHistogram read_expert_histogram(const std::string& path) {
    // Without a layer column one row per expert; with one, one per MoE layer
    // and expert (DeepSeek-V3: 58 x 256 = 14 848), at most kMaxLayerExpertRows.
    const CsvFormat format{{"expert,tokens", "expert,share", "layer,expert,tokens", "layer,expert,share"},
                           "histogram",
                           "experts",
                           workload::kMaxExperts,
                           {workload::kMaxExperts, workload::kMaxExperts, kMaxLayerExpertRows, kMaxLayerExpertRows},
                           {"experts", "experts", "rows (layer, expert)", "rows (layer, expert)"}};
    workload::ExpertHistogram h;
    h.file = path;
    std::int64_t held = 0;  // expert entries the layers' tables hold (each up to its largest id)
    const std::size_t header = read_csv(
        path, format,
        [&](const CsvRow& row) {
            const bool by_layer = row.fields.size() == 3;
            std::int64_t layer = -1;
            if (by_layer && (!parse_csv_int(row.fields[0], layer) || layer < 0 || layer >= workload::kMaxLayers))
                row.fail(fmt::format("layer '{}' is not a whole number from 0 to {} (the model's layer index, from 0)",
                                     row.fields[0], workload::kMaxLayers - 1));
            const std::string& expert = row.fields[by_layer ? 1 : 0];
            const std::string& value = row.fields[by_layer ? 2 : 1];
            std::int64_t id = 0;
            if (!parse_csv_int(expert, id) || id < 0 || id >= workload::kMaxExperts)
                row.fail(
                    fmt::format("expert '{}' is not a whole number from 0 to {}", expert, workload::kMaxExperts - 1));
            double v = 0;
            if (!parse_csv_number(value, v) || v < 0)
                row.fail(fmt::format("'{}' is not a finite number >= 0 (the tokens or share of expert {})", value, id));
            if (!by_layer) {
                put(h, row, id, v, "");
                return;
            }
            // A layer's table holds its experts up to the largest id; a valid
            // file holds exactly its rows, so more than the row bound in all
            // means ids that skip experts.
            workload::ExpertTable& t = h.layers[layer];
            const auto grow = std::max<std::int64_t>(0, id + 1 - static_cast<std::int64_t>(t.weight.size()));
            if (held + grow > kMaxLayerExpertRows)
                row.fail(
                    fmt::format("the layers' expert ids would span more than {} experts in all: each layer "
                                "needs one row for each of its experts 0 to E - 1",
                                kMaxLayerExpertRows));
            held += grow;
            put(t, row, id, v, fmt::format(" in layer {}", layer));
        },
        h.last_line);
    h.per_layer = header >= 2;
    if (h.per_layer) {
        // The pooled table: the mean of the layers' shares (a layer of zero
        // sum, refused by the check, is left out), for MoE layers without rows.
        for (const auto& [layer, t] : h.layers) {
            double sum = 0;
            for (const double w : t.weight) sum += w;
            if (!(sum > 0) || !std::isfinite(sum)) continue;
            if (h.weight.size() < t.weight.size()) h.weight.resize(t.weight.size(), 0.0);
            for (std::size_t i = 0; i < t.weight.size(); ++i) h.weight[i] += t.weight[i] / sum;
        }
    }
    return h;
}

void check_expert_histogram(const workload::MoeRouting& routing, const workload::ModelSpec& model) {
    // A dense model with a moe block is refused where the strategy is resolved.
    if (routing.kind != workload::MoeRouting::Kind::histogram || !routing.histogram || model.experts == 0) return;
    const workload::ExpertHistogram& h = *routing.histogram;
    if (!h.per_layer) {
        check_table(h, model, h.file, "", h.last_line);
        return;
    }
    // Layer ids are the model's 0-based layer indices: its MoE layers
    // first_dense_layers .. layers - 1, then its multi-token-prediction layers.
    const std::int64_t first = model.first_dense_layers, main_end = model.layers, end = model.layers + model.mtp_layers;
    const std::string moe_ids =
        fmt::format("its MoE layers are {} to {}{}", first, main_end - 1,
                    model.mtp_layers > 0 ? fmt::format(", its prediction layers {} to {}", main_end, end - 1) : "");
    for (const auto& [layer, t] : h.layers) {
        int first_line = 0;
        std::string first_row;
        for (std::size_t i = 0; i < t.line.size(); ++i)
            if (t.line[i] > 0 && (first_line == 0 || t.line[i] < first_line)) {
                first_line = t.line[i];
                first_row = t.row[i];
            }
        const SourceLocation at{h.file, first_line, 1};
        if (layer >= end)
            throw ConfigError(at, fmt::format("row '{}': layer {} is past the {} layers of model '{}' ({})", first_row,
                                              layer, end, model.name, moe_ids));
        if (layer < first)
            throw ConfigError(at, fmt::format("row '{}': layer {} is one of the {} dense layers of model '{}' "
                                              "(no experts; {})",
                                              first_row, layer, first, model.name, moe_ids));
        check_table(t, model, h.file, fmt::format(" in layer {}", layer), t.last_line);
    }
    // Some MoE layers but not all is refused: a layer left out would route
    // by the others' pooled load, which no measurement gave it.
    std::vector<std::int64_t> missing;
    for (std::int64_t l = first; l < main_end; ++l)
        if (!h.layers.count(l)) missing.push_back(l);
    if (!missing.empty())
        throw ConfigError(SourceLocation{h.file, h.last_line, 1},
                          fmt::format("no rows for layer{} {}: with a layer column each MoE layer of model '{}' "
                                      "needs its rows ({}; the prediction layers may be left out)",
                                      missing.size() == 1 ? "" : "s", id_list(missing), model.name, moe_ids));
}

}  // namespace sim::config
