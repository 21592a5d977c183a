// Shared pieces of the parasim command line: each subcommand is a function
// taking its own arguments (after the subcommand name) and returning an exit
// code. Errors are thrown; main() maps them to exit codes and one line each.
#pragma once

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/variables_map.hpp>

#include <filesystem>
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

// gnuplot could not draw the plots (missing, or it failed on a script).
class PlotError : public UsageError {
public:
    using UsageError::UsageError;
};

// Runs `gnuplot SCRIPT` in `dir` as an argument vector, with no shell in
// between, so no folder or scenario name can become a command; its output
// goes to dir/gnuplot.log, whose first line explains a failure (PlotError).
void run_gnuplot(const std::filesystem::path& dir, const std::string& script);

// `--limit NAME=VALUE` (repeatable), on every command that reads input: adds
// the option, and applies what was given to sim::limits() (docs/testing.md).
void add_limit_option(boost::program_options::options_description& opts);
void apply_limits(const boost::program_options::variables_map& vm);

int cmd_run(const Args& args);
int cmd_sweep(const Args& args);
int cmd_plan(const Args& args);
int cmd_validate(const Args& args);
int cmd_serve(const Args& args);
int cmd_bench(const Args& args);
int cmd_list(const Args& args);
int bench_scale(const std::string& format);
int bench_serving(const std::string& format);

// Removes `path` (a file, or a folder that is empty by then) if SIGINT,
// SIGTERM, SIGHUP or SIGPIPE ends the process while this object lives; the
// handler then re-raises the signal. Destroying it stops watching, nothing more.
class CleanupOnSignal {
public:
    explicit CleanupOnSignal(const std::string& path, bool directory = false);
    ~CleanupOnSignal();
    CleanupOnSignal(const CleanupOnSignal&) = delete;
    CleanupOnSignal& operator=(const CleanupOnSignal&) = delete;

private:
    void* node_;  // the handler's record (output.cpp)
};

// The outputs of one command, committed together at its end so that a failure
// leaves none of them behind. commit() writes a temporary beside each regular
// file (a symbolic link is followed: its target gets the content, the link
// stays), then writes standard output ("" or "-"), character devices and
// FIFOs in place (a rename would replace them with a regular file), then
// renames every temporary onto its target. A failure before the renames, or a
// fatal signal, removes every temporary and the folders add_directory made;
// the error (UsageError, exit 2) names the path. Existing targets of another
// kind (a folder, a socket, a block device), and two outputs that end at one
// regular file, are refused. A temporary is named `<target>.tmp-parasim-PID`
// and never replaces a file already there.
class OutputSet {
public:
    void add(const std::string& path, std::string text);
    // A folder the outputs go into, created (with its parents) by commit().
    void add_directory(const std::string& dir);
    void commit();

private:
    void refuse_shared_targets() const;
    struct Output {
        std::string path;
        std::string text;
    };
    std::vector<Output> outputs_;
    std::vector<std::string> directories_;
};

}  // namespace parasim_cli
