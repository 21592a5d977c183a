// parasim list: what is available by name.
#include "apps/cli.h"
#include "sim/config/gpu_loader.h"
#include "sim/config/model_loader.h"
#include "sim/hw/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

namespace parasim_cli {

namespace {
std::vector<std::string> yaml_stems(const std::string& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
        if (e.is_regular_file() && e.path().extension() == ".yaml") out.push_back(e.path().stem().string());
    std::sort(out.begin(), out.end());
    return out;
}
}  // namespace

int cmd_list(const Args& args) {
    const std::string what = args.empty() ? "" : args.front();
    const std::string data = PARASIM_DATA_DIR;
    if (what == "gpus") {
        sim::config::GpuCatalog catalog;
        for (const auto& n : catalog.names()) {
            const auto& g = catalog.get(n);
            fmt::print("{:<16} {:<8} {:>4} SMs  {:>7.1f} TFLOP/s fp16  {:>6.0f} GB/s  {}\n", n, g.architecture,
                       g.sm_count, g.supports(sim::hw::DType::fp16) ? g.peak_of(sim::hw::DType::fp16).per_s / 1e12 : 0.0,
                       g.memory_bandwidth.bytes_per_s / 1e9, sim::format_bytes(g.memory_capacity.as_double()));
        }
        return 0;
    }
    if (what == "clusters") {
        for (const auto& n : yaml_stems(data + "/topologies")) fmt::print("{}\n", n);
        return 0;
    }
    if (what == "models") {
        for (const auto& n : yaml_stems(data + "/models")) fmt::print("{}\n", n);
        return 0;
    }
    if (what == "schedules") {
        fmt::print("gpipe             all forwards, then all backwards\n"
                   "1f1b              one forward, one backward after a warm-up of pp - stage - 1 forwards\n"
                   "interleaved-1f1b  1F1B over virtual_stages model chunks per GPU (Megatron-LM order)\n");
        return 0;
    }
    if (what == "collectives") {
        fmt::print("auto          in-switch for all-reduce over > 4 GPUs of an NVSwitch node with reduction,\n"
                   "              hierarchical across nodes, ring otherwise\n"
                   "ring          ring reduce-scatter / all-gather / all-reduce, chained broadcast\n"
                   "tree          double binary tree all-reduce, binary tree broadcast\n"
                   "hierarchical  intra-node reduce-scatter, inter-node all-reduce per rail, intra-node all-gather\n"
                   "in-switch     NVLink SHARP all-reduce on one NVSwitch node\n");
        return 0;
    }
    if (what == "cost-models") {
        fmt::print("roofline      roofline with tiling, wave quantization and measured ceilings\n");
        return 0;
    }
    throw UsageError("list needs one of: gpus, clusters, models, schedules, collectives, cost-models");
}

}  // namespace parasim_cli
