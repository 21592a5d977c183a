// End-to-end: where a command's outputs go. --output onto a character device,
// through a symbolic link or into a FIFO writes into it and never replaces it;
// a command's outputs are all written or none; SIGINT removes the temporaries
// (the hardening issue's file-safety items; docs/testing.md).
#include "sim/config/data_dir.h"
#include "tests/e2e/cli_process.h"
#include "tests/parasim_bin.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

TEST_SUITE_BEGIN("e2e");  // ctest label (docs/testing.md); a case may override it

namespace {

const std::string kRoot = sim::config::data_dir();

using parasim_e2e::parasim;
using parasim_e2e::scratch;
using parasim_e2e::slurp;

const std::string kSmall = kRoot + "/tests/data/scenarios/one-layer-tp2.yaml";

// A device node of our own with the numbers of /dev/null (1, 3) or /dev/full
// (1, 7), so that a regression replaces the copy and not the machine's
// device; the real one where device nodes cannot be made and we are not root
// (then no rename can replace it either). Empty when neither is safe.
std::filesystem::path char_device(const std::filesystem::path& dir, const char* name, unsigned minor) {
    const auto p = dir / name;
    if (mknod(p.c_str(), S_IFCHR | 0666, makedev(1, minor)) == 0) return p;
    if (geteuid() != 0) return std::filesystem::path("/dev") / name;
    return {};
}

}  // namespace

TEST_CASE("--output onto a character device writes into it and leaves it a device; /dev/full is exit 2 naming it") {
    const auto dir = scratch("devices");
    const auto null = char_device(dir, "null", 3);
    const auto full = char_device(dir, "full", 7);
    if (null.empty() || full.empty()) {
        MESSAGE("cannot make device nodes as root: skipped rather than risk the machine's /dev/null");
        return;
    }
    for (const char* option : {"--output", "--trace"}) {
        CAPTURE(option);
        const auto r = parasim("run " + kSmall + " " + option + " " + null.string());
        CHECK(r.code == 0);
        CHECK(std::filesystem::is_character_file(null));
        const auto f = parasim("run " + kSmall + " " + option + " " + full.string());
        CHECK(f.code == 2);
        CHECK(f.err.find(fmt::format("'{}'", full.string())) != std::string::npos);
        CHECK(f.err.find("No space left on device") != std::string::npos);
        CHECK(std::filesystem::is_character_file(full));
    }
    const auto out = parasim("run " + kSmall + " > " + full.string());
    CHECK(out.code == 2);  // standard output too
    CHECK(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()) == 2);
    std::filesystem::remove_all(dir);
}

