// The linear builders by tensor-parallel layout (sim/workload/op_builders.h):
// the GEMMs, bytes and TP collectives of one tp-split linear, by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "sim/workload/op_builders.h"

TEST_SUITE_BEGIN("unit");

using namespace sim::workload;
using namespace sim::workload::ops;

namespace {

// h = 1024, 8 heads of 128, BF16 everywhere: only the shapes the Dims need.
ModelSpec small_model() {
    ModelSpec m;
    m.name = "small";
    m.layers = 2;
    m.hidden = 1024;
    m.heads = 8;
    m.kv_heads = 8;
    m.head_dim = 128;
    m.ffn = 4096;
    m.vocab = 32000;
    return m;
}

// One sequence of 256 tokens through layer 0 on one of `tp` shards, with
// or without sequence parallelism (Dims points at the model and options).
struct Shard {
    ModelSpec m = small_model();
    OperatorOptions o;
    Dims x;
    Shard(int tp, bool sp) {
        o.tp = tp;
        o.sequence_parallel = sp;
        x = make_dims(m, 0, 0, PassShape{1, 256, 256}, o);
    }
    Shard(const Shard&) = delete;
    Shard& operator=(const Shard&) = delete;
};

bool reads(const Operator& op, std::uint64_t id) {
    return std::any_of(op.kernel.tensors.begin(), op.kernel.tensors.end(),
                       [&](const sim::hw::TensorUse& u) { return u.id == id && !u.write; });
}
bool writes(const Operator& op, std::uint64_t id) {
    return std::any_of(op.kernel.tensors.begin(), op.kernel.tensors.end(),
                       [&](const sim::hw::TensorUse& u) { return u.id == id && u.write; });
}

constexpr double kT = 256, kIn = 1024, kOut = 512;  // tokens; the GEMM's input and (per shard) output widths

// A column-parallel 1024 -> 512 from norm1's output to q, and a row-parallel
// 512 -> 1024 from the attention output to out_proj (residual: resid_mid).
Linear column(const Dims& x) {
    return column_parallel_linear(x, "col", wslot::qkv, 256, 1024, 512, use(x.act(aslot::norm1), kT * kIn * 2),
                                  {use(x.act(aslot::q), kT * kOut * 2)});
}
Linear row(const Dims& x) {
    return row_parallel_linear(x, "row", wslot::out, 256, 512, 1024, use(x.act(aslot::attn), kT * kOut * 2),
                               use(x.act(aslot::out_proj), kT * kIn * 2), x.act(aslot::resid_mid));
}

}  // namespace

TEST_CASE("column-parallel linear: 2*T*in*out FLOPs per GEMM, gathers under SP, reduces its input gradient") {
    const Shard sp(2, true);
    const Dims& x = sp.x;
    const std::uint64_t in = x.act(aslot::norm1), out = x.act(aslot::q);
    const Linear l = column(x);
    const Operator f = linear_forward(x, l), d = linear_dgrad(x, l), w = linear_wgrad(x, l);
    // Forward: X [256, 1024] (BF16) and W [1024, 512] read, Y [256, 512] written.
    CHECK(f.kernel.flops.value == 2 * kT * kIn * kOut);
    CHECK(f.kernel.bytes_read.as_double() == kT * kIn * 2 + kIn * kOut * 2);
    CHECK(f.kernel.bytes_written.as_double() == kT * kOut * 2);
    CHECK(f.kernel.m == 256);
    CHECK(f.kernel.n == 512);
    CHECK(f.kernel.k == 1024);
    // Under SP the whole input is all-gathered first (its full bytes), and read as the gathered copy.
    CHECK(f.tp_sync == TpSync::before_column_parallel);
    CHECK(f.tp_sync_bytes.as_double() == kT * kIn * 2);
    CHECK(reads(f, flagged(in, kGathered)));
    CHECK(writes(f, out));
    // dX = dY W^T: a partial sum, all-reduced (reduce-scattered) over TP.
    CHECK(d.kernel.flops.value == 2 * kT * kIn * kOut);
    CHECK(d.kernel.bytes_read.as_double() == kT * kOut * 2 + kIn * kOut * 2);
    CHECK(d.kernel.bytes_written.as_double() == kT * kIn * 2);
    CHECK(d.tp_sync == TpSync::after_column_input_grad);
    CHECK(reads(d, flagged(out, kGrad)));
    CHECK(writes(d, flagged(flagged(in, kGrad), kPartial)));
    // dW = X^T dY: reads X (gathered again) and dY, accumulates the BF16 dW.
    CHECK(w.kernel.flops.value == 2 * kT * kIn * kOut);
    CHECK(w.kernel.bytes_read.as_double() == kT * (kIn + kOut) * 2 + kIn * kOut * 2);
    CHECK(w.kernel.bytes_written.as_double() == kIn * kOut * 2);
    CHECK(w.is_weight_grad);
    CHECK(w.tp_sync == TpSync::before_column_parallel);

    // Without SP only the input gradient's all-reduce is left; at tp = 1 nothing.
    const Shard no_sp(2, false);
    const Dims& y = no_sp.x;
    const Linear ly = column(y);
    CHECK(linear_forward(y, ly).tp_sync == TpSync::none);
    CHECK(reads(linear_forward(y, ly), in));
    CHECK(linear_dgrad(y, ly).tp_sync == TpSync::after_column_input_grad);
    CHECK(linear_wgrad(y, ly).tp_sync == TpSync::none);
    const Shard one(1, false);
    const Dims& z = one.x;
    const Linear lz = column(z);
    for (const Operator& op : {linear_forward(z, lz), linear_dgrad(z, lz), linear_wgrad(z, lz)})
        CHECK(op.tp_sync == TpSync::none);
    CHECK(writes(linear_dgrad(z, lz), flagged(in, kGrad)));  // no partial sum on one GPU
}

