// Loading a transformer model description: a parasim model file
// (models/<name>.yaml, or the same fields inlined in a scenario or a
// validation dataset) or a Hugging Face config.json.
//
// Model file fields (all required unless marked optional):
//   name, source (optional, free text), layers, hidden, heads,
//   kv_heads (optional, default heads; must divide heads),
//   head_dim (optional, default hidden / heads; then heads must divide hidden),
//   ffn, ffn_kind (gelu | swiglu), vocab, max_seq, norm (layernorm | rmsnorm),
//   tied_embeddings, position (rope | learned), bias,
//   moe (optional: {experts, top_k}).
// Unknown keys, missing fields and contradictions are ConfigError with
// file:line:column.
//
// Hugging Face configs: LlamaForCausalLM, MistralForCausalLM,
// MixtralForCausalLM, GPT2LMHeadModel (GPT2Model), GPTNeoXForCausalLM. Their
// other fields are ignored (HF configs carry many); an unknown architecture is
// a ConfigError naming it and the supported list.
#pragma once

#include <string>
#include <vector>

#include "sim/config/yaml_reader.h"
#include "sim/workload/model.h"

namespace sim::config {

// A parsed YAML mapping holding the model fields above.
workload::ModelSpec load_model(const Node& map);
// A Hugging Face config.json already parsed (JSON is YAML).
workload::ModelSpec load_hf_config(const Node& map);
// `.json` -> Hugging Face config; anything else -> a parasim model file.
workload::ModelSpec load_model_file(const std::string& path);
// A bare name -> data_dir()/models/<name>.yaml (ConfigError with
// did-you-mean when there is no such file); a directory -> its config.json;
// anything else is taken as a path.
std::string model_path(const std::string& name_or_path);
// The value of a scenario's `model:` field: a name or path (scalar) or an
// inline model (map). Errors about the reference point at `node`.
workload::ModelSpec load_model_ref(const Node& node);

// Names of the shipped models (files under data_dir()/models), sorted.
std::vector<std::string> shipped_models();
// The supported Hugging Face architectures.
const std::vector<std::string>& hf_architectures();

}  // namespace sim::config
