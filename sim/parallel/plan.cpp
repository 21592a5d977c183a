// Plan construction helpers.
#include "sim/parallel/plan.h"

#include "sim/core/error.h"
#include "sim/core/limits.h"

#include <algorithm>

namespace sim::parallel {

const char* to_string(Phase p) {
    switch (p) {
        case Phase::forward: return "forward";
        case Phase::backward: return "backward";
        case Phase::optimizer: return "optimizer";
        case Phase::prefill: return "prefill";
        case Phase::decode: return "decode";
        case Phase::input: return "input";
    }
    return "?";
}

const char* to_string(StreamKind s) {
    switch (s) {
        case StreamKind::compute: return "compute";
        case StreamKind::tp_comm: return "tp-comm";
        case StreamKind::dp_comm: return "dp-comm";
        case StreamKind::p2p: return "p2p";
        case StreamKind::host: return "host";
        case StreamKind::ep_comm: return "ep-comm";
    }
    return "?";
}

std::uint32_t Plan::add_kernel(const hw::KernelDesc& k) {
    kernels.push_back(k);
    return static_cast<std::uint32_t>(kernels.size() - 1);
}

std::uint32_t Plan::add_group(Group g) {
    groups.push_back(std::move(g));
    return static_cast<std::uint32_t>(groups.size() - 1);
}

std::uint32_t Plan::add(Task t, const std::vector<std::uint32_t>& task_deps) {
    // The plan grows with the cluster, the layers and the micro-batches; a
    // scenario asking for more than the stated limit is refused here, before
    // it takes the machine's memory (task ids are 32-bit besides).
    const std::uint64_t cap = std::min<std::uint64_t>(limits().plan_tasks, kNone - 1);
    if (tasks.size() >= cap)
        throw LimitError(fmt::format("the simulation plan needs more than {} tasks (fewer GPUs simulated, layers or "
                                     "micro-batches make it smaller)",
                                     cap),
                         "plan-tasks", cap);
    const auto id = static_cast<std::uint32_t>(tasks.size());
    t.dep_begin = static_cast<std::uint32_t>(deps.size());
    t.dep_count = 0;
    for (const std::uint32_t d : task_deps) {
        if (d == kNone) continue;
        check(d < id, "plan dependency on a later task");
        deps.push_back(d);
        ++t.dep_count;
    }
    if (t.kind == TaskKind::collective) {
        check(t.group < groups.size(), "collective task without a group");
        if (t.op == net::CollectiveOp::all_to_all) ++all_to_alls;
        for (const std::uint32_t m : groups[t.group].members) streams.push(m, stream_index(t.stream), id);
    } else {
        streams.push(t.gpu, stream_index(t.stream), id);
    }
    if (compute_hash.size() != streams.size()) {
        compute_hash.resize(streams.size(), kHashBasis);
        kernel_off_compute.resize(streams.size(), 0);
    }
    if (t.stream == StreamKind::compute) {
        if (t.kind == TaskKind::collective) {
            for (const std::uint32_t m : groups[t.group].members) compute_hash[m] = hash_step(compute_hash[m], kNone);
        } else {
            compute_hash[t.gpu] = hash_step(compute_hash[t.gpu], t.kind == TaskKind::kernel ? t.kernel : kNone);
        }
    } else if (t.kind == TaskKind::kernel) {
        kernel_off_compute[t.gpu] = 1;
    }
    tasks.push_back(t);
    return id;
}

}  // namespace sim::parallel
