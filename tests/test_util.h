// Helpers shared by the loader tests: edit a known-good YAML text in one
// place, read the ConfigError message a loader raises for it, and name a
// scratch file of this process's own.
#pragma once

#include "sim/core/error.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <unistd.h>

namespace parasim_test {

// A path in the temp folder that no other process uses: ctest runs a file's
// cases as parallel processes, and two checkouts may run their suites at once.
inline std::filesystem::path private_temp(const std::string& name) {
    return std::filesystem::temp_directory_path() / ("parasim-" + std::to_string(::getpid()) + "-" + name);
}

// `text` with the first occurrence of `from` replaced by `to`; the test fails
// if `from` is not there (an edit that changes nothing tests nothing).
inline std::string replace_once(std::string text, const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
}

// The message of the ConfigError `parse(text)` raises, or "no error".
template <typename Parse>
std::string config_error_of(Parse&& parse, const std::string& text) {
    try {
        parse(text);
    } catch (const sim::ConfigError& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace parasim_test
