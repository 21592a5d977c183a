// The lower bounds of bound.h. Facts of the executor make them bounds
// (docs/planning.md): each stream of a simulated GPU runs one task at a
// time, in order; a kernel never runs faster than its cost with all reads
// served by L2 (interference only slows it); no flow beats its efficiency
// times a link's rate, and only the ring implements reduce-scatter and
// all-gather; a micro-batch's forward visits the virtual stages in order,
// its backward in reverse.
#include "sim/search/bound.h"

#include "sim/config/calibration_loader.h"
#include "sim/exec/comm_tuning.h"
#include "sim/net/collective/i_collective.h"
#include "sim/parallel/strategy.h"
#include "sim/workload/moe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>

namespace sim::search {

using config::Mode;

double kernel_lower_bound(const config::ScenarioSpec& sc, const hw::KernelDesc& k, const hw::CostModel& cm) {
    // The L2 never holds more than its capacity, so no kernel has more
    // resident bytes than that (hw::L2Cache keeps no tensor larger).
    const hw::KernelCost c = cm.cost(sc.gpu, k, hw::L2Residency{sc.gpu.l2_size});
    const double launch = c.launch_overhead.seconds();
    double t = c.duration.seconds() - launch;
    if (sc.profile.kernel_efficiency != 1.0) t /= sc.profile.kernel_efficiency;
    return launch + t;
}

namespace {

// Whether every registered algorithm that implements `op` is the ring: then
// any run of `op` is a ring (n - 1 barrier-separated steps, each rank
// sending its chunk to the next), whatever the strategy's collective or the
// protocol tuner picks.
bool ring_only(net::CollectiveOp op) {
    bool any = false;
    for (const auto* a : net::collective_algorithms()) {
        if (!a->implements(op)) continue;
        if (a->name() != "ring") return false;
        any = true;
    }
    return any;
}

// The least time of the collectives a candidate issues, each on its own
// (other traffic only takes link capacity away). A flow moves at most its
// efficiency times a link's rate (net/flow_network.h): the executor's
// tuning (exec/comm_tuning.h) gives flows inside a node protocol_efficiency
// and between nodes network_efficiency, and a protocol's bandwidth share
// (at most 1) only lowers them. docs/planning.md, "The bound".
struct CommBound {
    double gpu_in = 0;        // one GPU's links (NVLink + PCIe): everything it receives comes through them
    double node_in = 0;       // a node's NICs
    double net = 0;           // one network link: no flow between nodes is faster
    double net_latency = 0;   // a ring step across nodes: least step latency + the network link's
    double step_latency = 0;  // a ring step inside a node: least step latency
    int gpus_per_node = 0;
    bool rs_ring = false, ag_ring = false;
    // All-reduce: the strategy's algorithm ("auto" or a name), whether the
    // registry's all-reduce algorithms are the four known here, and whether
    // the cluster's NVSwitch can reduce (in-switch).
    std::string collective;
    bool ar_known = false, in_switch = false;

    // Layouts of a group for time(): > 0, that many ranks on each of the
    // whole nodes it fills; kOnePerNode, every rank on its own node;
    // kOneNode, the whole group inside one node; kUnknown.
    static constexpr int kUnknown = 0, kOnePerNode = -1, kOneNode = -2;

