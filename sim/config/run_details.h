// Readers shared by the scenario loader and the validation dataset loader
// (one parser per field, so the two formats cannot drift): what a run's
// software did (the attention kernel, dropout, the communication overlaps,
// the software stack), the run's shape (batch and sequence keys) and the
// parallelism keys a scenario's strategy and a point's `parallelism` have
// in common. Where the two schemas differ, and why: docs/architecture.md,
// "Validation datasets and scenarios".
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
// `moe: {routing: balanced | random | zipf(S) | histogram(FILE), capacity_factor: X,
// grouped_gemm: B, recompute_exchange: B, dispatcher: alltoall | allgather, router_dtype: activations | fp32}`
// (docs/moe.md), each optional; sets
// w.moe_where. A histogram FILE is read here, beside the file holding `node`;
// check_expert_histogram checks it against the model.
void read_moe(const Node& node, WorkloadSpec& w);
// The run's `moe.dispatcher`, when given, replaces the profile's moe_dispatcher
// (its evidence: the run's file); an error at the key when the profile's other
// MoE keys contradict it (moe_dispatcher_conflict).
void apply_moe_dispatcher(const WorkloadSpec& w, SoftwareProfile& p);
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

// A training run's shape: seq_len and global_batch (required), micro_batch
// and recompute (optional: WorkloadSpec's defaults, 1 and none), and
// recompute_modules (selective recompute only).
void read_training_shape(MapReader& r, WorkloadSpec& w);
// An inference run's shape: batch, prompt_tokens and output_tokens (required).
void read_inference_shape(MapReader& r, WorkloadSpec& w);

// The parallelism keys both formats give alike, each optional, into a
// StrategySpec or a validation ParallelismSpec: tp, cp, ep, etp, sp, attention_dp,
// moe_dense_tp_size, enable_dp_lm_head, zero,
// schedule, virtual_stages, overlap, first_stage_layers and
// last_stage_layers. What depends on the format (pp and dp, defaults, the
// schedule's rules) is the caller's.
template <class Spec>
void read_shared_parallelism(MapReader& r, Spec& s) {
    if (auto n = r.optional("tp")) s.tp = static_cast<int>(n->as_int(1, 1 << 20));
    if (auto n = r.optional("cp")) s.cp = static_cast<int>(n->as_int(1, 1 << 20));
    if (auto n = r.optional("ep")) s.ep = static_cast<int>(n->as_int(1, workload::kMaxExperts));
    if (auto n = r.optional("etp")) s.etp = static_cast<int>(n->as_int(1, 1 << 20));
    if (auto n = r.optional("sp")) s.sp = n->as_bool();
    if (auto n = r.optional("attention_dp")) s.attention_dp = n->as_bool();
    if (auto n = r.optional("moe_dense_tp_size")) {
        // SGLang's --moe-dense-tp-size: 1 or left out (None, the engine's
        // whole TP group); its server_args asserts the same.
        const auto v = n->as_int(0, 1 << 20);
        if (v != 1)
            throw ConfigError(n->location(),
                              fmt::format("moe_dense_tp_size: {} is not one of 1 (SGLang's --moe-dense-tp-size accepts "
                                          "1, or none for the engine's whole TP group: leave the key out)",
                                          v));
        s.moe_dense_tp_size = 1;
    }
    if (auto n = r.optional("enable_dp_lm_head")) s.enable_dp_lm_head = n->as_bool();
    if (auto n = r.optional("zero")) s.zero = static_cast<int>(n->as_int(0, 3));
    if (auto n = r.optional("schedule")) s.schedule = &read_schedule(*n);
    if (auto n = r.optional("virtual_stages")) s.virtual_stages = static_cast<int>(n->as_int(1, 1024));
    if (auto n = r.optional("overlap")) s.overlap = read_overlap(*n);
    read_stage_layers(r, s.first_stage_layers, s.last_stage_layers);
}

}  // namespace sim::config
