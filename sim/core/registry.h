// Lookups shared by the registries of variant kinds (schedules, partitioners,
// collective algorithms; docs/architecture.md, "Registries"): each registry
// is a list of pointers to objects with a name(), and these find one by name
// and list the names, in listing order.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sim {

// nullptr when none of `all` has that name.
template <typename T>
const T* find_registered(const std::vector<const T*>& all, std::string_view name) {
    for (const T* entry : all)
        if (entry->name() == name) return entry;
    return nullptr;
}

template <typename T>
std::vector<std::string> registered_names(const std::vector<const T*>& all) {
    std::vector<std::string> out;
    for (const T* entry : all) out.emplace_back(entry->name());
    return out;
}

}  // namespace sim
