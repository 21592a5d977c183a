// Parsing of `--limit NAME=VALUE` into the process's Limits.
#include "sim/core/limits.h"

#include <fmt/ranges.h>

#include <charconv>

namespace sim {

namespace {

struct Entry {
    const char* name;
    std::uint64_t Limits::*field;
};

const Entry kEntries[] = {
    {"input-bytes", &Limits::input_bytes},   {"yaml-nodes", &Limits::yaml_nodes},
    {"sweep-points", &Limits::sweep_points}, {"plan-candidates", &Limits::plan_candidates},
    {"plan-tasks", &Limits::plan_tasks},
};

}  // namespace

const std::vector<std::string>& limit_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> v;
        for (const auto& e : kEntries) v.emplace_back(e.name);
        return v;
    }();
    return names;
}

void set_limit(const std::string& assignment) {
    const std::size_t eq = assignment.find('=');
    const std::string name = assignment.substr(0, eq);
    for (const auto& e : kEntries) {
        if (name != e.name) continue;
        const std::string value = eq == std::string::npos ? "" : assignment.substr(eq + 1);
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (value.empty() || ec != std::errc{} || end != value.data() + value.size() || v == 0)
            throw ModelError(fmt::format("--limit {}: expected a positive whole number, got '{}'", name, value));
        limits().*e.field = v;
        return;
    }
    throw ModelError(fmt::format("--limit: unknown limit '{}' (expected NAME=VALUE with NAME one of {})", name,
                                 fmt::join(limit_names(), ", ")));
}

}  // namespace sim
