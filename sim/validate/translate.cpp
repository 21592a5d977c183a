// Point -> cluster, scenario, strategy or kernels (see translate.h).
#include "sim/validate/translate.h"
#include "sim/config/data_dir.h"

#include "sim/config/calibration_loader.h"
#include "sim/config/cluster_loader.h"
#include "sim/config/run_details.h"
#include "sim/workload/moe.h"
#include "sim/workload/operators.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

namespace sim::validate {

namespace {

namespace fs = std::filesystem;

// The switch radix the generated fat trees use (NVIDIA Quantum-2 NDR: 64 x
// 400 Gb/s ports; stas00/ml-engineering network/README.md).
constexpr int kLeafPorts = 64;

net::IntraNode intra_kind(const std::string& s) {
    if (s == "nvswitch") return net::IntraNode::nvswitch;
    if (s == "nvlink-bridge") return net::IntraNode::nvlink_pairs;
    return net::IntraNode::pcie;
}

std::optional<std::string> check_dtypes(const hw::GpuSpec& gpu, std::initializer_list<hw::DType> types) {
    for (hw::DType t : types)
        if (!gpu.supports(t))
            return fmt::format("GPU {} ({}) does not support {} (supported: {})", gpu.name, gpu.architecture,
                               hw::to_string(t), gpu.supported_dtypes());
    return std::nullopt;
}

hw::KernelDesc gemm_kernel(const GemmOp& g) {
    hw::KernelDesc k;
    k.name = "gemm";
    k.kind = hw::KernelKind::gemm;
    k.dtype = g.dtype;
    k.m = g.m;
    k.n = g.n;
    k.k = g.k;
    // A grouped GEMM is one kernel of `groups` GEMMs, each with its own operands: the
    // kernel the workload builds for an MoE layer's grouped experts (merge_grouped).
    k.batch = g.groups;
    k.grouped = g.groups > 1;
    const double m = static_cast<double>(g.m), n = static_cast<double>(g.n), kk = static_cast<double>(g.k);
    const double groups = static_cast<double>(g.groups);
    k.flops = Flops{2.0 * m * n * kk * groups};
    const double e = hw::bytes_per_element(g.dtype);
    // 8-bit GEMMs write a 16-bit output (cuBLASLt FP8 with BF16 D), others their own type.
    const double out = e < 2 ? 2.0 : e;
    k.bytes_read = Bytes::ceil((m * kk + kk * n) * e * groups);
    k.bytes_written = Bytes::ceil(m * n * out * groups);
    return k;
}

// The attention kernels of one layer of a model whose attention has the
// point's shape, as the workload layer builds them for training (so the
// FLOP count, bytes, causal and backward flags are those of whole runs).
std::vector<hw::KernelDesc> attention_kernels(const AttentionOp& a) {
    workload::ModelSpec m;
    m.name = "attention-kernel";
    m.layers = 1;
    m.heads = a.heads;
    m.kv_heads = a.heads;
    m.head_dim = a.head_dim;
    m.hidden = a.heads * a.head_dim;
    m.ffn = 4 * m.hidden;
    m.vocab = 32000;
    m.max_seq = a.seq_len;
    workload::OperatorOptions o;
    o.precision.compute = a.dtype;
    o.precision.weights = a.dtype;
    o.precision.kv = a.dtype;
    o.flash_attention = true;
    o.causal = a.causal;
    const workload::PassShape shape{a.batch, a.seq_len, a.seq_len};
    std::vector<workload::Operator> ops = workload::layer_forward(m, 0, 0, shape, o);
    if (a.backward) {
        const auto b = workload::layer_backward(m, 0, 0, shape, o, workload::Recompute::none);
        ops.insert(ops.end(), b.begin(), b.end());
    }
    std::vector<hw::KernelDesc> out;
    for (auto& op : ops) {
        if (op.kernel.kind != hw::KernelKind::attention) continue;
        op.kernel.attention_kernel = workload::attention_kernel_of(a.impl);
        op.kernel.tensors.clear();  // a benchmark's fresh inputs: no residency from other kernels
        out.push_back(op.kernel);
    }
    check(out.size() == (a.backward ? 2u : 1u), "attention point: the workload layer gave no attention kernel");
    return out;
}

hw::KernelDesc memory_kernel(const MemoryOp& mem) {
    hw::KernelDesc k;
    k.kind = hw::KernelKind::elementwise;
    k.dtype = hw::DType::fp32;
    const double b = mem.bytes.as_double();
    double read = 0, written = 0;
    switch (mem.op) {
        case MemoryOpKind::copy:
            read = written = b / 2;
            k.name = "copy";
            break;  // b = a
        case MemoryOpKind::read:
            read = b;
            k.name = "read";
            break;
        case MemoryOpKind::write:
            written = b;
            k.name = "write";
            break;
        case MemoryOpKind::triad:
            read = 2 * b / 3;
            written = b / 3;
            k.name = "triad";
            break;  // a = b + s c
    }
    k.bytes_read = Bytes::ceil(read);
    k.bytes_written = Bytes::ceil(written);
    return k;
}

}  // namespace

ShippedClusters::ShippedClusters(const std::string& dir_in) {
    const std::string dir = dir_in.empty() ? std::string(sim::config::data_dir()) + "/topologies" : dir_in;
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.is_regular_file() && e.path().extension() == ".yaml") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) clusters_.push_back(config::load_cluster_file(f));
    // By cluster name, so that "dgx-h100" comes before "dgx-h100-pod".
    std::stable_sort(clusters_.begin(), clusters_.end(),
                     [](const net::ClusterSpec& a, const net::ClusterSpec& b) { return a.name < b.name; });
}