    CommBound(const config::ScenarioSpec& sc, const config::StrategySpec& spec)
        : gpus_per_node(sc.cluster.gpus_per_node), collective(spec.collective) {
        const auto& cl = sc.cluster;
        const auto link = [&](net::LinkClass cls) { return cl.links[static_cast<std::size_t>(cls)]; };
        const auto bw = [&](net::LinkClass cls) { return link(cls) ? link(cls)->bandwidth.bytes_per_s : 0.0; };
        double e_in = 1, e_net = 1;
        {
            // The executor's request (exec::make_request, with the library
            // it runs with): its step latencies and each protocol's; a ring
            // step pays the one it runs with.
            const auto& lib = sc.collectives ? *sc.collectives : config::collective_library();
            const auto req = exec::make_request(sc.gpu, cl, lib);
            e_in = req.protocol_efficiency;
            e_net = req.network_efficiency > 0 ? req.network_efficiency : e_in;
            Time in = req.step_latency, across = req.network_step_latency > Time{} ? req.network_step_latency : in;
            for (const auto& p : req.protocols) {
                in = std::min(in, p.step_latency);
                across = std::min(across, p.network_step_latency > Time{} ? p.network_step_latency : p.step_latency);
            }
            step_latency = in.seconds();
            net_latency = across.seconds();
        }
        e_in = std::clamp(e_in, 0.0, 1.0);
        e_net = std::clamp(e_net, 0.0, 1.0);
        gpu_in = std::max(e_in, e_net) * (bw(net::LinkClass::nvlink) + bw(net::LinkClass::pcie));
        net = e_net * bw(net::LinkClass::network);
        node_in = cl.nics_per_node * net;
        if (link(net::LinkClass::network)) net_latency += link(net::LinkClass::network)->latency.seconds();
        rs_ring = ring_only(net::CollectiveOp::reduce_scatter);
        ag_ring = ring_only(net::CollectiveOp::all_gather);
        std::vector<std::string> ar = net::collective_algorithm_names(net::CollectiveOp::all_reduce);
        std::sort(ar.begin(), ar.end());
        ar_known = ar == std::vector<std::string>{"hierarchical", "in-switch", "ring", "tree"};
        in_switch = cl.intra_node == net::IntraNode::nvswitch && cl.in_switch_reduction;
    }

    // What an all-reduce of `bytes` over n ranks brings into each rank, the
    // least over the algorithms it can run with (net/collective.h): `auto`
    // picks ring, in-switch (over > 4 GPUs of one NVSwitch node that can
    // reduce) or hierarchical (across nodes), never tree; a ring brings
    // 2(n-1)/n of the buffer into every rank, in-switch (n+1)/n,
    // hierarchical with r ranks on each of m nodes 2(r-1)/r + 2(m-1)/(m r),
    // tree (and anything not known here) at least the buffer.
    double all_reduce_in(double bytes, int n, int layout) const {
        if (!ar_known || layout == kUnknown) return bytes;
        const double dn = n;
        const bool one_node = layout == kOneNode;
        const double r = one_node ? dn : layout == kOnePerNode ? 1.0 : layout;
        const double m = dn / r;
        const double ring = 2 * (dn - 1) / dn, hier = 2 * (r - 1) / r + 2 * (m - 1) / (m * r), nvls = (dn + 1) / dn;
        double least = 1;
        if (collective == "auto") {
            least = ring;
            if (one_node && in_switch && n > 4) least = std::min(least, nvls);
            if (!one_node) least = std::min(least, hier);
        } else if (collective == "ring") {
            least = ring;
        } else if (collective == "hierarchical") {
            least = hier;
        } else if (collective == "in-switch") {
            least = nvls;
        }
        return std::max(1.0, least) * bytes;
    }

    // Whether an all-reduce over a group across nodes runs as a ring or
    // hierarchically: both then pass the buffer around the nodes in
    // 2(m - 1) steps of bytes / (r m) per rail, each crossing a network link.
    bool all_reduce_rails(int layout) const {
        return ar_known && layout != kUnknown && layout != kOneNode &&
               (collective == "auto" || collective == "ring" || collective == "hierarchical");
    }
    bool ring(net::CollectiveOp op) const {
        return op == net::CollectiveOp::reduce_scatter ? rs_ring : op == net::CollectiveOp::all_gather && ag_ring;
    }

