// The partitioner registry: an explicit list, for the reason the schedule
// registry gives (a static library drops object files nothing references).
#include "sim/parallel/partition/i_partitioner.h"

#include "sim/core/error.h"
#include "sim/core/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace sim::parallel::partitioners_impl {
// Defined in this folder, one per file.
const IPartitioner& uniform();
const IPartitioner& cache_aware();
}  // namespace sim::parallel::partitioners_impl

namespace sim::parallel {

const std::vector<const IPartitioner*>& partitioners() {
    static const std::vector<const IPartitioner*> all = {
        &partitioners_impl::uniform(),
        &partitioners_impl::cache_aware(),
    };
    return all;
}

std::vector<std::string> partitioner_names() { return registered_names(partitioners()); }

const IPartitioner& partitioner(std::string_view name) {
    if (const auto* p = find_registered(partitioners(), name)) return *p;
    throw ModelError(
        fmt::format("unknown partitioner '{}' (registered: {})", name, fmt::join(partitioner_names(), ", ")));
}

const IPartitioner& default_partitioner() { return partitioners_impl::uniform(); }

}  // namespace sim::parallel
