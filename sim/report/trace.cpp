// Chrome trace writer.
#include "sim/report/trace.h"

#include "sim/report/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace sim::report {

namespace {

std::string task_name(const parallel::Plan& plan, const parallel::Task& t) {
    switch (t.kind) {
        case parallel::TaskKind::kernel: return plan.kernels[t.kernel].name;
        case parallel::TaskKind::transfer: return fmt::format("send to GPU {}", t.peer);
        case parallel::TaskKind::collective:
            return fmt::format("{} x{}", net::to_string(t.op), plan.groups[t.group].gpus.size());
        case parallel::TaskKind::host:
            // Training's input pipeline, or a decode step's host waits (docs/software-profiles.md §2g).
            return t.phase == parallel::Phase::decode ? "decode step host" : "input batch";
    }
    return "?";
}

}  // namespace

std::string chrome_trace(const std::string& run_name, const parallel::Plan& plan, const exec::ExecResult& result) {
    std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
    bool first = true;
    auto add = [&](const std::string& ev) {
        out += first ? "" : ",\n";
        out += ev;
        first = false;
    };
    for (std::size_t g = 0; g < result.gpus.size(); ++g) {
        const int pid = result.gpus[g].real_gpu;
        add(fmt::format("{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,\"args\":{{\"name\":{}}}}}", pid,
                        json_string(fmt::format("GPU {} ({})", pid, run_name))));
        for (std::size_t s = 0; s < parallel::kStreamCount; ++s) {
            // The ep-comm stream (overlap.moe_a2a only) is named where it ran
            // something, so traces of every other run keep their five threads.
            if (static_cast<parallel::StreamKind>(s) == parallel::StreamKind::ep_comm &&
                result.gpus[g].intervals[s].empty())
                continue;
            add(fmt::format("{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":{}}}}}",
                            pid, s, json_string(parallel::to_string(static_cast<parallel::StreamKind>(s)))));
        }
        std::vector<std::pair<Time, int>> comm_edges;
        for (std::size_t s = 0; s < parallel::kStreamCount; ++s) {
            for (const auto& iv : result.gpus[g].intervals[s]) {
                const auto& t = plan.tasks[iv.task];
                std::string args = fmt::format("\"phase\":{},\"microbatch\":{}",
                                               json_string(parallel::to_string(t.phase)), t.microbatch);
                if (t.kind == parallel::TaskKind::kernel) {
                    const auto& k = plan.kernels[t.kernel];
                    args += fmt::format(",\"flops\":{},\"bytes\":{}", k.flops.value,
                                        k.bytes_read.value + k.bytes_written.value);
                } else {
                    // A host task moves no bytes (its record's size field holds its duration).
                    args += fmt::format(",\"bytes\":{}",
                                        t.kind == parallel::TaskKind::host ? std::uint64_t{0} : t.bytes.value);
                }
                add(fmt::format(
                    "{{\"ph\":\"X\",\"name\":{},\"cat\":{},\"pid\":{},\"tid\":{},\"ts\":{:.6f},\"dur\":{:.6f},"
                    "\"args\":{{{}}}}}",
                    json_string(task_name(plan, t)),
                    json_string(iv.kind == exec::IntervalKind::communication   ? "communication"
                                : iv.kind == exec::IntervalKind::host          ? "host"
                                : iv.kind == exec::IntervalKind::memory_kernel ? "memory-bound"
                                                                               : "compute-bound"),
                    pid, s, iv.start.us_f(), (iv.end - iv.start).us_f(), args));
                if (iv.kind == exec::IntervalKind::communication) {
                    comm_edges.emplace_back(iv.start, 1);
                    comm_edges.emplace_back(iv.end, -1);
                }
            }
        }
        std::sort(comm_edges.begin(), comm_edges.end());
        int active = 0;
        for (std::size_t i = 0; i < comm_edges.size(); ++i) {
            active += comm_edges[i].second;
            if (i + 1 < comm_edges.size() && comm_edges[i + 1].first == comm_edges[i].first) continue;
            add(
                fmt::format("{{\"ph\":\"C\",\"name\":\"communication streams active\",\"pid\":{},\"ts\":{:.6f},"
                            "\"args\":{{\"active\":{}}}}}",
                            pid, comm_edges[i].first.us_f(), active));
        }
    }
    // Link utilisation per class over time, as counters of a "links" process.
    constexpr int kLinksPid = 1 << 24;
    add(fmt::format("{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,\"args\":{{\"name\":\"links\"}}}}",
                    kLinksPid));
    for (const auto& s : result.link_samples)
        add(
            fmt::format("{{\"ph\":\"C\",\"name\":\"link utilisation\",\"pid\":{},\"ts\":{:.6f},"
                        "\"args\":{{\"nvlink\":{},\"pcie\":{},\"network\":{}}}}}",
                        kLinksPid, s.at.us_f(), s.utilization[0], s.utilization[1], s.utilization[2]));
    return out + "\n]}\n";
}

}  // namespace sim::report
