// GPU files -> GpuSpec. Every field is read through MapReader, so a missing
// field, a misspelt key or a value without its unit is a ConfigError at
// file:line:column.
#include "sim/config/gpu_loader.h"
#include "sim/config/data_dir.h"

#include "sim/config/calibration_loader.h"

#include <algorithm>
#include <filesystem>

namespace sim::config {

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kArchitectures = {"volta", "turing", "ampere", "ada", "hopper", "blackwell"};

bool is_none(const Node& n) { return n.is_scalar() && n.as_string() == "none"; }

// A fraction in (0, 1].
double fraction(const Node& n) {
    const double v = n.as_number(0.0, 1.0);
    if (v <= 0.0) n.fail("must be greater than 0");
    return v;
}

// Hopper and later multicast B tiles across a 2-CTA cluster (docs §2).
int default_cluster(const std::string& architecture) {
    return architecture == "hopper" || architecture == "blackwell" ? 2 : 1;
}

void read_peak(MapReader& r, hw::GpuSpec& g) {
    MapReader peak(r.required("peak"));
    for (hw::DType t : hw::kAllDTypes) {
        // Block-scaled formats came later: a file without them lacks them.
        const auto opt = hw::optional_in_gpu_file(t) ? peak.optional(hw::to_string(t)) : std::nullopt;
        if (hw::optional_in_gpu_file(t) && !opt) continue;
        const Node v = opt ? *opt : peak.required(hw::to_string(t));
        if (v.is_scalar() && v.as_string() == "unsupported") continue;
        const FlopRate rate = v.as_flop_rate();
        if (rate.per_s <= 0.0) v.fail("a peak must be positive (write 'unsupported' if the GPU lacks this dtype)");
        g.peak[static_cast<std::size_t>(t)] = rate;
    }
    peak.finish();
    if (!g.supports(hw::DType::fp32)) peak.node().fail("fp32 must be supported (elementwise kernels run in fp32)");
}

void read_efficiency(MapReader& r, hw::GpuSpec& g) {
    MapReader eff(r.required("efficiency"));
    {
        MapReader gemm(eff.required("gemm"));
        for (hw::DType t : hw::kAllDTypes) {
            const std::string key = hw::to_string(t);
            if (g.supports(t)) {
                g.efficiency.gemm[static_cast<std::size_t>(t)] = fraction(gemm.required(key));
            } else if (auto v = gemm.optional(key)) {
                v->fail(
                    fmt::format("{} is unsupported on this GPU (peak.{}: unsupported); remove this ceiling", key, key));
            }
        }
        gemm.finish();
    }
    g.efficiency.hbm = fraction(eff.required("hbm"));
    g.efficiency.l2 = fraction(eff.required("l2"));
    g.efficiency.launch_overhead = eff.required("launch_overhead").as_time();
    const Node nccl_nvlink = eff.required("nccl_nvlink");
    if (is_none(nccl_nvlink)) {
        if (g.nvlink_generation > 0) nccl_nvlink.fail("'none' but the GPU has NVLink; give the fraction NCCL reaches");
        g.efficiency.nccl_nvlink = 0.0;
    } else {
        if (g.nvlink_generation == 0) nccl_nvlink.fail("the GPU has no NVLink (nvlink: none); write 'none'");
        g.efficiency.nccl_nvlink = fraction(nccl_nvlink);
    }
    g.efficiency.nccl_pcie = fraction(eff.required("nccl_pcie"));
    if (auto a = eff.optional("attention")) g.efficiency.attention = fraction(*a);
    if (auto a = eff.optional("attention_flash2")) g.efficiency.attention_flash2 = fraction(*a);
    if (auto h = eff.optional("hbm_grouped")) g.efficiency.hbm_grouped = fraction(*h);
    if (auto c = eff.optional("gemm_grouped_fp8")) g.efficiency.gemm_grouped_fp8 = fraction(*c);
    if (auto s = eff.optional("grouped_setup")) {
        // A setup of a millisecond is no grouped kernel's: a unit slip.
        g.efficiency.grouped_setup = s->as_time();
        if (g.efficiency.grouped_setup > Time::from_seconds_ceil(1e-3)) s->fail("a setup above 1 ms is not plausible");
    }
    eff.finish();
}

hw::GpuSpec read_gpu(const Node& root, const std::string& expected_name) {
    MapReader r(root);
    hw::GpuSpec g;
    const Node name = r.required("name");
    g.name = name.as_string();
    if (g.name.empty()) name.fail("must not be empty");
    if (!expected_name.empty() && g.name != expected_name)
        name.fail(fmt::format("'{}' does not match the file name; write 'name: {}'", g.name, expected_name));
    g.architecture = r.required("architecture").as_enum(kArchitectures);
    g.sm_count = static_cast<int>(r.required("sm_count").as_int(1, 100000));
    {
        const Node clock = r.required("tensor_clock");
        g.tensor_clock_hz = clock.as_frequency_hz();
        if (g.tensor_clock_hz <= 0.0) clock.fail("must be positive");
    }
    read_peak(r, g);
    {
        MapReader mem(r.required("memory"));
        const Node kind = mem.required("kind");
        g.memory_kind = kind.as_string();
        if (g.memory_kind.empty()) kind.fail("must not be empty");
        const Node cap = mem.required("capacity");
        g.memory_capacity = cap.as_bytes();
        if (g.memory_capacity.value == 0) cap.fail("must be positive");
        g.memory_bandwidth = mem.required("bandwidth").as_bandwidth();
        mem.finish();
    }
    {
        MapReader l2(r.required("l2"));
        const Node size = l2.required("size");
        g.l2_size = size.as_bytes();
        if (g.l2_size.value == 0) size.fail("must be positive");
        g.l2_bandwidth = l2.required("bandwidth").as_bandwidth();
        l2.finish();
    }
    {
        const Node nv = r.required("nvlink");
        if (!is_none(nv)) {
            MapReader n(nv);
            g.nvlink_generation = static_cast<int>(n.required("generation").as_int(1, 20));
            g.nvlink_links = static_cast<int>(n.required("links").as_int(1, 1000));
            g.nvlink_bandwidth = n.required("bandwidth").as_bandwidth();
            n.finish();
        }
    }
    {
        MapReader pcie(r.required("pcie"));
        g.pcie_generation = static_cast<int>(pcie.required("generation").as_int(1, 20));
        g.pcie_bandwidth = pcie.required("bandwidth").as_bandwidth();
        pcie.finish();
    }
    read_efficiency(r, g);
    g.attention_fit = attention_fit();
    {
        MapReader tile(r.required("gemm_tile"));
        g.gemm_tile_m = static_cast<int>(tile.required("m").as_int(8, 1024));
        g.gemm_tile_n = static_cast<int>(tile.required("n").as_int(8, 1024));
        const auto cluster = tile.optional("cluster");
        g.gemm_cluster = cluster ? static_cast<int>(cluster->as_int(1, 16)) : default_cluster(g.architecture);
        tile.finish();
    }
    if (const auto curve_node = r.optional("gemm_curve")) {
        MapReader curve(*curve_node);
        if (const auto k0 = curve.optional("k0")) g.gemm_k0 = k0->as_number(0.0, 65536.0);
        if (const auto k0 = curve.optional("k0_fp8")) g.gemm_k0_fp8 = k0->as_number(0.0, 65536.0);
        if (const auto p = curve.optional("overlap")) {
            g.gemm_overlap = p->as_number(0.0, 64.0);
            if (g.gemm_overlap > 0.0 && g.gemm_overlap < 1.0) p->fail("must be 0 (max) or at least 1");
        }
        curve.finish();
    }
    r.finish();
    return g;
}

std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
}