net::ClusterSpec make_cluster(const HardwareSpec& h, const std::string& intra, const hw::GpuSpec& gpu,
                              const ShippedClusters& shipped, std::string& source) {
    net::ClusterSpec c;
    c.gpu = gpu.name;
    c.gpus_per_node = h.gpus_per_node;
    c.nodes = (h.gpus + h.gpus_per_node - 1) / h.gpus_per_node;
    c.intra_node = intra_kind(intra);
    c.name = fmt::format("{}-x{}-{}", gpu.name, h.gpus, intra);
    c.where = h.where;

    const net::ClusterSpec* match = nullptr;
    for (const auto& s : shipped.all())
        if (s.gpu == gpu.name && s.intra_node == c.intra_node) {
            match = &s;
            break;
        }
    using net::LinkClass;
    auto& nvlink = c.links[static_cast<std::size_t>(LinkClass::nvlink)];
    auto& pcie = c.links[static_cast<std::size_t>(LinkClass::pcie)];
    auto& network = c.links[static_cast<std::size_t>(LinkClass::network)];
    if (match) {
        source = match->name;
        nvlink = match->links[static_cast<std::size_t>(LinkClass::nvlink)];
        pcie = match->links[static_cast<std::size_t>(LinkClass::pcie)];
        c.in_switch_reduction = match->in_switch_reduction;
        c.pcie_switches_per_node = std::min(match->pcie_switches_per_node, c.gpus_per_node);
    } else {
        source = fmt::format("topologies/gpus/{}.yaml", gpu.name);
        // NVLink SHARP arrived with the third-generation NVSwitch (NVLink 4): NVIDIA Technical
        // Blog, "Upgrading Multi-GPU Interconnectivity with the Third-Generation NVIDIA NVSwitch" (2022).
        c.in_switch_reduction = c.intra_node == net::IntraNode::nvswitch && gpu.nvlink_generation >= 4;
        c.pcie_switches_per_node = std::max(1, c.gpus_per_node / 2);
    }
    // Links the shipped clusters do not give take the collective library's
    // per-step hardware latency (the same figures the cluster files use).
    const net::CollectiveLibrary& lib = config::collective_library();
    if (!nvlink && gpu.nvlink_generation > 0 && c.intra_node != net::IntraNode::pcie)
        nvlink = net::LinkClassSpec{gpu.nvlink_bandwidth, lib.link_latency(LinkClass::nvlink)};
    if (!pcie) pcie = net::LinkClassSpec{gpu.pcie_bandwidth, lib.link_latency(LinkClass::pcie)};
    if (c.nodes > 1) {
        Time latency = lib.link_latency(LinkClass::network);
        for (const auto& s : shipped.all())
            if (s.gpu == gpu.name && s.link(LinkClass::network)) {
                latency = s.link(LinkClass::network)->latency;
                break;
            }
        network = net::LinkClassSpec{h.network_bandwidth, latency};
        c.nics_per_node = c.gpus_per_node;  // bandwidth_per_gpu: one NIC's worth per GPU
        c.inter_node =
            c.nodes * c.gpus_per_node <= kLeafPorts ? net::InterNode::single_switch : net::InterNode::fat_tree;
        c.leaf_switch_ports = kLeafPorts;
    }
    return c;
}

