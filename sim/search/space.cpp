// Reading and checking the search: block (space.h).
#include "sim/search/space.h"

#include "sim/config/cluster_loader.h"
#include "sim/config/run_details.h"

#include <algorithm>

namespace sim::search {

namespace {

using config::MapReader;
using config::Node;

// auto, one value, or a non-empty list of values (duplicates removed, order kept).
template <class T, class Read>
Dimension<T> read_dimension(MapReader& r, const std::string& key, T fixed, Read read_one) {
    Dimension<T> d;
    const auto n = r.optional(key);
    if (!n) {
        d.values = {fixed};
        return d;
    }
    if (n->is_scalar() && n->as_string() == "auto") {
        d.is_auto = true;
        return d;
    }
    if (n->is_sequence()) {
        const auto elems = n->elements();
        if (elems.empty()) n->fail("an empty list leaves nothing to search: give values or auto");
        for (const auto& e : elems) {
            if (e.is_scalar() && e.as_string() == "auto") e.fail("auto stands alone, not inside a list");
            T v = read_one(e);
            if (std::find(d.values.begin(), d.values.end(), v) == d.values.end()) d.values.push_back(v);
        }
        return d;
    }
    d.values = {read_one(*n)};
    return d;
}

int read_pp_dp(const Node& n, int max) { return static_cast<int>(n.as_int(1, max)); }

}  // namespace

std::string to_string(Objective o) {
    switch (o) {
        case Objective::tokens_per_s: return "tokens_per_s";
        case Objective::tokens_per_s_per_gpu: return "tokens_per_s_per_gpu";
        case Objective::cost: return "cost";
        case Objective::time_to_budget: return "time_to_budget";
    }
    return "?";
}

std::string to_string(workload::Recompute r) {
    switch (r) {
        case workload::Recompute::none: return "none";
        case workload::Recompute::selective: return "selective";
        case workload::Recompute::full: return "full";
    }
    return "?";
}

SearchSpec read_search(const config::ScenarioSpec& sc) {
    if (!sc.search) throw ConfigError({sc.file, 0, 0}, "the scenario has no search: block (docs/planning.md)");
    const Node& block = *sc.search;
    MapReader r(block);
    SearchSpec s;
    s.where = block.location();
    const auto& base = sc.strategies.front();
    const auto& w = sc.workload;
    const bool training = w.mode == config::Mode::training;

    if (auto sp = r.optional("space")) {
        MapReader m(*sp);
        const auto as_int = [](std::int64_t lo, std::int64_t hi) {
            return [lo, hi](const Node& n) { return static_cast<int>(n.as_int(lo, hi)); };
        };
        s.tp = read_dimension<int>(m, "tp", base.tp, as_int(1, 1 << 20));
        s.cp = read_dimension<int>(m, "cp", base.cp, as_int(1, 1 << 20));
        s.ep = read_dimension<int>(m, "ep", base.ep, as_int(1, 1 << 20));
        s.pp = read_dimension<int>(m, "pp", base.pp, [](const Node& n) { return read_pp_dp(n, 1 << 20); });
        s.dp = read_dimension<int>(m, "dp", base.dp, [](const Node& n) { return read_pp_dp(n, 1 << 24); });
        s.sp = read_dimension<bool>(m, "sp", base.sp, [](const Node& n) { return n.as_bool(); });
        s.zero = read_dimension<int>(m, "zero", base.zero, as_int(0, 3));
        s.schedule = read_dimension<const parallel::IPipelineSchedule*>(
            m, "schedule", base.schedule,
            [](const Node& n) { return &parallel::pipeline_schedule(n.as_enum(parallel::pipeline_schedule_names())); });
        s.virtual_stages = read_dimension<int>(m, "virtual_stages", base.virtual_stages, as_int(1, 1024));
        s.first_stage_layers =
            read_dimension<int>(m, "first_stage_layers", base.first_stage_layers, as_int(0, 1 << 20));
        s.last_stage_layers = read_dimension<int>(m, "last_stage_layers", base.last_stage_layers, as_int(0, 1 << 20));
        if (training) {
            s.micro_batch = read_dimension<std::int64_t>(m, "micro_batch", w.micro_batch,
                                                         [](const Node& n) { return n.as_int(1, 1 << 20); });
            s.recompute = read_dimension<workload::Recompute>(m, "recompute", w.recompute, config::read_recompute);
            s.batch.values = {w.batch};
        } else {
            for (const char* key : {"micro_batch", "recompute"})
                if (auto n = m.optional(key))
                    n->fail(fmt::format("{} applies to training; inference searches batch", key));
            s.batch =
                read_dimension<std::int64_t>(m, "batch", w.batch, [](const Node& n) { return n.as_int(1, 1 << 24); });
            s.micro_batch.values = {w.micro_batch};
            s.recompute.values = {w.recompute};
        }
        m.finish();
    } else {
        block.fail("a search needs a space: block naming what to search (e.g. space: {tp: auto, pp: auto})");
    }

    int min_gpus = 0, max_gpus = 0;
    std::optional<Node> min_node, max_node;
    if (auto c = r.optional("constraints")) {
        MapReader m(*c);
        if (auto n = m.optional("memory_headroom")) s.memory_headroom = n->as_number(0.0, 0.95);
        if (auto n = m.optional("ttft_ms")) {
            if (training) n->fail("ttft_ms is an inference SLO; this scenario trains");
            s.ttft_ms = n->as_number(1e-6, 1e12);
        }
        if (auto n = m.optional("tpot_ms")) {
            if (training) n->fail("tpot_ms is an inference SLO; this scenario trains");
            s.tpot_ms = n->as_number(1e-6, 1e12);
        }
        if (auto n = m.optional("min_gpus")) min_gpus = static_cast<int>(n->as_int(1, config::kMaxGpus)), min_node = *n;
        if (auto n = m.optional("max_gpus")) max_gpus = static_cast<int>(n->as_int(1, config::kMaxGpus)), max_node = *n;
        if (auto n = m.optional("gpus")) {
            if (min_node || max_node) n->fail("give either gpus: [list] or min_gpus/max_gpus, not both");
            const auto elems = n->elements();
            if (elems.empty()) n->fail("an empty list leaves nothing to search: give GPU counts");
            for (const auto& e : elems) s.gpus.push_back(static_cast<int>(e.as_int(1, config::kMaxGpus)));
        }
        m.finish();
    }
    if (min_node || max_node) {
        const int lo = min_node ? min_gpus : 1;
        const int hi = max_node ? max_gpus : sc.gpus;
        if (lo > hi)
            (max_node ? *max_node : *min_node)
                .fail(fmt::format("min_gpus={} exceeds max_gpus={}: no GPU count is left", lo, hi));
        // Powers of two in [lo, hi]; a range without one is an error.
        for (std::int64_t g = 1; g <= hi; g *= 2)
            if (g >= lo) s.gpus.push_back(static_cast<int>(g));
        if (s.gpus.empty())
            (min_node ? *min_node : *max_node)
                .fail(fmt::format("no power of two lies in [{}, {}]: list the counts with gpus: [...]", lo, hi));
    }
    if (s.gpus.empty()) s.gpus = {sc.gpus};
    std::sort(s.gpus.begin(), s.gpus.end());
    s.gpus.erase(std::unique(s.gpus.begin(), s.gpus.end()), s.gpus.end());
    const int cluster_gpus = sc.cluster.nodes > 0 ? sc.cluster.nodes * sc.cluster.gpus_per_node : 0;
    if (cluster_gpus > 0 && s.gpus.back() > cluster_gpus)
        block.fail(fmt::format("the search asks for up to {} GPUs, but cluster {} has {}", s.gpus.back(),
                               sc.cluster.name, cluster_gpus));

    if (auto n = r.optional("objective")) {
        const std::string o = n->as_enum({"tokens_per_s", "tokens_per_s_per_gpu", "cost", "time_to_budget"});
        s.objective = o == "tokens_per_s"           ? Objective::tokens_per_s
                      : o == "tokens_per_s_per_gpu" ? Objective::tokens_per_s_per_gpu
                      : o == "cost"                 ? Objective::cost
                                                    : Objective::time_to_budget;
        if (s.objective == Objective::time_to_budget && !training)
            n->fail("time_to_budget is a training objective (the time to train token_budget tokens)");
    } else if (!training) {
        s.objective = Objective::tokens_per_s_per_gpu;
    }
    if (auto n = r.optional("price_per_gpu_hour")) s.price_per_gpu_hour = n->as_number(1e-9, 1e9);
    if (s.objective == Objective::cost && s.price_per_gpu_hour <= 0)
        block.fail("objective cost needs price_per_gpu_hour (dollars per GPU-hour)");
    if (auto n = r.optional("token_budget")) {
        if (s.objective != Objective::time_to_budget) n->fail("token_budget applies to objective time_to_budget");
        s.token_budget = n->as_number(1, 1e18);
    }
    if (s.objective == Objective::time_to_budget && s.token_budget <= 0)
        block.fail("objective time_to_budget needs token_budget (tokens to train, e.g. 15e12)");
    r.finish();
    return s;
}

}  // namespace sim::search
