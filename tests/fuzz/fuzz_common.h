// Shared checks of the fuzz targets: what the loaders may do with arbitrary
// bytes. They may accept the input or reject it with sim::ConfigError /
// sim::ModelError; a rejection must be one line that names where the problem
// is. Anything else escaping (YAML::Exception, std::out_of_range, an
// InternalError...), a crash, a hang or a sanitizer report is a finding.
#pragma once

#include "sim/core/error.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace parasim_fuzz {

[[noreturn]] inline void finding(const char* what, const char* message) {
    std::fprintf(stderr, "parasim fuzz finding: %s: %s\n", what, message);
    std::abort();
}

// The message contract of apps/main.cpp: one line, with a location prefix.
inline void check_message(const sim::ConfigError& e) {
    const std::string m = e.what();
    if (m.find('\n') != std::string::npos || m.find('\r') != std::string::npos)
        finding("a ConfigError message spans several lines", m.c_str());
    if (e.where().file.empty()) finding("a ConfigError has no file", m.c_str());
}

// Runs `load`, accepting success and the typed input errors only.
template <class F>
void expect_clean(F&& load) {
    try {
        load();
    } catch (const sim::ConfigError& e) {
        check_message(e);
    } catch (const sim::ModelError& e) {
        const std::string m = e.what();
        if (m.find('\n') != std::string::npos) finding("a ModelError message spans several lines", m.c_str());
    } catch (const std::exception& e) {
        finding("an exception other than ConfigError/ModelError escaped", e.what());
    } catch (...) {
        finding("a non-standard exception escaped", "?");
    }
}

}  // namespace parasim_fuzz
