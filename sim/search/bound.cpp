// The iteration lower bound of bound.h. Three facts of the executor make it
// a bound (docs/planning.md): each simulated GPU runs its compute-stream
// kernels one at a time; a kernel never runs faster than its cost with all
// reads served by L2 (interference only slows it); and a micro-batch's
// forward visits the virtual stages in order, its backward in reverse.
#include "sim/search/bound.h"

#include "sim/parallel/strategy.h"

#include <algorithm>
#include <limits>

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

// The least time of a list of operators run back to back on one GPU. With
// TP communication overlap the emitter splits GEMMs into chunks whose costs
// differ from the whole: each op then counts only its FLOPs at the peak.
double ops_lower_bound(const config::ScenarioSpec& sc, const parallel::ResolvedStrategy& rs,
                       parallel::Placement placement, const std::vector<workload::Operator>& ops,
                       const hw::CostModel& cm) {
    const bool chunked = rs.overlap.tp_comm && rs.tp > 1;
    const double peak = sc.gpu.peak_of(sc.workload.precision.compute).per_s;
    const double eff = std::max(1.0, sc.profile.kernel_efficiency);
    // A TP collective the next kernel waits for (no overlap) moves at least
    // what one GPU must receive through its own links (NVLink + PCIe): an
    // all-reduce's result, S bytes; with sp, a reduce-scatter's shard, S / tp.
    // A group that fills k >= 2 whole nodes (tp-first placement puts TP ranks
    // on consecutive GPUs) also brings into each node, through its NICs, the
    // remote part of each element of that node's result: S bytes for an
    // all-reduce, S / k under sp.
    const auto& cl = sc.cluster;
    const auto bw = [&](net::LinkClass cls) {
        const auto& l = cl.links[static_cast<std::size_t>(cls)];
        return l ? l->bandwidth.bytes_per_s : 0.0;
    };
    const double gpu_in = bw(net::LinkClass::nvlink) + bw(net::LinkClass::pcie);
    const bool spans_nodes = placement == parallel::Placement::tp_first && cl.gpus_per_node > 0 &&
                             rs.tp > cl.gpus_per_node && rs.tp % cl.gpus_per_node == 0;
    const double node_in = cl.nics_per_node * bw(net::LinkClass::network);
    const int k = spans_nodes ? rs.tp / cl.gpus_per_node : 1;
    double t = 0;
    for (const auto& op : ops) {
        t += chunked ? op.kernel.flops.value / peak / eff : kernel_lower_bound(sc, op.kernel, cm);
        if (chunked || rs.tp < 2 || op.tp_sync == workload::TpSync::none) continue;
        const double bytes = op.tp_sync_bytes.as_double();
        double comm = gpu_in > 0 ? bytes / (rs.sp ? rs.tp : 1) / gpu_in : 0.0;
        if (spans_nodes && node_in > 0) comm = std::max(comm, bytes / (rs.sp ? k : 1) / node_in);
        t += comm;
    }
    return t;
}

}  // namespace

double iteration_lower_bound(const config::ScenarioSpec& sc, const config::StrategySpec& spec,
                             const parallel::ResolvedStrategy& rs, const std::vector<parallel::LayerRange>& vstages,
                             const hw::CostModel& cm) {
    if (sc.workload.mode != Mode::training || vstages.empty()) return 0;
    const auto opt = parallel::operator_options(sc, rs);
    const auto shape = parallel::shapes_for(sc, rs.microbatch_sizes.front()).train;
    // Every transformer layer of a ModelSpec has the same shape, so one
    // layer's forward and backward stand for each.
    const auto bound = [&](const std::vector<workload::Operator>& ops) {
        return ops_lower_bound(sc, rs, spec.placement, ops, cm);
    };
    const double f_layer = bound(workload::layer_forward(sc.model, 0, 0, shape, opt));
    const double b_layer = bound(workload::layer_backward(sc.model, 0, 0, shape, opt, sc.workload.recompute));
    const std::size_t nv = vstages.size();
    std::vector<double> fwd(nv), bwd(nv), stage_work(static_cast<std::size_t>(rs.pp), 0.0);
    for (std::size_t v = 0; v < nv; ++v) {
        const double layers = vstages[v].second - vstages[v].first;
        fwd[v] = f_layer * layers;
        bwd[v] = b_layer * layers;
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
    return std::max({busiest, last_stage, drain});
}

}  // namespace sim::search
