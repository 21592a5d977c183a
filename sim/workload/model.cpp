// Parameter counts and model FLOPs per token: closed forms of docs/workload-model.md.
#include "sim/workload/model.h"

namespace sim::workload {

namespace {

double norm_params(const ModelSpec& m) {
    const double h = static_cast<double>(m.hidden);
    return m.norm == NormKind::layernorm ? 2.0 * h : h;  // scale (+ shift)
}

// One MLP (one expert): up (+ gate) and down matrices, with their biases.
double mlp_params(const ModelSpec& m) {
    const double h = static_cast<double>(m.hidden);
    const double f = static_cast<double>(m.ffn);
    if (m.ffn_kind == FfnKind::swiglu) return 3.0 * h * f + (m.bias ? 2.0 * f + h : 0.0);
    return 2.0 * h * f + (m.bias ? f + h : 0.0);
}

double attention_params(const ModelSpec& m) {
    const double h = static_cast<double>(m.hidden);
    const double q = static_cast<double>(m.heads * m.head_dim);
    const double kv = static_cast<double>(m.kv_heads * m.head_dim);
    return h * (q + 2.0 * kv) + q * h + (m.bias ? q + 2.0 * kv + h : 0.0);
}

}  // namespace

std::int64_t attention_width(const ModelSpec& m) { return m.heads * m.head_dim; }

ParamCount count_parameters(const ModelSpec& m) {
    ParamCount c;
    const double h = static_cast<double>(m.hidden);
    const double shared = attention_params(m) + 2.0 * norm_params(m);
    if (m.experts > 0) {
        const double router = h * static_cast<double>(m.experts);
        c.per_layer = shared + router + static_cast<double>(m.experts) * mlp_params(m);
        c.per_layer_active = shared + router + static_cast<double>(m.top_k) * mlp_params(m);
    } else {
        c.per_layer = shared + mlp_params(m);
        c.per_layer_active = c.per_layer;
    }
    const double table = static_cast<double>(m.vocab) * h;
    c.embedding = table + (m.position == PositionKind::learned ? static_cast<double>(m.max_seq) * h : 0.0);
    c.lm_head = m.tied_embeddings ? 0.0 : table;
    c.final_norm = norm_params(m);
    const double layers = static_cast<double>(m.layers);
    c.total = layers * c.per_layer + c.embedding + c.lm_head + c.final_norm;
    c.total_active = layers * c.per_layer_active + c.embedding + c.lm_head + c.final_norm;
    c.flop_params = layers * c.per_layer_active + table + c.final_norm;
    return c;
}

double training_flops_per_token(const ModelSpec& m, std::int64_t seq_len) {
    return 6.0 * count_parameters(m).flop_params + 12.0 * static_cast<double>(m.layers) *
                                                       static_cast<double>(attention_width(m)) *
                                                       static_cast<double>(seq_len);
}

double inference_flops_per_token(const ModelSpec& m, std::int64_t context) {
    return 2.0 * count_parameters(m).flop_params +
           4.0 * static_cast<double>(m.layers) * static_cast<double>(attention_width(m)) * static_cast<double>(context);
}

}  // namespace sim::workload