Setup translate(const Point& p, config::GpuCatalog& gpus, const ShippedClusters& shipped,
                const std::string& software_dir) {
    Setup s;
    s.defaults = p.defaults;
    const auto skip = [&](std::string why) {
        s.skip = std::move(why);
        return s;
    };
    if (!gpus.contains(p.hardware.gpu)) {
        const auto names = gpus.names();
        const std::string hint = config::nearest(p.hardware.gpu, names);
        return skip(fmt::format("unknown GPU '{}'{}", p.hardware.gpu,
                                hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
    }
    const hw::GpuSpec& gpu = gpus.get(p.hardware.gpu);

    std::string intra = p.hardware.intra_node;
    if (intra.empty()) {
        intra = gpu.nvlink_generation > 0 ? "nvswitch" : "pcie";
        if (p.hardware.gpus > 1) s.defaults.push_back("intra_node=" + intra);
    }
    if (intra != "pcie" && gpu.nvlink_generation == 0)
        return skip(fmt::format("intra_node {}: GPU {} has no NVLink", intra, gpu.name));

    config::ScenarioSpec& sc = s.scenario;
    sc.name = p.id;
    sc.gpu = gpu;
    sc.gpus = p.hardware.gpus;
    sc.collectives = &config::collective_library();
    sc.cluster = make_cluster(p.hardware, intra, gpu, shipped, s.link_source);

    switch (p.kind) {
        case Kind::training:
        case Kind::inference:
        case Kind::serving: {
            const auto& par = p.parallelism;
            if (par.cp > 1 && p.kind != Kind::training)
                return skip(fmt::format("context parallelism (cp={}) is modelled for training only", par.cp));
            if (par.dp == 0)
                return skip(fmt::format("tp={} x pp={} x cp={} does not divide the {} GPUs", par.tp, par.pp, par.cp,
                                        p.hardware.gpus));
            if (par.tp * par.pp * par.dp * par.cp != p.hardware.gpus)
                return skip(fmt::format("tp={} x pp={} x dp={} x cp={} = {}, but the run has {} GPUs", par.tp, par.pp,
                                        par.dp, par.cp, par.tp * par.pp * par.dp * par.cp, p.hardware.gpus));
            const auto& pr = p.workload.precision;
            if (auto why = check_dtypes(gpu, {pr.compute, pr.weights, pr.kv})) return skip(*why);
            if (p.workload.attention == workload::AttentionImpl::flash3 && gpu.architecture != "hopper")
                return skip(
                    fmt::format("FlashAttention-3 runs on Hopper only, not on {} ({})", gpu.name, gpu.architecture));
            sc.model = p.model;
            sc.workload = p.workload;
            sc.software = p.software;
            sc.profile = config::software_profile(p.software.name, p.software.version, software_dir);
            config::apply_moe_dispatcher(sc.workload, sc.profile);
            sc.workload.fuse_elementwise = sc.profile.fuse_elementwise;
            config::StrategySpec& st = s.strategy;
            st.name = "as-published";
            st.tp = par.tp;
            st.cp = par.cp;
            st.pp = par.pp;
            st.dp = par.dp;
            st.sp = par.sp;
            st.attention_dp = par.attention_dp;
            st.moe_dense_tp_size = par.moe_dense_tp_size;
            st.enable_dp_lm_head = par.enable_dp_lm_head;
            st.zero = par.zero;
            st.schedule = par.schedule;
            st.virtual_stages = par.virtual_stages;
            st.overlap = par.overlap;
            st.first_stage_layers = par.first_stage_layers;
            st.last_stage_layers = par.last_stage_layers;
            st.where = par.where;
            if (par.ep > 1) {
                // The format names ep but neither the rank order nor the router:
                // Megatron-Core's order (tp, cp, dp, then pp slowest: each EP group
                // on consecutive GPUs) and a balanced router (a trained router with
                // its balancing loss), as docs/validation.md §2 says.
                st.ep = par.ep;
                st.etp = par.etp;
                st.placement = parallel::Placement::pp_last;
                s.defaults.push_back("placement=pp-last (ep > 1)");
                if (p.workload.moe_where.line == 0) s.defaults.push_back("moe.routing=balanced");
            }
            sc.strategies = {st};
            break;
        }
        case Kind::gemm: {
            if (auto why = check_dtypes(gpu, {p.gemm.dtype})) return skip(*why);
            hw::KernelDesc k = gemm_kernel(p.gemm);
            // A kernel point that names its stack runs that stack's FP8 GEMM kernels, as the workload's do.
            if (p.software.given() && k.dtype == hw::DType::fp8) {
                const auto profile = config::software_profile(p.software.name, p.software.version, software_dir);
                workload::apply_stack_fp8_gemm(k, profile.fp8_gemm_ceiling, profile.fp8_grouped_gemm_dense);
            }
            s.kernels.push_back(k);
            break;
        }
        case Kind::attention:
            if (auto why = check_dtypes(gpu, {p.attention.dtype})) return skip(*why);
            if (p.attention.impl == AttentionImpl::flash3 && gpu.architecture != "hopper")
                return skip(
                    fmt::format("FlashAttention-3 runs on Hopper only, not on {} ({})", gpu.name, gpu.architecture));
            s.kernels = attention_kernels(p.attention);
            break;
        case Kind::memory: s.kernels.push_back(memory_kernel(p.memory)); break;
        case Kind::collective:
            if (p.hardware.gpus < 2) return skip("a collective needs at least 2 GPUs");
            // On one node parasim has no NICs, so deepep-ll takes DeepEP's later
            // NVLink path (docs/moe.md section 3k); a measurement of the
            // pure-RDMA kernels, looped through the node's NICs, is not that.
            if (p.collective.algorithm == "deepep-ll" && p.hardware.gpus <= p.hardware.gpus_per_node)
                return skip(
                    "deepep-ll on one node: DeepEP's pure-RDMA kernels looped through the node's NICs, which parasim "
                    "builds only for a cluster that spans nodes (it runs the NVLink path there instead)");
            break;
    }
    return s;
}

namespace {

std::string gbps(Bandwidth b) { return fmt::format("{:g} GB/s", b.bytes_per_s / 1e9); }
std::string us(Time t) { return fmt::format("{:g} us", static_cast<double>(t.count_ps()) / 1e6); }
const char* yes(bool b) { return b ? "true" : "false"; }

}  // namespace

std::string scenario_yaml(const Point& p, const Setup& s) {
    check(p.kind == Kind::training || p.kind == Kind::inference || p.kind == Kind::serving,
          "scenario_yaml: not a whole-run or serving point");
    const auto& sc = s.scenario;
    const auto& c = sc.cluster;
    const auto& m = sc.model;
    const auto& w = sc.workload;
    const auto& st = s.strategy;
    std::string y = fmt::format("# Point '{}' ({}) of a parasim validate dataset: measured {} = {:g}.\n", p.id,
                                to_string(p.kind), to_string(p.metric), p.measured);
    y += fmt::format(
        "# Source: {}\n# Written by 'parasim validate --scenarios'; 'parasim run' on it simulates the point.\n",
        p.source);
    if (!s.defaults.empty()) {
        y += "# Defaults applied (not stated by the source):";
        for (const auto& d : s.defaults) y += " " + d + ";";
        y += "\n";
    }
    y += fmt::format("name: {}\n", p.id);
    if (sc.software.given())
        y += fmt::format("software: {{name: {}, version: '{}'}}\n", sc.software.name,
                         sc.software.version);  // version: no quote or control character (read_software)
    y += fmt::format("cluster:\n  name: {}\n  gpu: {}\n  nodes: {}\n  gpus_per_node: {}\n", c.name, c.gpu, c.nodes,
                     c.gpus_per_node);
    y += fmt::format("  intra_node: {}\n  in_switch_reduction: {}\n  pcie_switches_per_node: {}\n  inter_node: {}\n",
                     net::to_string(c.intra_node), yes(c.in_switch_reduction), c.pcie_switches_per_node,
                     net::to_string(c.inter_node));
    if (c.inter_node != net::InterNode::none) y += fmt::format("  nics_per_node: {}\n", c.nics_per_node);
    if (c.inter_node == net::InterNode::fat_tree) y += fmt::format("  leaf_switch_ports: {}\n", c.leaf_switch_ports);
    y += "  links:\n";
    for (net::LinkClass cls : {net::LinkClass::nvlink, net::LinkClass::pcie, net::LinkClass::network})
        if (const auto* l = c.link(cls))
            y += fmt::format("    {}: {{bandwidth: {}, latency: {}}}\n", net::to_string(cls), gbps(l->bandwidth),
                             us(l->latency));
    y += fmt::format("gpus: {}\n", sc.gpus);
    y += fmt::format("model:\n  name: {}\n  layers: {}\n  hidden: {}\n  heads: {}\n", m.name, m.layers, m.hidden,
                     m.heads);
    // MLA has its own head sizes instead of kv_heads and head_dim.
    if (const auto* a = m.mla())
        y += fmt::format(
            "  attention: {{kind: mla, q_lora_rank: {}, kv_lora_rank: {}, qk_nope_head_dim: {}, "
            "qk_rope_head_dim: {}, v_head_dim: {}}}\n",
            a->q_lora_rank, a->kv_lora_rank, a->qk_nope_head_dim, a->qk_rope_head_dim, a->v_head_dim);
    else y += fmt::format("  kv_heads: {}\n  head_dim: {}\n", m.kv_heads, m.head_dim);
    if (const auto* g = std::get_if<workload::GqaAttention>(&m.attention); g && g->qk_norm)
        y += "  attention: {kind: gqa, qk_norm: true}\n";
    y += fmt::format("  ffn: {}\n  ffn_kind: {}\n  vocab: {}\n  max_seq: {}\n  norm: {}\n  tied_embeddings: {}\n",
                     m.ffn, m.ffn_kind == workload::FfnKind::gelu ? "gelu" : "swiglu", m.vocab, m.max_seq,
                     m.norm == workload::NormKind::layernorm ? "layernorm" : "rmsnorm", yes(m.tied_embeddings));
    y += fmt::format("  position: {}\n", m.position == workload::PositionKind::rope ? "rope" : "learned");
    const workload::Biases& b = m.bias;
    if (b.qkv == b.out && b.out == b.mlp) y += fmt::format("  bias: {}\n", yes(b.qkv));
    else y += fmt::format("  bias: {{qkv: {}, out: {}, mlp: {}}}\n", yes(b.qkv), yes(b.out), yes(b.mlp));
    if (m.experts > 0) {
        std::string moe = fmt::format("experts: {}, top_k: {}", m.experts, m.top_k);
        if (m.moe_ffn > 0) moe += fmt::format(", ffn: {}", m.moe_ffn);
        if (m.shared_experts > 0) moe += fmt::format(", shared_experts: {}", m.shared_experts);
        if (m.first_dense_layers > 0) moe += fmt::format(", first_dense_layers: {}", m.first_dense_layers);
        if (m.expert_groups > 0)
            moe += fmt::format(", groups: {}, group_limit: {}", m.expert_groups, m.expert_group_limit);
        y += "  moe: {" + moe + "}\n";
    }
    if (m.mtp_layers > 0) y += fmt::format("  mtp_layers: {}\n", m.mtp_layers);
    const bool training = w.mode == config::Mode::training;
    const bool serving = p.kind == Kind::serving;
    y += fmt::format("workload:\n  mode: {}\n  dtype: {}\n  weight_dtype: {}\n  kv_dtype: {}\n  flash_attention: {}\n",
                     training  ? "training"
                     : serving ? "serving"
                               : "inference",
                     hw::to_string(w.precision.compute), hw::to_string(w.precision.weights),
                     hw::to_string(w.precision.kv), yes(w.flash_attention));
    if (w.attention) y += fmt::format("  attention: {}\n", workload::to_string(*w.attention));
    if (w.moe_where.line > 0) {
        // Only a point that gave `workload.moe` has it in its scenario: the
        // balanced default of an ep > 1 point stays implicit, as before.
        std::string routing = workload::to_string(w.moe);
        if (w.moe.histogram) {
            // The file made absolute (the scenario is written elsewhere), single-quoted.
            const std::string file = std::filesystem::absolute(w.moe.histogram->file).lexically_normal().string();
            routing = "'histogram(";
            for (const char ch : file) routing += ch == '\'' ? std::string("''") : std::string(1, ch);
            routing += ")'";
        }
        y += fmt::format("  moe: {{routing: {}, grouped_gemm: {}, recompute_exchange: {}", routing,
                         yes(w.moe.grouped_gemm), yes(w.moe.recompute_exchange));
        if (w.moe.capacity_factor > 0) y += fmt::format(", capacity_factor: {}", w.moe.capacity_factor);
        if (!w.moe_dispatcher.empty()) y += ", dispatcher: " + w.moe_dispatcher;
        if (w.moe.router_fp32) y += ", router_dtype: fp32";
        y += "}\n";
    }
    if (training) {
        if (w.dropout.hidden > 0 || w.dropout.attention > 0)
            y += fmt::format("  dropout: {{hidden: {:g}, attention: {:g}}}\n", w.dropout.hidden, w.dropout.attention);
        const char* rc = w.recompute == workload::Recompute::none        ? "none"
                         : w.recompute == workload::Recompute::selective ? "selective"
                                                                         : "full";
        y += fmt::format("  seq_len: {}\n  global_batch: {}\n  micro_batch: {}\n  recompute: {}\n", w.seq_len,
                         w.global_batch, w.micro_batch, rc);
        const workload::RecomputeModules& rm = w.recompute_modules;
        if (w.recompute == workload::Recompute::selective && (!rm.core_attn || rm.mla_up_proj)) {
            std::string mods = rm.core_attn ? "core_attn" : "";
            if (rm.mla_up_proj) mods += std::string(mods.empty() ? "" : ", ") + "mla_up_proj";
            y += "  recompute_modules: [" + mods + "]\n";
        }
    } else if (serving) {
        y += fmt::format("  serving: {}\n", p.serving_yaml);
    } else {
        y += fmt::format("  batch: {}\n  prompt_tokens: {}\n  output_tokens: {}\n", w.batch, w.prompt_tokens,
                         w.output_tokens);
    }
    y += fmt::format("strategies:\n  - name: {}\n    tp: {}\n    pp: {}\n    dp: {}\n    sp: {}\n    zero: {}\n",
                     st.name, st.tp, st.pp, st.dp, yes(st.sp), st.zero);
    if (st.cp > 1) y += fmt::format("    cp: {}\n", st.cp);
    if (st.ep > 1) y += fmt::format("    ep: {}\n", st.ep);
    if (st.etp > 0) y += fmt::format("    etp: {}\n", st.etp);
    if (st.attention_dp) y += "    attention_dp: true\n";
    if (st.moe_dense_tp_size > 0) y += fmt::format("    moe_dense_tp_size: {}\n", st.moe_dense_tp_size);
    if (st.enable_dp_lm_head) y += "    enable_dp_lm_head: true\n";
    if (st.placement == parallel::Placement::pp_last) y += "    placement: pp-last\n";
    y += fmt::format("    schedule: {}\n", st.schedule->name());
    if (st.virtual_stages > 1) y += fmt::format("    virtual_stages: {}\n", st.virtual_stages);
    // A training scenario names the validation format's overlap fields
    // always; any other overlap of the point's kind where it is not its default.
    std::vector<std::string> overlaps;
    const config::Overlap defaults;
    for (const config::OverlapKey& k : config::kOverlapKeys)
        if ((training ? k.training : k.inference) &&
            ((training && k.published_field) || st.overlap.*k.field != defaults.*k.field))
            overlaps.push_back(fmt::format("{}: {}", k.name, yes(st.overlap.*k.field)));
    if (!overlaps.empty()) y += fmt::format("    overlap: {{{}}}\n", fmt::join(overlaps, ", "));
    if (st.first_stage_layers > 0) y += fmt::format("    first_stage_layers: {}\n", st.first_stage_layers);
    if (st.last_stage_layers > 0) y += fmt::format("    last_stage_layers: {}\n", st.last_stage_layers);
    return y;
}

}  // namespace sim::validate
