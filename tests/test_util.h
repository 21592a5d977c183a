// Helpers shared by the loader tests: edit a known-good YAML text in one
// place, and read the ConfigError message a loader raises for it.
#pragma once

#include "sim/core/error.h"

#include <doctest/doctest.h>

#include <string>

namespace parasim_test {

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
