// The executor's kernel-cost memo (executor.cpp, kernel_cost): tasks that
// share a kernel descriptor and see the same L2 hits ask the cost model
// once, and get the times they would get asking each time.
#include "tests/exec/exec_harness.h"

#include <doctest/doctest.h>

TEST_SUITE_BEGIN("unit");  // ctest label (docs/testing.md)

using namespace sim;

namespace {

// FixedCost that counts its calls.
class CountingCost final : public hw::CostModel {
public:
    std::string name() const override { return "counting"; }
    hw::KernelCost cost(const hw::GpuSpec& g, const hw::KernelDesc& k, const hw::L2Residency& l2) const override {
        ++calls;
        return parasim_test::FixedCost{}.cost(g, k, l2);
    }
    mutable int calls = 0;
};

}  // namespace

TEST_CASE("kernel cost memo: members sharing a descriptor ask the cost model once") {
    parallel::Plan plan;
    plan.simulated_gpus = {0, 1};
    plan.streams.resize(2);
    plan.gpus_represented = 2;
    hw::KernelDesc shared;
    shared.name = "shared";
    shared.flops = Flops{5};
    hw::KernelDesc other = shared;
    other.flops = Flops{7};
    const std::uint32_t a = plan.add_kernel(shared), b = plan.add_kernel(other);
    std::vector<std::uint32_t> ends;
    for (std::uint32_t gpu = 0; gpu < 2; ++gpu) {
        std::uint32_t prev = parallel::kNone;
        for (const std::uint32_t kernel : {a, a, b}) {
            parallel::Task t;
            t.kind = parallel::TaskKind::kernel;
            t.stream = parallel::StreamKind::compute;
            t.gpu = gpu;
            t.kernel = kernel;
            prev = plan.add(t, {prev});
        }
        ends.push_back(prev);
    }
    const auto cluster = config::load_cluster_file(config::cluster_path("dgx-h100"));
    config::GpuCatalog gpus;
    const net::Topology topo(cluster, 2);
    const CountingCost cm;
    const auto r = exec::execute(plan, gpus.get("h100-sxm"), topo, cm, {});
    // Six kernel tasks, two descriptors, no tensors (no L2 hits): two calls.
    CHECK(cm.calls == 2);
    for (const std::uint32_t end : ends) CHECK(r.task_end[end] == parasim_test::us(5 + 5 + 7));
}

TEST_SUITE_END();
