// Typed errors of the simulator. Library code throws; only apps/ turns an
// error into an exit code and a one-line message.
//   ConfigError   - bad user input, with a source location (exit code 2)
//   ModelError    - input that parses but cannot be modelled (exit code 2)
//   InternalError - a broken invariant inside parasim (exit code 3)
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace sim {

// Where a value came from: a file and a 1-based line and column, or an
// override given on the command line (line 0).
struct SourceLocation {
    std::string file;
    int line = 0;
    int column = 0;
    std::string to_string() const;
};

class ConfigError : public std::runtime_error {
public:
    ConfigError(const SourceLocation& where, const std::string& what);
    const SourceLocation& where() const { return where_; }

private:
    SourceLocation where_;
};

class ModelError : public std::runtime_error {
public:
    explicit ModelError(const std::string& what) : std::runtime_error(what) {}
};

class InternalError : public std::logic_error {
public:
    explicit InternalError(const std::string& what) : std::logic_error("internal error: " + what) {}
};

// Throws InternalError when `condition` is false; unlike assert it stays in
// Release builds.
inline void check(bool condition, const char* what) {
    if (!condition) throw InternalError(what);
}

}  // namespace sim
