// Running the parasim binary from an end-to-end test as a user would: its
// stdout, its stderr and its exit code (test_cli.cpp, test_cli_outputs.cpp,
// test_validate_annotations.cpp).
#pragma once

#include <doctest/doctest.h>
#include "tests/parasim_bin.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace parasim_e2e {

struct Result {
    int code = -1;
    std::string out;
    std::string err;
};

// A path in the temporary folder that no other test process uses: ctest runs
// each case in its own process, several at once, and other builds' suites may
// run beside this one.
inline std::filesystem::path temp_path(const std::string& name) {
    return std::filesystem::temp_directory_path() / ("parasim-e2e-" + std::to_string(::getpid()) + "-" + name);
}

// A scratch folder of its own for a test: temp_path(name), emptied and made.
inline std::filesystem::path scratch(const std::string& name) {
    const auto dir = temp_path(name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

// A file's bytes.
inline std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// `parasim ARGS` (the arguments as a shell would split them).
inline Result parasim(const std::string& args) {
    static int calls = 0;
    const std::string err_file = temp_path(std::to_string(calls++) + ".err").string();
    const std::string cmd = std::string(test_support::parasim_bin()) + " " + args + " 2>" + err_file;
    Result r;
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::array<char, 4096> buf{};
    std::size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    const int status = pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream e(err_file);
    std::stringstream ss;
    ss << e.rdbuf();
    r.err = ss.str();
    std::filesystem::remove(err_file);
    return r;
}

}  // namespace parasim_e2e
