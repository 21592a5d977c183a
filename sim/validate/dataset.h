// Datasets of published measurements (the format of parasim's reference
// set of published measurements, documented in docs/validation.md):
// training runs, inference runs, single GEMMs, attention kernels,
// collectives and memory-bandwidth runs, each with its hardware, its setup
// and the measured value; and, parasim's extension of the shared format,
// serving runs (requests arriving over time, simulated by `parasim serve`'s
// engine; docs/validation.md §2, "Serving points").
//
// load_dataset() reads and checks the whole file before anything is
// simulated. A malformed file (a missing or misspelt field, a bare number
// where a unit is due, a metric that does not fit the kind, a duplicate id)
// is a ConfigError naming file:line:column and the YAML path. What a
// well-formed point asks that parasim cannot simulate (an unknown GPU,
// context or expert parallelism) is not an error here: translate.h reports
// such a point as skipped, with the reason.
//
// Fields a point leaves out were not stated by its source; the loader fills
// them with the documented defaults (docs/validation.md §2) and records each
// default it applied in Point::defaults, so the report can say which.
#pragma once

#include "sim/config/scenario.h"
#include "sim/config/yaml_reader.h"
#include "sim/core/units.h"
#include "sim/net/collective.h"
#include "sim/workload/model.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sim::validate {

enum class Kind { training, inference, gemm, attention, collective, memory, serving };
inline constexpr std::size_t kKindCount = 7;
inline constexpr std::array<Kind, kKindCount> kAllKinds = {
    Kind::training, Kind::inference, Kind::gemm, Kind::attention, Kind::collective, Kind::memory, Kind::serving};
const char* to_string(Kind k);

// What was measured (README "Metrics"). Each kind accepts only some.
enum class Metric {
    iteration_s,           // training: wall time of one iteration
    tokens_per_s_per_gpu,  // training or inference tokens/s divided by the GPUs
    tokens_per_s,          // inference output tokens/s, whole run
    ttft_ms,               // inference: time to first token
    tpot_ms,               // inference: time between two output tokens of one sequence
    time_us,               // gemm, attention: time of the kernel(s)
    busbw_GBps,            // collective: nccl-tests bus bandwidth, GB/s
    rdma_GBps,             // MoE token all-to-all: DeepEP's "RDMA" bandwidth, bytes x nodes_per_token / top_k / time
    bandwidth_GBps,        // memory: achieved bandwidth, GB/s
    requests_per_s,        // serving: finished requests per second
    e2e_ms                 // serving: a request's arrival to its last token
};
const char* to_string(Metric m);

// Serving latency metrics are a statistic over the measured requests
// (nearest-rank percentiles, as `parasim serve` reports them).
enum class Statistic { none, p50, p90, p99, mean };
const char* to_string(Statistic s);

struct HardwareSpec {
    std::string gpu;              // catalog name; unknown names are skipped, not errors
    int gpus = 1;                 // GPUs in the run
    int gpus_per_node = 0;        // 0 until defaulted
    std::string intra_node;       // nvswitch | nvlink-bridge | pcie
    bool network = false;         // a network between nodes was given
    std::string network_kind;     // infiniband | ethernet-roce
    Bandwidth network_bandwidth;  // per GPU, per direction
    SourceLocation where;
};

struct ParallelismSpec {
    int tp = 1, pp = 1, dp = 1, cp = 1, ep = 1;
    int etp = 0;  // expert tensor parallel (a parasim extension of the format); 0: = tp
    bool sp = false;
    bool attention_dp = false;  // parasim's extension: data-parallel attention (docs/moe.md section 8)
    int moe_dense_tp_size = 0;  // SGLang's flags under attention_dp (docs/moe.md section 8b)
    bool enable_dp_lm_head = false;
    int zero = 0;
    const parallel::IPipelineSchedule* schedule = &parallel::default_pipeline_schedule();
    int virtual_stages = 1;
    config::Overlap overlap;                            // the defaults unless the point states them
    int first_stage_layers = 0, last_stage_layers = 0;  // 0: an even pipeline split
    SourceLocation where;
};

struct GemmOp {
    std::int64_t m = 0, n = 0, k = 0;
    hw::DType dtype = hw::DType::bf16;
    // parasim's extension: one grouped kernel of `groups` GEMMs of this shape, each with
    // its own weights (an MoE layer's local experts, docs/moe.md section 4); 1 = a GEMM
    std::int64_t groups = 1;
};

using workload::AttentionImpl;  // attention points: flash2 or flash3
struct AttentionOp {
    std::int64_t batch = 0, heads = 0, head_dim = 0, seq_len = 0;
    bool causal = false;
    hw::DType dtype = hw::DType::bf16;
    AttentionImpl impl = AttentionImpl::flash2;
    bool backward = false;  // pass: fwd_bwd (forward then backward kernel)
};

struct CollectiveSpec {
    net::CollectiveOp op = net::CollectiveOp::all_reduce;
    Bytes bytes;                     // nccl-tests size: the buffer per rank
    std::string algorithm = "auto";  // parasim's name: auto | ring | in-switch (README's nvls)
    net::TokenRouting tokens;        // all_to_all of MoE tokens: `tokens: {top_k, experts, groups, group_limit}`
};

enum class MemoryOpKind { copy, read, write, triad };
struct MemoryOp {
    MemoryOpKind op = MemoryOpKind::copy;
    Bytes bytes;  // bytes the kernel moves in all (read + written)
};

struct Point {
    std::string id;
    Kind kind = Kind::training;
    std::string source, notes;
    HardwareSpec hardware;
    // training, inference and serving (serving: workload.serving is set)
    workload::ModelSpec model;
    config::WorkloadSpec workload;
    ParallelismSpec parallelism;
    // kernels: the one matching `kind`
    GemmOp gemm;
    AttentionOp attention;
    CollectiveSpec collective;
    MemoryOp memory;
    config::SoftwareSpec software;  // the stack that ran, when the point says
    Metric metric = Metric::iteration_s;
    Statistic statistic = Statistic::none;  // serving latency metrics only
    // Serving: the point's `serving:` block as flow YAML (a trace file's
    // path resolved), which scenario_yaml writes into a `parasim serve` scenario.
    std::string serving_yaml;
    double measured = 0;
    // "micro_batch=1", ...: the defaults the loader applied for fields the point left out.
    std::vector<std::string> defaults;
    // "software=tensorrt-llm 0.6.1 (FILE:LINE:COL)": fields an annotations file
    // set because the point did not state them (annotations.h).
    std::vector<std::string> annotated;
    SourceLocation where;
};

struct Dataset {
    std::string file;
    std::vector<Point> points;
};

// Reads a dataset file; ConfigError with file:line:column on any malformed field.
Dataset load_dataset(const std::string& path);
// The same, from a parsed root (tests use config::load_string).
Dataset parse_dataset(const config::Node& root);

}  // namespace sim::validate