    // A collective of `bytes` per rank over n ranks laid out as `per_node`
    // says (kOneNode and kUnknown: only the GPU's own links count).
    double time(net::CollectiveOp op, double bytes, int n, int per_node) const {
        if (n < 2 || bytes <= 0) return 0;
        const double dn = n;
        const bool is_ring = ring(op);
        // What one GPU must receive: an all-reduce's whole result; a
        // reduce-scatter's shard (the rest may come pre-reduced); an
        // all-gather's other shards. A ring moves (n - 1)/n of the buffer
        // into every rank for either.
        double gpu = op == net::CollectiveOp::all_reduce       ? all_reduce_in(bytes, n, per_node)
                     : op == net::CollectiveOp::reduce_scatter ? (is_ring ? (dn - 1) / dn * bytes : bytes / dn)
                                                               : (dn - 1) / dn * bytes;
        double t = gpu_in > 0 ? gpu / gpu_in : 0.0;
        // Every ring step (n - 1 of them) pays a step latency first.
        if (is_ring) t += (dn - 1) * step_latency;
        if (per_node == kUnknown || per_node == kOneNode || net <= 0) return t;
        const int r = per_node < 0 ? 1 : per_node;
        const double k = per_node < 0 ? dn : dn / r;  // nodes
        if (k < 2) return t;
        if (is_ring) {
            // r rings (one per rail) each carry bytes / r in n - 1 steps of
            // bytes / (n r); every step's flow into the next node crosses a
            // network link, after the step latency and that link's latency.
            t = std::max(t, (dn - 1) * (net_latency + bytes / dn / (r * net)));
        } else if (node_in > 0) {
            // A node receives the remote part of each element of its ranks'
            // results: the whole buffer for an all-reduce, its ranks' shards
            // for a reduce-scatter, the other nodes' shards for an all-gather.
            const double node = op == net::CollectiveOp::all_reduce       ? bytes
                                : op == net::CollectiveOp::reduce_scatter ? bytes / k
                                                                          : (k - 1) / k * bytes;
            t = std::max(t, node / node_in);
            if (op == net::CollectiveOp::all_reduce && all_reduce_rails(per_node))
                t = std::max(t, 2 * (k - 1) / k * bytes / (r * net));
        }
        return t;
    }
};

// The least time of a list of operators run back to back on one GPU, with
// the blocking TP collectives between them as the emitter issues them
// (parallel/emitter.h, emit_ops). With TP communication overlap the emitter
// splits GEMMs into chunks whose costs differ from the whole: each op then
// counts only its FLOPs at the peak, and no communication.
double ops_lower_bound(const config::ScenarioSpec& sc, const parallel::ResolvedStrategy& rs,
                       const workload::OperatorOptions& opt, parallel::Placement placement,
                       const std::vector<workload::Operator>& ops, const hw::CostModel& cm, const CommBound& comm) {
    using workload::TpSync;
    const bool chunked = rs.overlap.tp_comm && rs.tp > 1;
    const double peak = sc.gpu.peak_of(sc.workload.precision.compute).per_s;
    const double eff = std::max(1.0, sc.profile.kernel_efficiency);
    if (chunked) {
        double t = 0;
        for (const auto& op : ops) t += op.kernel.flops.value / peak / eff;
        return t;
    }
    // A TP group of tp-first placement (consecutive GPUs) that fills k >= 2
    // whole nodes has gpus_per_node ranks on each.
    const int g = comm.gpus_per_node;
    // One inside a node when tp divides gpus_per_node (the group's GPUs are
    // consecutive from a multiple of tp).
    const bool grouped = placement != parallel::Placement::pp_first && g > 0;
    const bool spans_nodes = grouped && rs.tp > g && rs.tp % g == 0;
    const int layout = spans_nodes ? g : grouped && g % rs.tp == 0 ? CommBound::kOneNode : CommBound::kUnknown;
    const auto tp_time = [&](net::CollectiveOp op, const workload::Operator& o) {
        return comm.time(op, o.tp_sync_bytes.as_double(), rs.tp, layout);
    };
    const auto reduce = opt.sequence_parallel ? net::CollectiveOp::reduce_scatter : net::CollectiveOp::all_reduce;
    const bool tp_on = rs.tp > 1;
    // Asynchronous TP communication in the backward (Overlap::tp_backward):
    // the all-gather a weight-gradient GEMM needs runs beside the
    // input-gradient GEMM before it, and that GEMM's reduction beside the
    // weight-gradient GEMM; what follows waits for both.
    double t = 0, early_end = -1, deferred_end = -1;
    for (std::size_t k = 0; k < ops.size(); ++k) {
        const auto& op = ops[k];
        const bool async = tp_on && rs.overlap.tp_backward && op.tp_sync == TpSync::after_column_input_grad &&
                           k + 1 < ops.size() && ops[k + 1].is_weight_grad;
        if (async && ops[k + 1].tp_sync == TpSync::before_column_parallel)
            early_end = t + tp_time(net::CollectiveOp::all_gather, ops[k + 1]);
        if (early_end >= 0 && op.is_weight_grad) {
            t = std::max(t, early_end);
            early_end = -1;
        } else if (tp_on && op.tp_sync == TpSync::before_column_parallel) {
            t += tp_time(net::CollectiveOp::all_gather, op);
        }
        t += kernel_lower_bound(sc, op.kernel, cm);
        if (deferred_end >= 0 && op.is_weight_grad) {
            t = std::max(t, deferred_end);
            deferred_end = -1;
        }
        if (tp_on && (op.tp_sync == TpSync::after_row_parallel || op.tp_sync == TpSync::after_column_input_grad)) {
            const double c = tp_time(reduce, op);
            if (async) deferred_end = t + c;
            else t += c;
        }
    }
    return std::max(t, deferred_end);
}

}  // namespace

double iteration_lower_bound(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                             const parallel::ResolvedStrategy& rs, const std::vector<parallel::LayerRange>& vstages,
                             const hw::CostModel& cm) {
    if (sc.workload.mode != Mode::training || vstages.empty()) return 0;
    const auto opt = parallel::operator_options(sc, rs);
    const auto shape = parallel::shapes_for(sc, rs.microbatch_sizes.front()).train;
    // A ModelSpec has at most two layer shapes: its first_dense_layers dense
    // ones, then the rest (MoE when the model has experts). One layer of each
    // kind stands for all of that kind, unless a per-layer expert histogram
    // gives the MoE layers different loads (docs/moe.md section 2).
    const CommBound comm(sc, spec);
    const auto bound = [&](const std::vector<workload::Operator>& ops) {
        return ops_lower_bound(sc, rs, opt, spec.placement, ops, cm, comm);
    };
    const std::int64_t dense_layers = sc.model.experts > 0 ? sc.model.first_dense_layers : sc.model.layers;
    const auto layer_bounds = [&](std::int64_t layer) {
        return std::pair{bound(workload::layer_forward(sc.model, layer, 0, shape, opt)),
                         bound(workload::layer_backward(sc.model, layer, 0, shape, opt, sc.workload.recompute))};
    };
    const auto dense = layer_bounds(0);
    const auto rest = dense_layers > 0 && dense_layers < sc.model.layers ? layer_bounds(dense_layers) : dense;
    // A per-layer histogram gives each MoE layer its own load: each is timed.
    std::vector<std::pair<double, double>> own;
    if (workload::loads_differ_by_layer(opt.moe) && sc.model.experts > 0)
        for (std::int64_t l = dense_layers; l < sc.model.layers; ++l) own.push_back(layer_bounds(l));
    const std::size_t nv = vstages.size();
    std::vector<double> fwd(nv), bwd(nv), stage_work(static_cast<std::size_t>(rs.pp), 0.0);
    for (std::size_t v = 0; v < nv; ++v) {
        const std::int64_t first = vstages[v].first, last = vstages[v].second;
        const auto n_dense = static_cast<double>(std::clamp(dense_layers, first, last) - first);
        const auto n_rest = static_cast<double>(last - first) - n_dense;
        if (own.empty()) {
            fwd[v] = dense.first * n_dense + rest.first * n_rest;
            bwd[v] = dense.second * n_dense + rest.second * n_rest;
            continue;
        }
        fwd[v] = dense.first * n_dense;
        bwd[v] = dense.second * n_dense;
        for (std::int64_t l = std::max(first, dense_layers); l < last; ++l) {
            fwd[v] += own[static_cast<std::size_t>(l - dense_layers)].first;
            bwd[v] += own[static_cast<std::size_t>(l - dense_layers)].second;
        }
    }
    // The emitter (parallel/emit_training.cpp) runs the embedding's forward
    // and backward in every micro-batch's pass through virtual stage 0, and
    // the final norm, LM head and loss in its pass through the last one, on
    // the same compute stream as that stage's layers: their least times
    // belong to those virtual stages. On a deep pipeline the head alone
    // adds a tenth to the last stage's work.
    fwd.front() += bound(workload::embedding_forward(sc.model, 0, shape, opt));
    bwd.front() += bound(workload::embedding_backward(sc.model, 0, shape, opt));
    fwd.back() += bound(workload::head_forward(sc.model, 0, shape, opt, true));
    bwd.back() += bound(workload::head_backward(sc.model, 0, shape, opt));
    // A schedule that places its chunks otherwise than virtual stage c x pp + s
    // on rank s (DualPipe: a rank holds virtual stages s and pp - 1 - s, each
    // run by half the micro-batches) is bounded by its busiest rank only: the
    // sum of its items' least times. Bounds (2)-(4) below assume that layout.
    const parallel::PipelineShape pshape{rs.pp, rs.microbatches, rs.virtual_stages};
    bool default_layout = rs.schedule->chunks(pshape) == rs.virtual_stages;
    for (int s = 0; s < rs.pp && default_layout; ++s)
        for (int c = 0; c < rs.virtual_stages; ++c)
            default_layout = default_layout && rs.schedule->virtual_stage(pshape, s, c) == c * rs.pp + s;
    if (!default_layout) {
        double busiest = 0;
        for (int s = 0; s < rs.pp; ++s) {
            double work = 0;
            for (const auto& it : rs.schedule->items(pshape, s)) {
                const auto v = static_cast<std::size_t>(rs.schedule->virtual_stage(pshape, s, it.chunk));
                if (it.forward) work += fwd[v];
                else if (it.part != parallel::BackwardPart::weight) work += bwd[v];  // a split backward counted once
            }
            busiest = std::max(busiest, work);
        }
        return busiest;
    }
    for (std::size_t v = 0; v < nv; ++v) stage_work[v % static_cast<std::size_t>(rs.pp)] += fwd[v] + bwd[v];
    const double m = rs.microbatches;
    // (1) The busiest stage runs every micro-batch's forward and backward.
    const double busiest = m * *std::max_element(stage_work.begin(), stage_work.end());
    // (2) The last stage starts only once a micro-batch has passed the
    // virtual stages before it (all on other GPUs), then does all its work.
    // Its last task is a backward (each forward's backward runs on the same
    // stage, later), of a virtual stage >= pp - 1, whose micro-batch must
    // then pass back through virtual stages pp - 2 ... 0.
    double fill = 0, drain_back = 0;
    for (std::size_t v = 0; v + 1 < static_cast<std::size_t>(rs.pp) && v < nv; ++v) {
        fill += fwd[v];
        drain_back += bwd[v];
    }
    const double last_stage = fill + m * stage_work.back() + drain_back;
    // (3) The first backward of virtual stage 0 waits for a micro-batch's
    // whole forward and the backward of every later virtual stage; then
    // stage 0 runs that backward for each micro-batch, one after another.
    double chain = 0;
    for (std::size_t v = 0; v < nv; ++v) chain += fwd[v] + (v > 0 ? bwd[v] : 0.0);
    const double drain = chain + m * bwd[0];
    double lb = std::max({busiest, last_stage, drain});
    if (rs.ep > 1) return lb;  // expert buckets run over other groups; their tail is not bounded here
    // (4) Data-parallel tail, per stage s (parallel/emit_training.cpp). The
    // stage's compute stream ends no earlier than C_s: its own work after
    // a micro-batch's forward through the virtual stages before it, and the
    // backward of virtual stage s m times after a whole forward and the
    // backward of every later virtual stage. The last gradient bucket it
    // issues waits for its last compute task (the schedule's last item is
    // a backward, and a stage's buckets go once the last micro-batch's
    // gradients are complete; without overlap.grad_reduce every bucket
    // waits for the stage's end); the dp_comm stream runs one collective at
    // a time in issue order; the optimizer step runs after the last of them
    // on the compute stream; with ZeRO the parameter all-gather follows it
    // (unless overlap.param_gather moves it into the next forward, where
    // it still takes its turn on the dp_comm stream).
    const auto& model = sc.model;
    const int n = rs.dp * rs.cp;
    const auto params = workload::count_parameters(model);
    const double wbytes = hw::bytes_per_element(opt.precision.weights);
    const double grad_bytes =
        config::gradient_reduce_bytes(sc.profile, wbytes, opt.precision.weights == hw::DType::bf16);
    const auto reduce = rs.zero >= 1 ? net::CollectiveOp::reduce_scatter : net::CollectiveOp::all_reduce;
    const bool gather_in_forward = rs.overlap.param_gather && rs.zero >= 1 && n > 1;
    // Tensor-parallel groups that fill whole nodes put every rank of a data-
    // parallel group (dp x cp, strides of tp GPUs or more) on its own node.
    const int g = comm.gpus_per_node;
    const int dp_layout = spec.placement != parallel::Placement::pp_first && g > 0 && rs.tp % g == 0
                              ? CommBound::kOnePerNode
                              : CommBound::kUnknown;
    double fwd_all = 0;
    for (const double f : fwd) fwd_all += f;
    for (int s = 0; s < rs.pp; ++s) {
        const auto su = static_cast<std::size_t>(s);
        double before = 0, after = 0;
        for (std::size_t v = 0; v < su; ++v) before += fwd[v];
        for (std::size_t v = su + 1; v < nv; ++v) after += bwd[v];
        const double compute_end = std::max(before + m * stage_work[su], fwd_all + after + m * bwd[su]);
        double stage_params = 0, buckets = 0, last_bucket = std::numeric_limits<double>::infinity();
        bool every_vstage_has_layers = true;
        const auto bucket = [&](double count) {
            const double t = comm.time(reduce, count / rs.tp * grad_bytes, n, dp_layout);
            buckets += t;
            last_bucket = std::min(last_bucket, t);
        };
        for (std::size_t v = su; v < nv; v += static_cast<std::size_t>(rs.pp)) {
            every_vstage_has_layers = every_vstage_has_layers && vstages[v].second > vstages[v].first;
            for (std::int64_t l = vstages[v].first; l < vstages[v].second; ++l) {
                const double c = workload::layer_parameters(params, model, l);
                stage_params += c;
                bucket(c);
            }
            if (v == 0) {
                stage_params += params.embedding;
                bucket(params.embedding);
            }
            if (v + 1 == nv) {
                stage_params += params.lm_head + params.final_norm;
                if (params.lm_head > 0) bucket(params.lm_head);
            }
        }
        stage_params /= rs.tp;
        const double local = stage_params / (rs.zero >= 1 && n > 1 ? n : 1);
        const double step = kernel_lower_bound(sc, workload::optimizer_step(local, opt).kernel, cm);
        const double gather =
            rs.zero >= 1 ? comm.time(net::CollectiveOp::all_gather, stage_params * wbytes, n, dp_layout) : 0.0;
        if (!std::isfinite(last_bucket) || !every_vstage_has_layers) last_bucket = 0;
        const double after_end = rs.overlap.grad_reduce ? last_bucket : buckets;
        lb = std::max(
            {lb, compute_end + after_end + step + (gather_in_forward ? 0.0 : gather), buckets + gather + step});
    }
    return lb;
}

InferenceBound inference_lower_bound(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                                     const parallel::ResolvedStrategy& rs,
                                     const std::vector<parallel::LayerRange>& vstages, const hw::CostModel& cm) {
    const auto& w = sc.workload;
    if (w.mode != Mode::inference || w.serving || vstages.empty() || rs.microbatch_sizes.empty()) return {};
    const auto opt = parallel::operator_options(sc, rs);
    const CommBound comm(sc, spec);
    const auto& model = sc.model;
    const std::size_t nv = vstages.size(), pp = static_cast<std::size_t>(rs.pp);
    // As parallel/builder.cpp's emit_inference: the prefill of every
    // micro-batch, then decode steps at mid-generation context; a pass walks
    // the virtual stages in order (virtual stage v on stage v mod pp).
    const std::int64_t steps = std::min<std::int64_t>(w.decode_steps_simulated, w.output_tokens);
    const std::int64_t mid = std::max<std::int64_t>(1, w.output_tokens / 2);
    const std::int64_t context_first = w.prompt_tokens + std::max<std::int64_t>(1, mid - steps / 2);
    const std::int64_t dense_layers = model.experts > 0 ? model.first_dense_layers : model.layers;
    // The least time of each virtual stage's forward pass of one shape
    // (em.forward_ops: the embedding on the first, the head on the last).
    const auto pass = [&](const workload::PassShape& shape) {
        const auto bound = [&](const std::vector<workload::Operator>& ops) {
            return ops_lower_bound(sc, rs, opt, spec.placement, ops, cm, comm);
        };
        const double dense = bound(workload::layer_forward(model, 0, 0, shape, opt));
        const double rest = dense_layers > 0 && dense_layers < model.layers
                                ? bound(workload::layer_forward(model, dense_layers, 0, shape, opt))
                                : dense;
        // A per-layer histogram gives each MoE layer its own load: each is timed.
        std::vector<double> own;
        if (workload::loads_differ_by_layer(opt.moe) && model.experts > 0)
            for (std::int64_t l = dense_layers; l < model.layers; ++l)
                own.push_back(bound(workload::layer_forward(model, l, 0, shape, opt)));
        std::vector<double> out(nv);
        for (std::size_t v = 0; v < nv; ++v) {
            const std::int64_t first = vstages[v].first, last = vstages[v].second;
            const auto n_dense = static_cast<double>(std::clamp(dense_layers, first, last) - first);
            if (own.empty()) {
                out[v] = dense * n_dense + rest * (static_cast<double>(last - first) - n_dense);
                continue;
            }
            out[v] = dense * n_dense;
            for (std::int64_t l = std::max(first, dense_layers); l < last; ++l)
                out[v] += own[static_cast<std::size_t>(l - dense_layers)];
        }
        out.front() += bound(workload::embedding_forward(model, 0, shape, opt));
        out.back() += bound(workload::head_forward(model, 0, shape, opt, false));
        return out;
    };
    // Micro-batches differ in size by at most one sequence: one pass per size.
    std::map<std::int64_t, std::pair<std::vector<double>, std::vector<double>>> by_size;
    for (const auto b : rs.microbatch_sizes) {
        if (by_size.count(b)) continue;
        // Decode at the least context of the two last simulated steps (a
        // kernel's cost does not fall as the context grows).
        const std::int64_t ctx = context_first + std::max<std::int64_t>(0, steps - 2);
        by_size.emplace(b, std::pair{pass({b, w.prompt_tokens, w.prompt_tokens}), pass({b, 1, ctx})});
    }
    const auto sum = [](const std::vector<double>& v, std::size_t from, std::size_t to) {
        double t = 0;
        for (std::size_t i = from; i < to && i < v.size(); ++i) t += v[i];
        return t;
    };
    const auto stage = [&](const std::vector<double>& v, std::size_t s) {
        double t = 0;
        for (std::size_t i = s; i < v.size(); i += pp) t += v[i];
        return t;
    };
    InferenceBound out;
    // TTFT, the last micro-batch's prefill end: (1) each micro-batch's
    // prefill passes every virtual stage in order; (2) each stage runs every
    // micro-batch's prefill on one compute stream, from the first one's
    // arrival (after the virtual stages before it).
    const auto& first_prefill = by_size.at(rs.microbatch_sizes.front()).first;
    for (std::size_t s = 0; s < pp && s < nv; ++s) {
        double work = 0;
        for (const auto b : rs.microbatch_sizes) work += stage(by_size.at(b).first, s);
        out.ttft_s = std::max(out.ttft_s, sum(first_prefill, 0, s) + work);
    }
    for (const auto& [b, p] : by_size) out.ttft_s = std::max(out.ttft_s, sum(p.first, 0, nv));
    if (steps < 2) return out;
    // TPOT, the mean over micro-batches j of end(k, j) - end(k - 1, j) for
    // the last simulated step k: (1) pass (k, j) starts after end(k - 1, j)
    // and passes every virtual stage; (2) between the two ends, the stage of
    // the last virtual stage runs pass (k - 1, j') for j' > j and (k, j')
    // for j' <= j, one micro-batch's pass each, in order on one stream.
    const std::size_t last = (nv - 1) % pp;
    double chain = 0, round = 0;
    for (const auto b : rs.microbatch_sizes) {
        chain += sum(by_size.at(b).second, 0, nv);
        round += stage(by_size.at(b).second, last);
    }
    out.tpot_s = std::max(chain / static_cast<double>(rs.microbatch_sizes.size()), round);
    return out;
}

}  // namespace sim::search
