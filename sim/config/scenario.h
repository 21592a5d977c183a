// The scenario file (DESIGN.md section 9, the user-facing contract) as plain
// data: which cluster, GPU and model, the workload, and the strategies to
// compare. load_scenario() resolves names to files under topologies/ and
// models/, applies --set overrides before validation, and checks every field,
// so everything downstream can trust what it is given.
#pragma once

#include "sim/config/serving_spec.h"
#include "sim/config/software_loader.h"
#include "sim/config/yaml_reader.h"
#include "sim/hw/gpu.h"
#include "sim/net/cluster.h"
#include "sim/net/collective_library.h"
#include "sim/parallel/partition/i_partitioner.h"
#include "sim/parallel/placement.h"
#include "sim/parallel/schedule/i_schedule.h"
#include "sim/workload/model.h"
#include "sim/workload/operators.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sim::config {

enum class Mode { inference, training };

struct WorkloadSpec {
    Mode mode = Mode::inference;
    workload::Precision precision;
    bool flash_attention = true;
    // The attention kernel, when the file names one (implies flash_attention).
    std::optional<workload::AttentionImpl> attention;
    workload::Dropout dropout;  // training only
    bool fuse_elementwise = true;
    // inference
    std::int64_t batch = 1;
    std::int64_t prompt_tokens = 0;
    std::int64_t output_tokens = 0;
    int decode_steps_simulated = 3;  // decode steps simulated around the mid-generation context
    // training
    std::int64_t seq_len = 0;
    std::int64_t global_batch = 0;  // sequences per iteration
    std::int64_t micro_batch = 1;
    workload::Recompute recompute = workload::Recompute::none;
    workload::RecomputeModules recompute_modules;  // `recompute_modules:` (recompute: selective)
    Time host_time_per_batch{};                    // input pipeline time per micro-batch, on the host
    // Mixture of experts: routing (balanced, random, zipf(s) or a measured histogram), capacity factor,
    // grouped GEMM (docs/moe.md); moe_where locates the block (unset when absent).
    workload::MoeRouting moe;
    SourceLocation moe_where;
    // `moe.dispatcher`: the run's token dispatcher (alltoall, allgather), in
    // place of the software profile's moe_dispatcher (empty: the profile's;
    // docs/moe.md section 3l); moe_dispatcher_where locates the key.
    std::string moe_dispatcher;
    SourceLocation moe_dispatcher_where;
    // `mode: serving`: requests arriving over time (docs/serving.md). The
    // mode is inference underneath; batch, prompt_tokens and output_tokens
    // then describe the largest iteration (max_tokens_per_iteration tokens of
    // one sequence), which sizes the workspace in the memory accounting.
    std::optional<ServingSpec> serving;
};

// Communication a stack overlaps with compute, as concurrent streams
// (docs/parallelism.md, "Overlaps"): tp_comm = TP collectives split into
// chunks that pipeline with their GEMMs (Megatron --tp-comm-overlap);
// grad_reduce = per-layer gradient buckets reduced during the backward
// (--overlap-grad-reduce, PyTorch DDP); param_gather = the distributed
// optimizer's parameter all-gather run during the next forward
// (--overlap-param-gather); tp_backward = the backward's input-gradient
// all-reduce (reduce-scatter under SP) of a column-parallel layer runs during
// its weight-gradient GEMM, and under SP the input all-gather that GEMM needs
// runs during the input-gradient GEMM (Megatron's asynchronous TP
// communication, on unless --no-async-tensor-model-parallel-allreduce).
// moe_a2a = the expert-parallel dispatch and combine all-to-alls of one
// micro-batch run on their own stream beside another micro-batch's compute:
// each backward item of the steady state is paired with the forward that
// follows it and their kernels alternate at the all-to-alls (Megatron-Core's
// --overlap-moe-expert-parallel-comm, DeepSeek-V3's DualPipe chunk pairs;
// docs/moe.md section 3e). two_batch = inference only: SGLang's two-batch
// overlap (--enable-two-batch-overlap): each pass's sequences split in two
// halves whose MoE layers alternate at the all-to-alls, each half's
// exchange on its own stream beside the other half's compute (docs/moe.md
// section 8a). Defaults: grad_reduce and tp_backward.
struct Overlap {
    bool tp_comm = false;
    bool grad_reduce = true;
    bool param_gather = false;
    bool tp_backward = true;
    bool moe_a2a = false;
    bool two_batch = false;
};

// Every overlap key, in one list read by every place that names them: the
// scenario and dataset readers, the check that an inference point gives only
// inference overlaps, a software profile's `overlaps` (what a stack can do),
// the --scenarios writer and the scale-out wire codec. A new overlap is a
// field above and a row of this list.
struct OverlapKey {
    const char* name;
    bool Overlap::*field;
    bool training;         // applies to training runs
    bool inference;        // applies to inference and serving
    bool listed_by_stack;  // a software profile's `overlaps` may list it (tp_backward: every stack can)
    bool published_field;  // one of the validation format's parallelism.overlap fields (../shared/validation)
};
extern const std::array<OverlapKey, 6> kOverlapKeys;