bool is_bare_name(const std::string& s) {
    const auto ends_with = [&](const std::string& suffix) {
        return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    return s.find('/') == std::string::npos && !ends_with(".yaml") && !ends_with(".yml");
}

std::vector<std::string> names_in(const std::string& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        if (entry.is_regular_file() && entry.path().extension() == ".yaml") out.push_back(entry.path().stem().string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::string unknown_gpu(const std::string& name, const std::string& dir) {
    const auto names = names_in(dir);
    return fmt::format("unknown GPU '{}'{}; available: {} (add a GPU as {}/<name>.yaml)", name,
                       did_you_mean(name, names), names.empty() ? "none" : join(names), dir);
}

std::string resolve(const std::string& name_or_path, const std::string& dir) {
    if (!is_bare_name(name_or_path)) return name_or_path;
    const std::string path = dir + "/" + name_or_path + ".yaml";
    if (!exists_quietly(path)) throw ConfigError(SourceLocation{dir, 0, 0}, unknown_gpu(name_or_path, dir));
    return path;
}

}  // namespace

hw::GpuSpec load_gpu(const Node& root) { return read_gpu(root, ""); }

hw::GpuSpec load_gpu_file(const std::string& path) { return read_gpu(load_file(path), fs::path(path).stem().string()); }

std::string default_gpu_dir() { return std::string(sim::config::data_dir()) + "/topologies/gpus"; }

std::string gpu_path(const std::string& name_or_path) { return resolve(name_or_path, default_gpu_dir()); }

GpuCatalog::GpuCatalog(std::string dir) : dir_(std::move(dir)) {}

GpuCatalog::GpuCatalog(std::string dir, const std::string& attention_fit_path) : dir_(std::move(dir)) {
    if (!attention_fit_path.empty()) attention_fit_ = load_attention_fit(load_file(attention_fit_path));
}

std::string GpuCatalog::path_of(const std::string& name_or_path) const { return resolve(name_or_path, dir_); }

std::string GpuCatalog::unknown_message(const std::string& name) const { return unknown_gpu(name, dir_); }

const hw::GpuSpec& GpuCatalog::get(const std::string& name_or_path) {
    const std::string path = path_of(name_or_path);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(path);
    if (it == cache_.end()) {
        hw::GpuSpec spec = load_gpu_file(path);
        if (attention_fit_) spec.attention_fit = *attention_fit_;
        it = cache_.emplace(path, std::move(spec)).first;
    }
    return it->second;
}

const hw::GpuSpec& GpuCatalog::get(const Node& name) {
    const std::string value = name.as_string();
    if (is_bare_name(value) && !contains(value)) name.fail(unknown_message(value));
    return get(value);
}

std::vector<std::string> GpuCatalog::names() const { return names_in(dir_); }

bool GpuCatalog::contains(const std::string& name) const {
    return is_bare_name(name) && exists_quietly(dir_ + "/" + name + ".yaml");
}

}  // namespace sim::config
