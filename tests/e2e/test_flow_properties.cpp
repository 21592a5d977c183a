// Property test of the flow network alone: random transfers, started at
// random instants on every shipped cluster, must all complete, never load a
// link past its bandwidth (at any instant, and on average over the time it is
// busy), and conserve bytes at every vertex: GPUs send and receive what the
// transfers say, and switches, hosts and NICs forward all they get. Seeded
// (property_rng.h), so a failure replays.
#include "property_rng.h"
#include "sim/config/scenario.h"
#include "sim/core/simulation.h"
#include "sim/net/flow_network.h"
#include "sim/net/topology.h"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

TEST_SUITE_BEGIN("e2e");  // ctest label (docs/testing.md)

namespace {
namespace fs = std::filesystem;
using property_test::kClusters;
using property_test::kSeed;
using property_test::Rng;
using sim::Time;
}  // namespace

TEST_CASE("random transfers on every cluster conserve bytes and never exceed a link's bandwidth") {
    Rng rng{kSeed + 1};
    for (const auto& cl : kClusters) {
        const auto spec = sim::config::load_scenario(
            [&] {
                const fs::path p = fs::temp_directory_path() / fmt::format("parasim-prop-net-{}.yaml", ::getpid());
                std::ofstream(p) << fmt::format(
                    "name: net\ncluster: {}\ngpus: {}\nmodel: gpt-1.3b\nworkload: {{mode: inference, dtype: fp16, "
                    "batch: 1, prompt_tokens: 1, output_tokens: 2}}\nstrategies: [{{tp: 1, dp: auto}}]\n",
                    cl.name, cl.max_gpus);
                return p.string();
            }(),
            {});
        INFO(cl.name);
        const sim::net::Topology topo(spec.cluster, spec.gpus);
        for (int round = 0; round < 4; ++round) {
            sim::Simulation simulation;
            sim::net::FlowNetwork flows(simulation, topo);
            struct Transfer {
                int src, dst;
                sim::Bytes size;
                double efficiency;
            };
            struct Round {
                sim::net::FlowNetwork* flows;
                std::vector<Transfer> transfers;
                int done = 0;
            } state{&flows, {}, 0};
            std::vector<double> sent(static_cast<std::size_t>(spec.gpus), 0), received(sent.size(), 0);
            const int count = rng.pick(1, 3 * spec.gpus);
            for (int f = 0; f < count; ++f) {
                const int src = rng.pick(0, spec.gpus - 1);
                const int dst = rng.pick(0, spec.gpus - 1);
                if (src == dst) continue;
                const sim::Bytes size{static_cast<std::uint64_t>(rng.pick(1, 64)) << rng.pick(10, 24)};
                state.transfers.push_back(Transfer{src, dst, size, rng.coin(0.5) ? 1.0 : 0.8});
                sent[static_cast<std::size_t>(src)] += size.as_double();
                received[static_cast<std::size_t>(dst)] += size.as_double();
            }
            for (std::size_t k = 0; k < state.transfers.size(); ++k) {
                const Time at = Time::from_seconds_ceil(rng.pick(0, 20) * 1e-6);
                simulation.schedule_at(at, [st = &state, k] {
                    const Transfer& t = st->transfers[k];
                    st->flows->start(
                        t.src, t.dst, t.size, [st] { ++st->done; }, t.efficiency);
                });
            }
            simulation.run();
            CHECK(state.done == static_cast<int>(state.transfers.size()));
            CHECK(flows.active_flows() == 0);
            CHECK(flows.max_link_load() <= 1 + 1e-9);
            // Conservation at every vertex: GPUs send and receive what the
            // transfers say; switches, hosts and NICs forward all they get.
            std::vector<double> out(topo.vertex_count(), 0), in(topo.vertex_count(), 0);
            for (sim::net::LinkId l = 0; l < topo.link_count(); ++l) {
                const auto& link = topo.link(l);
                const double bytes = flows.link_bytes(l);
                out[link.from] += bytes;
                in[link.to] += bytes;
                // Average rate over the time the link was busy <= its bandwidth.
                const double busy = flows.link_busy_time(l).seconds();
                CHECK(bytes <= link.bandwidth.bytes_per_s * busy * (1 + 1e-9) + 1);
            }
            for (std::size_t v = 0; v < topo.vertex_count(); ++v) {
                const bool gpu = v < static_cast<std::size_t>(spec.gpus);
                const double want_out = gpu ? sent[v] : in[v], want_in = gpu ? received[v] : out[v];
                CHECK_MESSAGE(out[v] == doctest::Approx(want_out).epsilon(1e-9),
                              topo.vertex_name(static_cast<std::uint32_t>(v)));
                CHECK_MESSAGE(in[v] == doctest::Approx(want_in).epsilon(1e-9),
                              topo.vertex_name(static_cast<std::uint32_t>(v)));
            }
        }
    }
}

TEST_SUITE_END();
