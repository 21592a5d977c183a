// Reading and checking the `serving:` block and trace files.
#include "sim/config/serving_spec.h"

#include "sim/config/csv_reader.h"

#include "sim/core/limits.h"

namespace sim::config {

namespace {

// At most this many requests in one run (about 200 bytes of state and
// metrics each); more is a hostile input.
constexpr std::int64_t kMaxRequests = 1'000'000;
constexpr std::int64_t kMaxLength = std::int64_t{1} << 24;

LengthSpec read_length(const Node& node) {
    MapReader r(node);
    LengthSpec l;
    const std::string kind = r.required("distribution").as_enum({"fixed", "uniform", "lognormal"});
    if (kind == "fixed") {
        l.kind = LengthDistribution::fixed;
        l.value = r.required("value").as_int(1, kMaxLength);
    } else if (kind == "uniform") {
        l.kind = LengthDistribution::uniform;
        l.min = r.required("min").as_int(1, kMaxLength);
        const Node mx = r.required("max");
        l.max = mx.as_int(1, kMaxLength);
        if (l.max < l.min) mx.fail(fmt::format("max {} is below min {}", l.max, l.min));
    } else {
        l.kind = LengthDistribution::lognormal;
        l.mean = r.required("mean").as_number(1, static_cast<double>(kMaxLength));
        l.sigma = r.required("sigma").as_number(0, 4);
        if (auto n = r.optional("min")) l.min = n->as_int(1, kMaxLength);
        if (auto n = r.optional("max")) {
            l.max = n->as_int(1, kMaxLength);
            if (l.max < l.min) n->fail(fmt::format("max {} is below min {}", l.max, l.min));
        }
    }
    r.finish();
    return l;
}

}  // namespace

std::vector<TraceRequest> read_trace_csv(const std::string& path) {
    const CsvFormat format{{"arrival_s,prompt_tokens,output_tokens"}, "trace", "requests", kMaxRequests};
    std::vector<TraceRequest> rows;
    int last_line = 0;
    read_csv(
        path, format,
        [&](const CsvRow& row) {
            const auto& fields = row.fields;
            TraceRequest t;
            if (!parse_csv_number(fields[0], t.arrival_s) || t.arrival_s < 0 || t.arrival_s > 86400.0 * 365)
                row.fail(fmt::format("arrival_s '{}' is not a time in seconds from 0 to one year", fields[0]));
            if (!rows.empty() && t.arrival_s < rows.back().arrival_s)
                row.fail(fmt::format("arrivals are not sorted ({} s after {} s)", t.arrival_s, rows.back().arrival_s));
            for (int k = 1; k <= 2; ++k) {
                std::int64_t v = 0;
                if (!parse_csv_int(fields[static_cast<std::size_t>(k)], v) || v < 1 || v > kMaxLength)
                    row.fail(fmt::format("{} '{}' is not a whole number from 1 to {}",
                                         k == 1 ? "prompt_tokens" : "output_tokens",
                                         fields[static_cast<std::size_t>(k)], kMaxLength));
                (k == 1 ? t.prompt_tokens : t.output_tokens) = v;
            }
            rows.push_back(t);
        },
        last_line);
    return rows;
}

ServingSpec read_serving(const Node& node, const std::string& scenario_file) {
    MapReader r(node);
    ServingSpec s;
    s.where = node.location();
    SourceLocation normalize_at;
    {
        const Node an = r.required("arrivals");
        MapReader a(an);
        const std::string p = a.required("process").as_enum({"poisson", "gamma", "fixed", "trace", "closed"});
        s.arrivals = p == "poisson" ? ArrivalProcess::poisson
                     : p == "gamma" ? ArrivalProcess::gamma
                     : p == "fixed" ? ArrivalProcess::fixed
                     : p == "trace" ? ArrivalProcess::trace
                                    : ArrivalProcess::closed;
        if (s.arrivals == ArrivalProcess::closed) {
            s.concurrency = a.required("concurrency").as_int(1, 1 << 20);
        } else if (s.arrivals == ArrivalProcess::trace) {
            const Node f = a.required("file");
            s.trace_file = resolve_beside(scenario_file, f.as_string());
            try {
                s.trace = read_trace_csv(s.trace_file);
            } catch (const LimitError& e) {
                f.fail(e.what());
            } catch (const ConfigError& e) {
                // A file that cannot be read at all (missing, a folder, a
                // device) has no line of its own: point at the file: key.
                if (e.where().line > 0) throw;
                f.fail(e.what());
            }
        } else {
            // A rate of 0 would never produce a request: at least one per day.
            const Node rate = a.required("rate");
            s.rate = rate.as_number(1.0 / 86400, 1e6);
            if (s.arrivals == ArrivalProcess::gamma) s.cv = a.required("cv").as_number(0.01, 100);
            if (auto n = a.optional("normalize")) {
                s.normalize = n->as_bool();
                normalize_at = n->location();
            }
        }
        a.finish();
    }
    const bool trace = s.arrivals == ArrivalProcess::trace;
    for (const char* key : {"prompt_tokens", "output_tokens"}) {
        auto n = r.optional(key);
        if (trace && n) n->fail("a trace gives the lengths of its requests; remove this key");
        if (!trace && !n) node.fail(fmt::format("missing key '{}' (a length distribution)", key));
        if (n) (std::string(key) == "prompt_tokens" ? s.prompt : s.output) = read_length(*n);
    }
    auto req = r.optional("requests");
    auto dur = r.optional("duration");
    if (req) s.requests = req->as_int(1, kMaxRequests);
    if (dur) s.duration_s = dur->as_time().seconds();
    if (dur && s.duration_s <= 0) dur->fail("the duration must be positive");
    if (!trace && !req && !dur) node.fail("give 'requests' (how many) or 'duration' (arrivals within a time)");
    if (s.arrivals == ArrivalProcess::closed && !req)
        node.fail("closed-loop clients need 'requests' (how many in all)");
    if (s.normalize && (!req || dur))
        throw ConfigError(normalize_at,
                          "normalize spreads 'requests' over requests / rate: give 'requests', not a duration");
    if (s.arrivals == ArrivalProcess::closed && dur) dur->fail("closed-loop clients take 'requests', not a duration");
    if (auto n = r.optional("warmup_requests")) {
        s.warmup_requests = n->as_int(0, kMaxRequests);
        if (req && s.warmup_requests >= s.requests)
            n->fail(
                fmt::format("warm-up of {} requests leaves none of the {} to measure", s.warmup_requests, s.requests));
        const auto rows = static_cast<std::int64_t>(s.trace.size());
        if (trace && s.warmup_requests >= rows)
            n->fail(fmt::format("warm-up of {} requests leaves none of the trace's {} to measure", s.warmup_requests,
                                rows));
    }
    if (auto n = r.optional("seed")) s.seed = static_cast<std::uint64_t>(n->as_int(0, INT64_MAX));
    if (auto n = r.optional("scheduler"))
        s.scheduler = &serve::serving_scheduler(n->as_enum(serve::serving_scheduler_names()));
    if (auto n = r.optional("preemption")) s.swap_preemption = n->as_enum({"recompute", "swap"}) == "swap";
    if (auto n = r.optional("async_scheduling")) {
        s.async_scheduling = n->as_bool();
        s.async_where = n->location();
    }
    if (auto n = r.optional("prefix_cache")) {
        MapReader pc(*n);
        s.prefix_where = n->location();
        s.shared_prefix_tokens = pc.required("shared_prefix_tokens").as_int(1, kMaxLength);
        pc.finish();
    }
    if (auto n = r.optional("router")) s.router = &serve::serving_router(n->as_enum(serve::serving_router_names()));
    if (auto n = r.optional("disaggregation")) {
        MapReader d(*n);
        s.disaggregation_where = n->location();
        s.prefill_replicas = d.required("prefill_replicas").as_int(1, 1 << 20);
        if (auto t = d.optional("decode_tp")) s.decode_tp = t->as_int(1, 1 << 20);
        if (auto t = d.optional("decode_dp")) {
            s.decode_dp = t->as_int(1, 1 << 20);
            // A decode engine with data-parallel attention has one attention
            // rank a GPU (attention TP inside a rank is not modelled).
            if (s.decode_tp > 1)
                throw ConfigError(t->location(), fmt::format("decode_dp {} needs decode_tp 1 (attention tensor "
                                                             "parallelism inside a DP rank is not supported), not {}",
                                                             s.decode_dp, s.decode_tp));
        }
        if (auto c = d.optional("connector"))
            s.kv_connector = c->as_enum({"nixl", "p2p-nccl"}) == "nixl" ? ServingSpec::KvConnector::nixl
                                                                        : ServingSpec::KvConnector::p2p_nccl;
        if (auto c = d.optional("dispatch")) s.serial_dispatch = c->as_enum({"concurrent", "serial"}) == "serial";
        d.finish();
    }
    if (auto n = r.optional("prefilled")) {
        s.prefilled = n->as_bool();
        s.prefilled_where = n->location();
        if (s.prefilled && s.prefill_replicas > 0)
            n->fail(
                "prefilled: the prefill runs outside the simulated cluster; disaggregation simulates it: give one "
                "or the other");
        if (s.prefilled && s.shared_prefix_tokens > 0)
            n->fail("prefilled requests bring their whole cache; prefix caching does not apply");
    }
    if (auto n = r.optional("max_batch")) s.max_batch = n->as_int(1, 1 << 20);
    if (auto n = r.optional("max_tokens_per_iteration")) s.max_tokens_per_iteration = n->as_int(1, kMaxLength);
    if (s.max_tokens_per_iteration == 0) s.max_tokens_per_iteration = s.scheduler->default_max_tokens();
    if (auto n = r.optional("block_size")) s.block_size = n->as_int(1, 4096);
    if (auto n = r.optional("decode_context_bucket")) s.decode_context_bucket = n->as_int(1, 1 << 20);
    if (auto n = r.optional("gpu_memory_utilization")) s.gpu_memory_utilization = n->as_number(0.01, 1.0);
    if (auto n = r.optional("slo")) {
        MapReader sl(*n);
        if (auto t = sl.optional("ttft_ms")) s.slo_ttft_ms = t->as_number(1e-6, 1e9);
        if (auto t = sl.optional("tpot_ms")) s.slo_tpot_ms = t->as_number(1e-6, 1e9);
        sl.finish();
    }
    r.finish();
    return s;
}

}  // namespace sim::config
