// Readers for what a run's software actually did, shared by the scenario
// loader and the validation dataset loader (one parser per field, so the two
// formats cannot drift): the attention kernel, dropout, the communication
// overlaps, the uneven pipeline split and the software stack.
#pragma once

#include "sim/config/scenario.h"
#include "sim/config/yaml_reader.h"

namespace sim::config {

// `attention: flash1 | flash2 | flash3 | cudnn | triton | xformers | naive`.
workload::AttentionImpl read_attention_impl(const Node& n);
// `dropout: {hidden: P, attention: P}`, each in [0, 1), both optional.
workload::Dropout read_dropout(const Node& n);
// `overlap: {tp_comm: B, grad_reduce: B, param_gather: B}`; a key left out
// keeps its default (Overlap's).
Overlap read_overlap(const Node& n);
// `software: {name: N, version: V}`; the version is a string (quote '24.07').
SoftwareSpec read_software(const Node& n);

// Reconciles `attention` with `flash_attention` in one workload map: the
// kernel decides flash_attention (naive = false); naming both with opposite
// meanings is an error at the attention node.
void apply_attention(WorkloadSpec& w, const std::optional<Node>& attention, const std::optional<Node>& flash);

// Reads first_stage_layers / last_stage_layers of a strategy map into `s`.
void read_stage_layers(MapReader& r, int& first, int& last);

// A workload map's dtypes: `dtype` (any of hw::dtype_names()), then
// `weight_dtype` when `weight_dtype` is true (a scenario has it, a
// validation point does not), and `kv_dtype`. Weights default to the
// compute dtype (fp32 for tf32), the KV cache to the weights'.
workload::Precision read_precision(MapReader& r, bool weight_dtype);
// `recompute: none | selective | full`.
workload::Recompute read_recompute(const Node& n);
// `recompute_modules: [core_attn, mla_up_proj]`, under recompute: selective only.
workload::RecomputeModules read_recompute_modules(const Node& n, workload::Recompute recompute);
// mla_up_proj needs a model with multi-head latent attention (Megatron-Core
// refuses it otherwise); `workload` is the block that holds the list.
void check_recompute_modules(const workload::RecomputeModules& m, const workload::ModelSpec& model,
                             const Node& workload);
// `schedule:` one of the registered pipeline schedules.
const parallel::IPipelineSchedule& read_schedule(const Node& n);

}  // namespace sim::config