// The software stack that runs the model: name from kSoftwareNames, version
// as the stack tags it; its profile (software_loader.h) is ScenarioSpec::profile.
struct SoftwareSpec {
    std::string name, version;
    bool given() const { return !name.empty(); }
};
extern const std::vector<std::string> kSoftwareNames;

struct StrategySpec {
    std::string name;
    int tp = 1;
    // Context parallelism: each sequence split over cp GPUs (Megatron-Core's
    // load-balanced causal split, ring attention); training only.
    int cp = 1;
    // Expert parallelism: the experts of each MoE layer split over ep GPUs
    // of the dp x cp ranks (expert tensor parallelism = tp, as Megatron-Core's
    // default; docs/moe.md).
    int ep = 1;
    // Expert tensor parallelism (Megatron-Core --expert-tensor-parallel-size):
    // each expert's matrices split over etp GPUs; 0 (unset) means etp = tp.
    // With etp < tp the experts fold onto tp x dp x cp = etp x ep x edp
    // (MoE parallel folding, docs/moe.md section 1).
    int etp = 0;
    // Data-parallel attention (SGLang --enable-dp-attention with DeepEP):
    // each of the dp ranks runs its own requests' attention (tensor-parallel
    // over its tp GPUs) and its own KV cache; the MoE layers run EP over all
    // tp x dp GPUs. Inference and serving only, pp 1, ep = tp x dp (checked
    // in parallel::try_resolve_degrees; docs/moe.md sections 8, 8b).
    bool attention_dp = false;
    // Under attention_dp, SGLang's --moe-dense-tp-size (0: left out, None:
    // the dense MLPs gather every rank's tokens and run TP over the engine;
    // 1: each rank its own tokens with the whole MLP) and
    // --enable-dp-lm-head (false: the LM head gathered likewise; true: each
    // rank's own, over its tp GPUs). docs/moe.md section 8b.
    int moe_dense_tp_size = 0;
    bool enable_dp_lm_head = false;
    // pp and dp: kUnset when the file does not say, kAuto for `auto`
    // (whatever makes tp x cp x pp x dp equal the GPU count); resolution rules in
    // docs/parallelism.md.
    static constexpr int kUnset = -1, kAuto = 0;
    int pp = kUnset;
    int dp = kUnset;
    bool sp = false;
    int zero = 0;
    // A registered schedule (sim/parallel/schedule/); never null.
    const parallel::IPipelineSchedule* schedule = &parallel::default_pipeline_schedule();
    int virtual_stages = 1;
    int microbatches = 0;  // 0: auto
    // A registered partitioner (sim/parallel/partition/); never null.
    const parallel::IPartitioner* partition = &parallel::default_partitioner();
    parallel::CapacityLevel capacity = parallel::CapacityLevel::l2;
    Bytes capacity_bytes;             // when capacity == bytes
    std::string collective = "auto";  // collective algorithm by name
    Overlap overlap;
    // Uneven pipeline split (training or inference, uniform partition):
    // transformer layers on the first / last pipeline rank, all of its
    // virtual stages together; 0 = an even split.
    int first_stage_layers = 0, last_stage_layers = 0;
    parallel::Placement placement = parallel::Placement::tp_first;
    SourceLocation where;
};

struct ScenarioSpec {
    std::string name;
    std::string file;
    net::ClusterSpec cluster;
    hw::GpuSpec gpu;
    workload::ModelSpec model;
    WorkloadSpec workload;
    SoftwareSpec software;
    // The profile of `software` (topologies/software/<name>.yaml), or the
    // default profile when the scenario names no stack.
    SoftwareProfile profile;
    // The collective library's calibration (topologies/collectives/<name>.yaml,
    // config::kDefaultCollectiveLibrary): kept by config for the program's life.
    const net::CollectiveLibrary* collectives = nullptr;
    int gpus = 0;  // GPUs used (resolved)
    std::vector<StrategySpec> strategies;
    // sweep: field path -> values, in file order
    std::vector<std::pair<std::string, std::vector<YAML::Node>>> sweep;
    // search: the plan search's space, constraints and objective, read by
    // sim/search/ (docs/planning.md); kept as a node so its errors name
    // file:line:column.
    std::optional<Node> search;
};

// One --set PATH=VALUE (or one sweep coordinate). The value carries no source
// marks, so errors about it point at the override, not at a file line.
struct Override {
    std::string path;
    YAML::Node value;
    // A relative file path given on the command line (--set model=PATH)
    // resolves against the current folder; one in the scenario file's
    // sweep: block resolves beside the scenario, like the file's own.
    bool command_line = true;
};

// Parses "PATH=VALUE"; the value is read as YAML (so lists work), scalars stay text.
Override parse_override(const std::string& text);
Override make_override(const std::string& path, const YAML::Node& value, bool command_line = true);

ScenarioSpec load_scenario(const std::string& path, const std::vector<Override>& overrides);

}  // namespace sim::config
