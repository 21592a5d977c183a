// Shared pieces of the parasim command line: each subcommand is a function
// taking its own arguments (after the subcommand name) and returning an exit
// code. Errors are thrown; main() maps them to exit codes and one line each.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace parasim_cli {

// A wrong command line: printed as "parasim: <message>", exit code 2.
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

using Args = std::vector<std::string>;

int cmd_run(const Args& args);
int cmd_sweep(const Args& args);
int cmd_validate(const Args& args);
int cmd_bench(const Args& args);
int cmd_list(const Args& args);
int bench_scale(const std::string& format);

// Writes `text` to `path` atomically (temporary file + rename), or to stdout
// when path is empty, so a failed run never leaves a half-written file.
void write_output(const std::string& path, const std::string& text);

}  // namespace parasim_cli