TEST_CASE("--output through a symbolic link writes its target and keeps the link") {
    const auto dir = scratch("symlink");
    std::ofstream(dir / "real.json") << "old";
    std::filesystem::create_symlink("real.json", dir / "link.json");
    std::filesystem::create_symlink("made.json", dir / "dangling.json");
    CHECK(parasim("run " + kSmall + " --format json --output " + (dir / "link.json").string()).code == 0);
    CHECK(std::filesystem::is_symlink(dir / "link.json"));
    CHECK(slurp(dir / "real.json").find("\"scenario\":\"one-layer-tp2\"") != std::string::npos);
    CHECK(parasim("run " + kSmall + " --output " + (dir / "dangling.json").string()).code == 0);
    CHECK(std::filesystem::is_symlink(dir / "dangling.json"));
    CHECK(std::filesystem::is_regular_file(dir / "made.json"));
    std::filesystem::create_symlink("loop-b", dir / "loop-a");
    std::filesystem::create_symlink("loop-a", dir / "loop-b");
    const auto loop = parasim("run " + kSmall + " --output " + (dir / "loop-a").string());
    CHECK(loop.code == 2);
    CHECK(loop.err.find("loop-a") != std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST_CASE("--output onto a FIFO writes into it for its reader") {
    const auto dir = scratch("fifo");
    const auto fifo = dir / "fifo";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    // The reader never blocks: it opens without waiting for a writer and
    // gives up after 20 s, so a parasim that does not open the FIFO fails
    // the test instead of hanging it.
    std::string received;
    std::thread reader([&] {
        const int fd = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
        if (fd < 0) return;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        std::array<char, 4096> buf{};
        while (std::chrono::steady_clock::now() < deadline) {
            const ssize_t n = read(fd, buf.data(), buf.size());
            if (n > 0) received.append(buf.data(), static_cast<std::size_t>(n));
            else if (n == 0 && !received.empty()) break;  // the writer closed
            else std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        close(fd);
    });
    const auto r = parasim("run " + kSmall + " --format json --output " + fifo.string());
    reader.join();
    CHECK(r.code == 0);
    CHECK(std::filesystem::is_fifo(fifo));
    CHECK(received.find("\"scenario\":\"one-layer-tp2\"") != std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST_CASE("the outputs of a command are all written or none: a failing --output leaves no --trace nor plots") {
    const auto dir = scratch("all-or-none");
    const auto trace = dir / "trace.json";
    const auto r = parasim("run " + kSmall + " --trace " + trace.string() + " --output " +
                           (dir / "no-such-folder" / "out.txt").string());
    CHECK(r.code == 2);
    CHECK(r.err.find("no-such-folder/out.txt") != std::string::npos);
    const auto f = parasim("run " + kSmall + " --trace " + trace.string() + " --output " + dir.string());
    CHECK(f.code == 2);  // a folder is refused
    const auto s = parasim("sweep " + kRoot + "/scenarios/partitioning-scaling.yaml --plot " +
                           (dir / "plots").string() + " --output " + (dir / "no-such-folder" / "out.txt").string());
    CHECK(s.code == 2);
    CHECK(std::filesystem::is_empty(dir));  // no trace, no plot folder, no temporaries
    std::filesystem::remove_all(dir);
}

TEST_CASE("a file beside the target that bears a temporary's old name is the user's: it stays as it was") {
    // Found by tools/cli-mutation-smoke.py: the temporary was `<target>.tmp-parasim`,
    // and an existing file of that name was removed as "a stale one".
    const auto dir = scratch("squatter");
    const auto theirs = dir / "out.json.tmp-parasim";
    std::ofstream(theirs) << "the user's\n";
    CHECK(parasim("run " + kSmall + " --format json --output " + (dir / "out.json").string()).code == 0);
    CHECK(slurp(theirs) == "the user's\n");
    CHECK(slurp(dir / "out.json").find("\"scenario\":\"one-layer-tp2\"") != std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST_CASE("two outputs that end at one file (same name, a link to it, a '..' path) are refused, nothing written") {
    // Seen in OutputSet while writing tools/cli-mutation-smoke.py's output
    // family: `-o X --trace X` wrote X (the second temporary removed the
    // first's) and then exited 2 on the second rename.
    const auto dir = scratch("same-target");
    std::filesystem::create_directories(dir / "sub");
    std::filesystem::create_symlink("out.json", dir / "link.json");
    const std::string out = (dir / "out.json").string();
    for (const std::string& other : {out, (dir / "link.json").string(), (dir / "sub" / ".." / "out.json").string()}) {
        INFO(other);
        const auto r = parasim("run " + kSmall + " --output " + out + " --trace " + other);
        CHECK(r.code == 2);
        CHECK(r.err.find("name the same file") != std::string::npos);
        CHECK_FALSE(std::filesystem::exists(dir / "out.json"));
    }
    CHECK(parasim("run " + kSmall + " --output " + out + " --trace " + (dir / "trace.json").string()).code == 0);
    CHECK(parasim("run " + kSmall + " --output - --trace -").code == 0);  // standard output takes both in turn
    std::filesystem::remove_all(dir);
}

TEST_CASE("SIGINT while a command writes its outputs removes the temporaries and ends by the signal") {
    const auto dir = scratch("sigint");
    const auto fifo = dir / "fifo";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    const auto trace = dir / "trace.json";
    // No one reads the FIFO: parasim waits in open(), the trace's temporary
    // already written, which is the moment to interrupt it.
    std::vector<std::string> args = {
        test_support::parasim_bin(), "run", kSmall, "--trace", trace.string(), "--output", fifo.string()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    REQUIRE(posix_spawn(&pid, test_support::parasim_bin(), nullptr, nullptr, argv.data(), environ) == 0);
    const auto temporary = dir / ("trace.json.tmp-parasim-" + std::to_string(pid));
    int status = 0;
    bool exited = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!std::filesystem::exists(temporary) && std::chrono::steady_clock::now() < deadline) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            exited = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK(std::filesystem::exists(temporary));
    if (!exited) {
        kill(pid, SIGINT);
        waitpid(pid, &status, 0);
    }
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGINT);
    CHECK_FALSE(std::filesystem::exists(temporary));
    CHECK_FALSE(std::filesystem::exists(trace));
    CHECK(std::filesystem::is_fifo(fifo));
    std::filesystem::remove_all(dir);
}

TEST_SUITE_END();
