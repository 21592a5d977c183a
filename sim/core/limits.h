// The stated resource limits of one parasim process (docs/testing.md,
// "Limits"): what a scenario, a dataset or a command line may ask for before
// parasim refuses it up front with exit 2, instead of running until the
// machine runs out of memory or time. Each limit has a name that the command
// line's `--limit NAME=VALUE` sets, so an honest large job can raise it.
#pragma once

#include "sim/core/error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sim {

struct Limits {
    // Bytes of one input file (scenario, cluster, model, GPU, dataset). The
    // largest shipped file is the validation dataset, well under 1 MiB.
    std::uint64_t input_bytes = std::uint64_t{16} << 20;
    // YAML nodes one override or sweep value may expand to once its aliases
    // are followed (an alias bomb is small as text and huge as a tree).
    std::uint64_t yaml_nodes = 100'000;
    // Points of one sweep (the cross product of its value lists).
    std::uint64_t sweep_points = 100'000;
    // Candidates of one plan search (the cross product of its space, before
    // any is checked): each costs a strategy check, so a million take seconds.
    std::uint64_t plan_candidates = 1'000'000;
    // Tasks of one simulation plan (kernels, transfers, collectives). A plan
    // takes about 360 bytes per task with its kernels, dependencies and
    // streams (measured: 50 M tasks, 18 GB peak), so the default bounds one
    // plan near 7 GB; the shipped 16,384-GPU benchmark needs under 2 M.
    // Task ids are 32-bit, a hard ceiling.
    std::uint64_t plan_tasks = 20'000'000;
};

// The process's limits: set once by the command line before any work.
inline Limits& limits() {
    static Limits l;
    return l;
}

// A request over a stated limit (exit 2). The message names the limit and the
// flag that raises it.
class LimitError : public ModelError {
public:
    LimitError(const std::string& what, const std::string& limit_name, std::uint64_t limit_value)
        : ModelError(
              fmt::format("{} (limit {}={}; raise it with --limit {}=N)", what, limit_name, limit_value, limit_name)) {}
};

// Sets one limit from "NAME=VALUE"; throws ModelError naming the valid names
// when NAME is unknown or VALUE is not a positive whole number.
void set_limit(const std::string& assignment);
// The limits' names, in the order docs/testing.md lists them.
const std::vector<std::string>& limit_names();

}  // namespace sim
