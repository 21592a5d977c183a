// Mixture-of-experts routing under expert parallelism: how many tokens each
// expert receives (balanced, random, Zipf-skewed or measured popularity, capacity
// factor with token dropping), which EP rank is the straggler, and the all-to-all
// volume of token dispatch and combine. Closed forms of docs/moe.md; the
// operator builders (operators.cpp) and the plan builder use them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sim::workload {

// One table of a measured router load: each expert's tokens (or share) by
// expert id, and for messages each expert's row, its file line (0: no row)
// and text, and the table's last line.
struct ExpertTable {
    std::vector<double> weight;  // by expert id: finite, >= 0
    std::vector<int> line;
    std::vector<std::string> row;
    int last_line = 0;
};

// A measured router load (`routing: histogram(FILE)`, docs/moe.md section 2):
// the tokens (or shares) each expert received, by expert id, as read from a
// CSV file by sim/config/expert_histogram.h, which checks it against the
// model's experts. Without a `layer` column one table serves every MoE
// layer; with one, each MoE layer of the model has its own (by 0-based model
// layer index), and a layer without rows (a multi-token-prediction layer)
// takes the pooled table: the mean of the given layers' shares.
// The table it derives from is, without a layer column, the file's rows;
// with one, the pooled shares (line and row then empty). Its last_line is
// the file's last line.
struct ExpertHistogram : ExpertTable {
    std::string file;                            // the path as resolved beside the scenario or dataset
    bool per_layer = false;                      // the file has a layer column
    std::map<std::int64_t, ExpertTable> layers;  // per_layer: the layers with rows, by model layer index
    // The weights layer `layer` routes by (its own, or the pooled ones).
    const std::vector<double>& weights(std::int64_t layer) const {
        if (!per_layer) return weight;
        const auto it = layers.find(layer);
        return it == layers.end() ? weight : it->second.weight;
    }
};

// How tokens choose experts (a scenario's workload.moe block).
struct MoeRouting {
    // random: each token picks top_k distinct experts uniformly at random
    // (Megatron-Core's --moe-router-force-load-balancing: normal random
    // logits); the straggler gets the expected largest load of the group.
    // histogram: each expert's share is its measured count over their sum.
    enum class Kind { balanced, random, zipf, histogram };
    Kind kind = Kind::balanced;
    // zipf: expert i (0-based) is chosen with probability proportional to
    // 1 / (i + 1)^s, experts numbered hottest first.
    double zipf_s = 0;
    // histogram: the measured load (shared: options are copied per plan).
    std::shared_ptr<const ExpertHistogram> histogram;
    // Capacity factor: each expert takes at most ceil(cf x routed / experts)
    // tokens and drops the rest (GShard, Switch); 0 = no dropping.
    double capacity_factor = 0;
    // One grouped GEMM per projection over the local experts (Megatron
    // --moe-grouped-gemm) instead of one GEMM per expert.
    bool grouped_gemm = false;
    // Under recompute: full, whether the recomputed forward repeats the
    // dispatch and combine all-to-alls (true, the plain recompute). false:
    // the layer keeps the tokens its experts received and the combined
    // output, and recomputes locally (docs/moe.md section 3c).
    bool recompute_exchange = true;
    // Megatron-Core's --moe-router-dtype fp32 (workload.moe.router_dtype):
    // Router.gating casts the tokens and the router weight to FP32 and runs
    // the router GEMM on the copies (TF32 tensor cores under the NGC
    // containers), whose backward casts the gradients back (docs/moe.md
    // section 3i). false: the GEMM in the activations' dtype.
    bool router_fp32 = false;
};

// Parses "balanced", "random", "zipf(S)" with 0 < S <= 8, or "histogram(FILE)"
// (FILE, not yet read, into `histogram_file` when given); empty error when it parses.
MoeRouting::Kind parse_routing(const std::string& text, double& zipf_s, std::string& error,
                               std::string* histogram_file = nullptr);
