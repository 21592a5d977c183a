// Calibration files -> net::CollectiveLibrary and hw::AttentionFit (see
// calibration_loader.h). The loader checks ranges, not values: what each
// number is and where it comes from is in the file.
#include "sim/config/calibration_loader.h"
#include "sim/config/data_dir.h"

#include "sim/config/provenance.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

namespace sim::config {

namespace {

namespace fs = std::filesystem;

// A latency above 10 ms is no collective library's per-step or base cost: a unit slip.
Time latency(const Node& n) {
    const Time t = n.as_time();
    if (t > Time::from_seconds_ceil(0.01)) n.fail("a latency above 10 ms is not plausible");
    return t;
}

double positive_fraction(const Node& n) {
    const double v = n.as_number(0, 1);
    if (!(v > 0)) n.fail("must be above 0");
    return v;
}

net::ProtocolCalibration read_protocol(const Node& node) {
    MapReader r(node);
    net::ProtocolCalibration p;
    const Node name = r.required("name");
    p.name = name.as_string();
    if (p.name.empty()) name.fail("must not be empty");
    p.bandwidth_share = positive_fraction(sourced(r, "bandwidth_share"));
    {
        MapReader links(sourced(r, "link_latency"));
        for (std::size_t c = 0; c < net::kLinkClassCount; ++c)
            p.link_latency[c] = latency(links.required(net::to_string(static_cast<net::LinkClass>(c))));
        links.finish();
    }
    p.step_overhead = latency(sourced(r, "step_overhead"));
    p.base_latency = latency(sourced(r, "base_latency"));
    r.finish();
    return p;
}

}  // namespace

net::CollectiveLibrary load_collective_library(const Node& root, const std::string& expected_name) {
    MapReader r(root);
    net::CollectiveLibrary lib;
    const Node name = r.required("name");
    lib.name = name.as_string();
    if (!expected_name.empty() && lib.name != expected_name)
        name.fail(fmt::format("name '{}' differs from the file name '{}'", lib.name, expected_name));
    lib.description = r.required("description").as_string();
    {
        const Node list = r.required("protocols");
        const auto elements = list.elements();
        if (elements.empty() || elements.size() > 8) list.fail("give 1 to 8 protocols");
        bool simple = false;
        for (const Node& e : elements) {
            net::ProtocolCalibration p = read_protocol(e);
            for (const auto& q : lib.protocols)
                if (q.name == p.name) e.fail(fmt::format("protocol '{}' listed twice", p.name));
            simple = simple || p.name == "Simple";
            lib.protocols.push_back(std::move(p));
        }
        if (!simple) list.fail("one protocol must be named 'Simple' (in-switch reduction runs it)");
    }
    {
        MapReader nvls(r.required("in_switch"));
        lib.in_switch_efficiency = positive_fraction(sourced(nvls, "efficiency"));
        lib.in_switch_latency = latency(sourced(nvls, "latency"));
        // NVLS's pipeline: optional (a library without it pays the latency
        // alone), but its three values only together.
        if (nvls.has("channels") || nvls.has("chunk") || nvls.has("fill_rounds")) {
            for (const char* key : {"channels", "chunk", "fill_rounds"})
                if (!nvls.has(key))
                    nvls.node().fail(
                        fmt::format("give channels, chunk and fill_rounds together ('{}' is missing)", key));
            lib.in_switch_channels = static_cast<int>(sourced(nvls, "channels").as_int(1, 1024));
            const Node chunk = sourced(nvls, "chunk");
            lib.in_switch_chunk = chunk.as_bytes();
            if (lib.in_switch_chunk.value < 1024 || lib.in_switch_chunk.value > (std::uint64_t{1} << 30))
                chunk.fail("must be 1 KiB to 1 GiB");
            lib.in_switch_fill = sourced(nvls, "fill_rounds").as_number(0, 1000);
        }
        nvls.finish();
    }
    {
        MapReader in(r.required("interference"));
        lib.comm_sms = static_cast<int>(sourced(in, "comm_sms").as_int(0, 1024));
        lib.comm_hbm_share = sourced(in, "hbm_share").as_number(0, 1);
        in.finish();
    }
    r.finish();
    return lib;
}

net::CollectiveLibrary load_collective_library_file(const std::string& path) {
    return load_collective_library(load_file(path), fs::path(path).stem().string());
}

std::string default_collectives_dir() { return std::string(sim::config::data_dir()) + "/topologies/collectives"; }

std::vector<std::string> collective_library_names() { return yaml_file_names(default_collectives_dir()); }

const net::CollectiveLibrary& collective_library(const std::string& name) {
    static std::mutex mutex;
    static std::map<std::string, net::CollectiveLibrary> cache;  // node-based: references stay valid
    std::lock_guard<std::mutex> lock(mutex);
    if (const auto it = cache.find(name); it != cache.end()) return it->second;
    const fs::path path = fs::path(default_collectives_dir()) / (name + ".yaml");
    if (!exists_quietly(path))
        throw ConfigError(SourceLocation{path.string()}, fmt::format("no collective library '{}' (known: {})", name,
                                                                     fmt::join(collective_library_names(), ", ")));
    return cache.emplace(name, load_collective_library_file(path.string())).first->second;
}

hw::AttentionFit load_attention_fit(const Node& root) {
    MapReader r(root);
    hw::AttentionFit f;
    r.required("name").as_enum({"flash-attention"});
    r.required("description").as_string();
    f.block = static_cast<double>(sourced(r, "block").as_int(16, 1024));
    f.seq0 = sourced(r, "seq0").as_number(0, 1e6);
    f.head_dim0 = sourced(r, "head_dim0").as_number(0, 1e4);
    f.head_dim0_flash2 = sourced(r, "head_dim0_flash2").as_number(0, 1e4);
    f.seq0_backward = sourced(r, "seq0_backward").as_number(0, 1e6);
    f.ref_head_dim = static_cast<double>(sourced(r, "ref_head_dim").as_int(1, 1024));
    f.backward_share = positive_fraction(sourced(r, "backward_share"));
    f.default_share = positive_fraction(sourced(r, "default_share"));
    f.triton_forward = sourced(r, "triton_forward").as_number(1, 10);
    f.triton_backward = sourced(r, "triton_backward").as_number(1, 10);
    {
        const Node tiles = sourced(r, "flash3_tiles");
        for (const Node& e : tiles.elements()) {
            MapReader t(e);
            hw::AttentionFit::Tile tile;
            tile.head_dim = static_cast<int>(t.required("head_dim").as_int(1, 1024));
            tile.block_m = static_cast<int>(t.required("block_m").as_int(16, 1024));
            tile.block_n = static_cast<int>(t.required("block_n").as_int(16, 1024));
            t.finish();
            if (!f.flash3_tiles.empty() && tile.head_dim <= f.flash3_tiles.back().head_dim)
                e.fail("head_dim must be larger than the entry before (the table is ascending)");
            f.flash3_tiles.push_back(tile);
        }
    }
    r.finish();
    return f;
}

std::string default_attention_fit_path() {
    return std::string(sim::config::data_dir()) + "/topologies/kernels/flash-attention.yaml";
}

const hw::AttentionFit& attention_fit() {
    static const hw::AttentionFit fit = load_attention_fit(load_file(default_attention_fit_path()));
    return fit;
}

}  // namespace sim::config
