// The `serving:` block of a `mode: serving` workload (docs/scenario-reference.md,
// docs/serving.md) as plain data: the arrival process, the length
// distributions or a trace file, the run length, the scheduler and its
// limits, the KV cache and the SLOs. read_serving() checks every field; a
// trace file is read and checked here, so a bad row stops the run at
// load time with file:line and the row.
#pragma once

#include "sim/config/yaml_reader.h"
#include "sim/serve/router/i_router.h"
#include "sim/serve/scheduler/i_scheduler.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sim::config {

// closed: `concurrency` clients, each sending its next request the moment
// its previous one finishes (a closed loop without think time, as
// `vllm bench serve --max-concurrency C --request-rate inf`).
enum class ArrivalProcess { poisson, gamma, fixed, trace, closed };
enum class LengthDistribution { fixed, uniform, lognormal };

struct LengthSpec {
    LengthDistribution kind = LengthDistribution::fixed;
    std::int64_t value = 0;         // fixed
    std::int64_t min = 1, max = 0;  // uniform bounds; lognormal clamp (max 0: the model's max_seq)
    double mean = 0, sigma = 0;     // lognormal: mean of the lengths and sigma of their logarithm
};

// One row of a trace file.
struct TraceRequest {
    double arrival_s = 0;
    std::int64_t prompt_tokens = 0, output_tokens = 0;
};

struct ServingSpec {
    ArrivalProcess arrivals = ArrivalProcess::poisson;
    double rate = 0;  // requests per second (poisson, gamma, fixed)
    double cv = 1;    // gamma: coefficient of variation of the inter-arrival gaps
    // poisson, gamma, fixed: rescale the gaps so that the last of the
    // `requests` arrives at exactly requests / rate, the first one gap after
    // 0 (vllm bench serve's request timing; docs/serving.md, "Requests").
    bool normalize = false;
    std::int64_t concurrency = 0;     // closed: clients
    std::vector<TraceRequest> trace;  // trace: the file's rows, in order
    std::string trace_file;
    LengthSpec prompt, output;         // not with a trace
    std::int64_t requests = 0;         // how many requests (0: bounded by duration)
    double duration_s = 0;             // arrivals within this span (0: bounded by requests)
    std::int64_t warmup_requests = 0;  // the first ones, excluded from the metrics
    std::uint64_t seed = 1;
    const serve::IServingScheduler* scheduler = &serve::default_serving_scheduler();
    std::int64_t max_batch = 256;
    std::int64_t max_tokens_per_iteration = 0;  // 0: the scheduler's default
    std::int64_t block_size = 16;
    // Decode iterations take the time of their mean context rounded up to a
    // multiple of this (1: exact; docs/serving.md gives the error bound).
    std::int64_t decode_context_bucket = 1;
    double gpu_memory_utilization = 0.9;  // share of HBM the engine may use (vLLM's default)
    std::optional<double> slo_ttft_ms, slo_tpot_ms;
    // Replicas (gpus / tp of them) share the arrivals through this router.
    const serve::IRouter* router = &serve::default_serving_router();
    // Disaggregation: the first prefill_replicas replicas only prefill and
    // the others only decode (0: every replica does both).
    std::int64_t prefill_replicas = 0;
    std::int64_t decode_tp = 0;  // the decode replicas' tp (0: the strategy's)
    // The decode pool as engines of decode_dp GPUs with data-parallel
    // attention (tp 1, dp = ep = decode_dp; docs/serving.md, "Disaggregated
    // prefill and decode"); 0: replicas of decode_tp.
    std::int64_t decode_dp = 0;
    // How a decode replica receives a cache (vLLM's kv_connector; docs/serving.md,
    // "The handover's software"): the NixlConnector reads it with one descriptor
    // per block and region, posted at the profile's kv_descriptor_post each; the
    // P2pNcclConnector has the prefill worker push each layer's K and V of the
    // request as one NCCL send, so no descriptor is posted (its bytes still move).
    enum class KvConnector { nixl, p2p_nccl };
    KvConnector kv_connector = KvConnector::nixl;
    // How the proxy gives a request to its decode instance: concurrently with
    // the prefill (the decode instance has it when the prefill ends), or
    // serially (vLLM's demo proxies: only once the prefill instance has
    // answered, so the request then passes the decode instance's own front
    // end, its intake and latency, before its cache is read or scheduled).
    bool serial_dispatch = false;
    // A decode server measured alone (LMSYS's and DeepSeek's decode
    // profiles): every request arrives with its prompt's KV cache in place
    // and its first token sampled, its prefill run outside the simulated
    // cluster; every replica (engine) only decodes.
    bool prefilled = false;
    SourceLocation prefilled_where;
    // What a preempted sequence loses: its cache (recompute: prefilled again
    // when readmitted) or nothing (swap: its blocks go to host memory over
    // PCIe and come back before it runs again).
    bool swap_preemption = false;
    // The engine's per-step host time (the software profile's
    // sequence_overhead) runs while the GPU executes the previous step
    // (vLLM's --async-scheduling) instead of before each step
    // (docs/serving.md, "Host time of the serving engine").
    bool async_scheduling = false;
    SourceLocation async_where;
    // Prefix caching: every prompt starts with the same shared_prefix_tokens
    // (a system prompt); a replica keeps its whole blocks once computed
    // (0: no prefix caching).
    std::int64_t shared_prefix_tokens = 0;
    SourceLocation prefix_where;
    SourceLocation disaggregation_where;
    SourceLocation where;
};

// Reads the block at `node`; `scenario_file` locates a relative trace path.
ServingSpec read_serving(const Node& node, const std::string& scenario_file);

// Reads a trace CSV (header `arrival_s,prompt_tokens,output_tokens`, docs/serving.md).
std::vector<TraceRequest> read_trace_csv(const std::string& path);

}  // namespace sim::config
