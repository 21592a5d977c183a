// Parameter counts and model FLOPs per token: closed forms of docs/workload-model.md.
#include "sim/workload/model.h"

#include <algorithm>

namespace sim::workload {

namespace {

double norm_params(const ModelSpec& m) {
    const double h = static_cast<double>(m.hidden);
    return m.norm == NormKind::layernorm ? 2.0 * h : h;  // scale (+ shift)
}

// One MLP of intermediate size f (one expert, or the dense MLP): up (+
// gate) and down matrices, with their biases.
double mlp_params(const ModelSpec& m, std::int64_t ffn) {
    const double h = static_cast<double>(m.hidden);
    const double f = static_cast<double>(ffn);
    if (m.ffn_kind == FfnKind::swiglu) return 3.0 * h * f + (m.bias.mlp ? 2.0 * f + h : 0.0);
    return 2.0 * h * f + (m.bias.mlp ? f + h : 0.0);
}

// Multi-head latent attention (DeepSeek-V2 section 2.1): q down (+ its
// RMSNorm) and up, or one q projection; kv down to the latent plus the
// shared rope key (+ the latent's RMSNorm); kv up to per-head nope keys
// and values; the output projection from heads x v_head_dim.
double mla_params(const ModelSpec& m, const MlaAttention& x) {
    const double h = static_cast<double>(m.hidden), a = static_cast<double>(m.heads);
    const double qk = static_cast<double>(x.qk_nope_head_dim + x.qk_rope_head_dim);
    const double q_lora = static_cast<double>(x.q_lora_rank), kv_lora = static_cast<double>(x.kv_lora_rank);
    const double q = x.q_lora_rank > 0 ? h * q_lora + q_lora + q_lora * a * qk : h * a * qk;
    const double kv = h * (kv_lora + static_cast<double>(x.qk_rope_head_dim)) + kv_lora +
                      kv_lora * a * static_cast<double>(x.qk_nope_head_dim + x.v_head_dim);
    return q + kv + a * static_cast<double>(x.v_head_dim) * h;
}

// Grouped-query attention: the fused QKV projection, the output
// projection, their biases and the per-head q/k norms.
double gqa_params(const ModelSpec& m, const GqaAttention& g) {
    const double h = static_cast<double>(m.hidden);
    const double q = static_cast<double>(m.heads * m.head_dim);
    const double kv = static_cast<double>(m.kv_heads * m.head_dim);
    return h * (q + 2.0 * kv) + q * h + (m.bias.qkv ? q + 2.0 * kv : 0.0) + (m.bias.out ? h : 0.0) +
           (g.qk_norm ? 2.0 * static_cast<double>(m.head_dim) : 0.0);
}

double attention_params(const ModelSpec& m) {
    if (const auto* x = m.mla()) return mla_params(m, *x);
    return gqa_params(m, std::get<GqaAttention>(m.attention));
}

}  // namespace

std::int64_t attention_width(const ModelSpec& m) {
    // MLA: scores over qk_nope + qk_rope per head, values of v_head_dim: the
    // mean of the two stands for both matmuls of the FLOP rule.
    if (const auto* x = m.mla()) return m.heads * (x->qk_head_dim() + x->v_head_dim) / 2;
    return m.heads * m.head_dim;
}

ParamCount count_parameters(const ModelSpec& m) {
    ParamCount c;
    const double h = static_cast<double>(m.hidden);
    const double shared = attention_params(m) + static_cast<double>(m.norms_per_layer()) * norm_params(m);
    double layers_total = 0, layers_active = 0;  // summed over the layers
    const double layers = static_cast<double>(m.layers);
    if (m.experts > 0) {
        const double router = h * static_cast<double>(m.experts);
        const double expert = mlp_params(m, m.expert_ffn());
        const double always = shared + router + static_cast<double>(m.shared_experts) * expert;
        c.per_layer = always + static_cast<double>(m.experts) * expert;
        c.per_layer_active = always + static_cast<double>(m.top_k) * expert;
        const auto dense_layers = static_cast<double>(std::min(m.first_dense_layers, m.layers));
        if (dense_layers > 0) c.dense_layer = shared + mlp_params(m, m.ffn);
        layers_total = (layers - dense_layers) * c.per_layer + dense_layers * c.dense_layer;
        layers_active = (layers - dense_layers) * c.per_layer_active + dense_layers * c.dense_layer;
    } else {
        c.per_layer = shared + mlp_params(m, m.ffn);
        c.per_layer_active = c.per_layer;
        layers_total = layers_active = layers * c.per_layer;
    }
    const double table = static_cast<double>(m.vocab) * h;
    c.embedding = table + (m.position == PositionKind::learned ? static_cast<double>(m.max_seq) * h : 0.0);
    c.lm_head = m.tied_embeddings ? 0.0 : table;
    c.final_norm = norm_params(m);
    c.total = layers_total + c.embedding + c.lm_head + c.final_norm;
    c.total_active = layers_active + c.embedding + c.lm_head + c.final_norm;
    c.flop_params = layers_active + table + c.final_norm;
    if (m.mtp_layers > 0) {
        c.mtp_module = 2.0 * h * h + 3.0 * norm_params(m);  // eh_proj; enorm, hnorm, final norm
        c.mtp = static_cast<double>(m.mtp_layers) * (c.per_layer + c.mtp_module);
    }
    return c;
}

double layer_parameters(const ParamCount& c, const ModelSpec& m, std::int64_t l) {
    return m.experts > 0 && !m.is_moe_layer(l) ? c.dense_layer : c.per_layer;
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