TEST_CASE("row-parallel linear: a partial output reduced over TP, the residual's gradient gathered under SP") {
    const Shard sp(2, true);
    const Dims& x = sp.x;
    const std::uint64_t in = x.act(aslot::attn), out = x.act(aslot::out_proj), resid = x.act(aslot::resid_mid);
    const Linear l = row(x);
    const Operator f = linear_forward(x, l), d = linear_dgrad(x, l), w = linear_wgrad(x, l);
    // Forward: X [256, 512] and W [512, 1024] read; the whole Y [256, 1024] written as a partial sum.
    CHECK(f.kernel.flops.value == 2 * kT * kOut * kIn);
    CHECK(f.kernel.bytes_read.as_double() == kT * kOut * 2 + kOut * kIn * 2);
    CHECK(f.kernel.bytes_written.as_double() == kT * kIn * 2);
    CHECK(f.tp_sync == TpSync::after_row_parallel);
    CHECK(f.tp_sync_bytes.as_double() == kT * kIn * 2);
    CHECK(writes(f, flagged(out, kPartial)));
    // Backward: the residual stream's gradient, all-gathered under SP; dX is this shard's columns.
    CHECK(d.tp_sync == TpSync::before_column_parallel);
    CHECK(reads(d, flagged(flagged(resid, kGrad), kGathered)));
    CHECK(writes(d, flagged(in, kGrad)));
    CHECK(w.tp_sync == TpSync::none);
    CHECK(w.kernel.bytes_written.as_double() == kOut * kIn * 2);
    const Shard no_sp(2, false);
    const Dims& y = no_sp.x;
    const Linear ly = row(y);
    CHECK(linear_forward(y, ly).tp_sync == TpSync::after_row_parallel);
    CHECK(linear_dgrad(y, ly).tp_sync == TpSync::none);
    CHECK(reads(linear_dgrad(y, ly), flagged(resid, kGrad)));
}

TEST_CASE("plain and replicated linears have no TP collective of their own") {
    const Shard sp(2, true);
    const Dims& x = sp.x;
    const std::uint64_t in = x.act(aslot::norm2), out = x.act(aslot::router);
    const Linear p =
        plain_linear("plain", wslot::router, 256, 1024, 64, use(in, kT * kIn * 2), {use(out, kT * 64 * 2)});
    const Linear r =
        replicated_linear(x, "repl", wslot::router, 256, 1024, 64, use(in, kT * kIn * 2), {use(out, kT * 64 * 2)});
    for (const Linear& l : {p, r}) {
        const Operator f = linear_forward(x, l), d = linear_dgrad(x, l), w = linear_wgrad(x, l);
        CHECK(f.kernel.flops.value == 2 * kT * kIn * 64);
        CHECK(f.kernel.bytes_read.as_double() == kT * kIn * 2 + kIn * 64 * 2);
        CHECK(f.kernel.bytes_written.as_double() == kT * 64 * 2);
        for (const Operator& op : {f, d, w}) CHECK(op.tp_sync == TpSync::none);
        CHECK(writes(f, out));
        CHECK(reads(d, flagged(out, kGrad)));
        CHECK(writes(d, flagged(in, kGrad)));  // whole, not a partial sum
    }
    // The replicated weight reads the input gathered over TP; the plain one as it is.
    CHECK(reads(linear_forward(x, r), flagged(in, kGathered)));
    CHECK(reads(linear_forward(x, p), in));
}

TEST_SUITE_END();
