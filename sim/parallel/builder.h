// Lowers a scenario's workload under one strategy into a Plan: resolves the
// strategy (tp x cp x pp x dp = GPUs), partitions layers into pipeline stages
// (uniform or cache-aware), accounts memory per GPU, and emits the task DAG
// for a training iteration (GPipe, 1F1B or interleaved 1F1B) or an inference
// run (prefill, then decode steps with the KV cache growing).
#pragma once

#include "sim/config/scenario.h"
#include "sim/hw/cost_model.h"
#include "sim/hw/memory.h"
#include "sim/parallel/partitioner.h"
#include "sim/parallel/plan.h"

#include <string>
#include <vector>

namespace sim::parallel {

struct ResolvedStrategy {
    int tp = 1, pp = 1, dp = 1;
    int cp = 1;   // context parallel: each sequence over cp GPUs (training only)
    int ep = 1;   // expert parallel: MoE experts over ep of the tp x dp x cp GPUs (docs/moe.md)
    int etp = 0;  // expert tensor parallel; 0: = tp (Megatron-Core's default)
    int expert_tp() const { return etp > 0 ? etp : tp; }
    // The experts are laid out apart from the dense part (expert-parallel or
    // expert-data-parallel groups of their own): ep > 1 or etp != tp.
    bool folds_experts() const { return ep > 1 || expert_tp() != tp; }
    // Expert-data-parallel degree: tp x dp x cp / (etp x ep).
    int edp() const { return tp * dp * cp / (expert_tp() * ep); }
    bool sp = false;
    // Data-parallel attention's dense MLPs and LM head gathered over the dp
    // ranks (SGLang's default; 1: each rank's own). docs/moe.md section 8b.
    int dp_dense_gather = 1, dp_head_gather = 1;
    // Data-parallel attention (attention_dp): SGLang's DeepEP layout, whose
    // shared experts are whole on every GPU (docs/moe.md section 8b).
    bool attention_dp = false;
    int zero = 0;
    const IPipelineSchedule* schedule = &default_pipeline_schedule();
    int virtual_stages = 1;
    config::Overlap overlap;                       // communication overlapped with compute
    int microbatches = 1;                          // per DP replica
    std::vector<std::int64_t> microbatch_sizes;    // sequences in each micro-batch
    std::vector<LayerRange> stage_layers;          // per pipeline stage
    std::vector<LayerRange> virtual_stage_layers;  // per virtual stage vs = chunk x pp + stage
    // Cache-aware partitioning: the capacity level each stage's working set
    // fits ("l2", "hbm", or "none"), and what the partitioner concluded.
    std::vector<std::string> stage_fit;
    std::vector<double> stage_working_set_bytes;
    std::string partition_note;
};

struct BuildOptions {
    bool collapse = true;  // simulate one DP replica and one TP rank per stage
};

struct PlanBuild {
    config::StrategySpec spec;
    ResolvedStrategy strategy;
    Plan plan;
    hw::MemoryVerdict memory;  // the most loaded GPU
    int memory_stage = 0;      // the stage of that GPU
    // Inference markers: plan.markers = prefill end per micro-batch (m of
    // them), then decode step k of micro-batch j at index m + k*m + j.
    int decode_steps = 0;
    std::int64_t decode_context_first = 0;  // context length of the first simulated decode step
    double tokens_per_iteration = 0;        // training: global batch x sequence length
    double model_flops = 0;                 // training: per iteration, whole cluster (6N + attention)
    bool collapsed = true;                  // symmetry collapsing in effect (BuildOptions, less shared fabrics)
};

// ConfigError at the strategy's location when it cannot be formed (tp x cp x
// pp x dp != GPUs, cp > 1 in inference, heads not divisible by tp, ...). The plan is left empty when
// memory.oom: an out-of-memory strategy is never simulated.
PlanBuild build_plan(const config::ScenarioSpec& scenario, const config::StrategySpec& spec,
                     const hw::CostModel& cost_model, const BuildOptions& options);

// One iteration of a serving engine (docs/serving.md): sequences that share
// a shape form a group; the linear layers, norms and the embedding run once on
// all the iteration's tokens (a flattened batch, as vLLM runs it), the
// attention kernel once per group, the LM head on the `sampled` sequences
// that produce a token. A decode group holds `sequences` sequences of 1 new
// token at `context` tokens each.
struct IterationGroup {
    std::int64_t sequences = 1, new_tokens = 1, context = 1;
};
struct IterationBatch {
    std::vector<IterationGroup> groups;
    std::int64_t sampled = 0;
};

// overlap.two_batch in serving: the sequences of `batch`'s first half, in
// its groups' order (SGLang's compute_split_seq_index over a ragged batch:
// decode-only, n / 2 rounded down; otherwise the first k sequences whose new
// tokens reach half the total rounded down, 1 <= k <= n - 1); 0 when n < 2
// (no split). emit_two_batch.cpp.
std::int64_t serving_two_batch_first_half(const IterationBatch& batch, bool decode_only);

// The plan of one serving iteration under `base`'s resolved strategy (from
// build_plan of the same scenario). One marker: the end of the iteration on
// the last stage. `stage` >= 0: pipeline stage `stage`'s part alone (its
// layers, the embedding on the first, the LM head on the last; no sends),
// which the serving loop times per stage (docs/serving.md, "Pipeline
// parallelism").
Plan build_iteration_plan(const config::ScenarioSpec& scenario, const PlanBuild& base, const IterationBatch& batch,
                          int stage = -1);

}  // namespace sim::parallel