// "balanced", "random", "zipf(S)" or "histogram(FILE)" with the resolved file.
std::string to_string(const MoeRouting& r);

// The token counts of one MoE layer over an EP group of `ep` ranks, each
// holding `tokens` tokens (one micro-batch) and experts / ep consecutive
// experts (rank j holds experts j x E/ep ... (j+1) x E/ep - 1, as
// Megatron-Core places them).
struct ExpertLoad {
    std::int64_t routed = 0;               // token copies routed by the group: ep x tokens x top_k
    std::vector<std::int64_t> per_expert;  // tokens each expert computes (after dropping)
    std::int64_t dropped = 0;              // token copies over capacity
    int hot_rank = 0;                      // the EP rank with the most tokens (lowest index on ties)
    std::int64_t hot_tokens = 0;           // tokens that rank computes
    // The tokens of each local expert of the hot rank, in expert order.
    std::vector<std::int64_t> hot_local;
};

// E[max of n independent standard normals] (n >= 1): 0 for n = 1, 1 / sqrt(pi)
// for n = 2, 2.0697 for n = 32; by quadrature of n x phi(x) Phi(x)^(n-1).
double expected_max_normal(int n);

// Under random routing, the expected tokens of the EP group's busiest rank
// (docs/moe.md section 2): each of the ep x tokens tokens sends a hypergeometric
// number of its top_k copies to a rank of E / ep experts, mean m = k / ep,
// variance v = k (1/ep) (1 - 1/ep) (E - k) / (E - 1); the ranks' loads sum to the
// routed copies (correlation -1 / (ep - 1)), so the largest is
//   N m + sqrt(N v) x sqrt(ep / (ep - 1)) x expected_max_normal(ep),  N = ep x tokens.
double random_routing_hot_tokens(std::int64_t experts, std::int64_t top_k, int ep, std::int64_t tokens);

// Throws ModelError when ep does not divide experts or top_k > experts, or
// when a histogram does not give one weight per expert with a positive sum.
// `layer` (0-based model layer index) picks a per-layer histogram's table;
// every other routing is the same for every layer. kPooledMoeLayer: the pooled
// table (the loads of a layer without its own rows).
inline constexpr std::int64_t kPooledMoeLayer = -1;
ExpertLoad expert_load(std::int64_t experts, std::int64_t top_k, int ep, std::int64_t tokens, const MoeRouting& r,
                       std::int64_t layer = kPooledMoeLayer);

// Whether the routing gives MoE layers different loads (a histogram with a
// layer column): then activation memory takes the worst layer, the plan
// bound times each MoE layer, and the emitter each layer's own load.
bool loads_differ_by_layer(const MoeRouting& r);

// The most tokens the hot rank computes in any of the MoE layers
// first .. last - 1 (expert_load(...).hot_tokens of each); one layer's when
// the loads do not differ by layer.
std::int64_t worst_hot_tokens(std::int64_t experts, std::int64_t top_k, int ep, std::int64_t tokens,
                              const MoeRouting& r, std::int64_t first, std::int64_t last);

// Bytes per rank of one dispatch (or combine) all-to-all, in the nccl-tests
// convention the direct algorithm takes (the buffer a rank holds; each of
// the ep - 1 peers exchanges 1/ep of it): the hot rank's tokens x hidden x
// bytes per element, so that the hot rank's links carry what it receives.
// 0 when ep == 1 (no exchange).
double all_to_all_bytes(const ExpertLoad& load, int ep, std::int64_t hidden, double bytes_per_element);

// Bytes per element of a token sent to the experts in FP8 (DeepSeek-V3
// report section 3.3, DeepEP): 1 byte and one FP32 scale per 1 x 128 tile,
// 1 + 4 / 128 = 1.03125.
inline constexpr double kFp8DispatchBytesPerElement = 1.0 + 4.0 / 128.0;

}  // namespace sim::workload
