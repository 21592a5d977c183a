// Output of the commands: the files of one command are committed together
// (OutputSet), and temporaries are removed when a signal ends the process
// (CleanupOnSignal), so an error or an interrupt never leaves a half-written
// report, a report without its trace, or a *.tmp-parasim-PID file behind.
#include "apps/cli.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>

namespace parasim_cli {

namespace fs = std::filesystem;

namespace {

// The paths to remove on a fatal signal: a list that only grows, read by the
// signal handler without locks (a node's path is written before it is marked
// live, and the handler reads only live nodes). The one piece of process-wide
// mutable state of parasim: a signal handler has no other way to find them.
struct WatchedPath {
    std::string path;
    bool directory = false;
    std::atomic<bool> live{false};
    WatchedPath* next = nullptr;
};
std::atomic<WatchedPath*> g_watched{nullptr};

// Async-signal-safe: atomics, unlink, rmdir and raise only. Files first, so
// that the folders holding them are empty when their turn comes.
extern "C" void remove_watched_and_reraise(int sig) {
    for (const bool folders : {false, true})
        for (WatchedPath* w = g_watched.load(); w; w = w->next)
            if (w->live.load() && w->directory == folders) folders ? rmdir(w->path.c_str()) : unlink(w->path.c_str());
    // SA_RESETHAND restored the default action; the signal is delivered (and
    // ends the process with the status a caller expects) when this returns.
    raise(sig);
}

void install_handlers() {
    static std::once_flag once;
    std::call_once(once, [] {
        for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
            struct sigaction old {};
            sigaction(sig, nullptr, &old);
            if (old.sa_handler != SIG_DFL) continue;  // ignored (nohup) or handled by someone else: leave it
            struct sigaction sa {};
            sa.sa_handler = remove_watched_and_reraise;
            sa.sa_flags = SA_RESETHAND;
            sigemptyset(&sa.sa_mask);
            sigaction(sig, &sa, nullptr);
        }
    });
}

[[noreturn]] void fail(const std::string& path, int err) {
    throw UsageError(fmt::format("cannot write '{}': {}", path, std::strerror(err)));
}

// Writes all of `text` to the open descriptor and closes it; errno of the
// first failure (a full device, a closed pipe, a failing close), or 0.
int write_all(int fd, const std::string& text) {
    std::size_t done = 0;
    int err = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            err = n < 0 ? errno : EIO;
            break;
        }
        done += static_cast<std::size_t>(n);
    }
    if (::close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
    return err;
}

// Where a report for `path` goes: the file a chain of symbolic links ends at
// (a link is followed, never replaced), as a path the temporary can sit beside.
fs::path resolve_links(const std::string& path) {
    fs::path p = path;
    for (int hops = 0;; ++hops) {
        std::error_code ec;
        if (!fs::is_symlink(fs::symlink_status(p, ec))) return p;
        if (hops == 40) fail(path, ELOOP);
        const fs::path target = fs::read_symlink(p, ec);
        if (ec) fail(path, ec.value());
        p = target.is_absolute() ? target : p.parent_path() / target;
    }
}

}  // namespace

CleanupOnSignal::CleanupOnSignal(const std::string& path, bool directory) {
    install_handlers();
    // Reuse a node that no longer watches anything, else push a new one.
    WatchedPath* w = g_watched.load();
    while (w && w->live.load()) w = w->next;
    if (!w) {
        w = new WatchedPath;  // never freed: the handler may walk the list at any time
        w->next = g_watched.load();
        g_watched.store(w);
    }
    w->path = path;
    w->directory = directory;
    w->live.store(true);
    node_ = w;
}

CleanupOnSignal::~CleanupOnSignal() { static_cast<WatchedPath*>(node_)->live.store(false); }

void OutputSet::add(const std::string& path, std::string text) { outputs_.push_back({path, std::move(text)}); }

void OutputSet::add_directory(const std::string& dir) { directories_.push_back(dir); }

// Two outputs that end at one regular file (by name, through a link or a
// "..") would overwrite each other, and the second rename would fail after
// the first had replaced the file: refused before anything is written.
// Standard output, devices and FIFOs take several outputs in turn.
void OutputSet::refuse_shared_targets() const {
    std::vector<std::pair<fs::path, const std::string*>> seen;
    for (const auto& o : outputs_) {
        struct stat st {};
        if (o.path.empty() || o.path == "-" || (::stat(o.path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))) continue;
        std::error_code ec;
        fs::path target = fs::weakly_canonical(fs::absolute(resolve_links(o.path)), ec);
        if (ec) continue;  // an unreadable path: the write itself reports it
        for (const auto& [other, name] : seen)
            if (other == target)
                throw UsageError(
                    fmt::format("'{}' and '{}' name the same file: give each output its own path", *name, o.path));
        seen.emplace_back(std::move(target), &o.path);
    }
}

void OutputSet::commit() {
    struct Pending {
        const Output* output;
        std::string target;  // the regular file the temporary is renamed onto
        std::string temporary;
        std::unique_ptr<CleanupOnSignal> watch;
    };
    std::vector<Pending> pending;
    std::vector<fs::path> created;  // folders this commit made, deepest last
    auto roll_back = [&] {
        for (const auto& p : pending) ::unlink(p.temporary.c_str());
        for (auto it = created.rbegin(); it != created.rend(); ++it) ::rmdir(it->c_str());
    };
    try {
        refuse_shared_targets();
        for (const auto& dir : directories_) {
            fs::path so_far;
            for (const auto& part : fs::path(dir)) {
                so_far /= part;
                std::error_code ec;
                if (fs::exists(so_far, ec)) continue;
                if (!fs::create_directory(so_far, ec) && ec)
                    throw UsageError(fmt::format("cannot create '{}': {}", so_far.string(), ec.message()));
                created.push_back(so_far);
            }
        }
        // 1. A temporary beside every regular-file target.
        std::vector<const Output*> in_place;
        for (const auto& o : outputs_) {
            struct stat st {};
            if (o.path.empty() || o.path == "-" || (::stat(o.path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))) {
                in_place.push_back(&o);
                continue;
            }
            Pending p{&o, resolve_links(o.path).string(), "", nullptr};
            // A name of our own beside the target: an existing file of that
            // name (the user's, or a killed run's) is never removed, only
            // passed over; the process id keeps two runs apart.
            int fd = -1;
            for (int n = 0; fd < 0; ++n) {
                p.temporary = fmt::format("{}.tmp-parasim-{}{}", p.target, ::getpid(), n ? fmt::format("-{}", n) : "");
                fd = ::open(p.temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
                if (fd < 0 && (errno != EEXIST || n == 1000)) fail(o.path, errno);
            }
            // Watched once it is ours (a signal before this line can leave it
            // behind; watching a name before open could remove another's file).
            p.watch = std::make_unique<CleanupOnSignal>(p.temporary);
            pending.push_back(std::move(p));
            if (const int err = write_all(fd, o.text)) fail(o.path, err);
        }
        // 2. Standard output, devices and FIFOs, written where they are: a
        // rename would replace the special file with a regular one.
        for (const Output* o : in_place) {
            if (o->path.empty() || o->path == "-") {
                if (std::fwrite(o->text.data(), 1, o->text.size(), stdout) != o->text.size() ||
                    std::fflush(stdout) != 0)
                    fail("standard output", errno);
                continue;
            }
            struct stat st {};
            if (::stat(o->path.c_str(), &st) == 0 && !S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
                throw UsageError(fmt::format(
                    "cannot write '{}': {}", o->path,
                    S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file, character device or FIFO"));
            const int fd = ::open(o->path.c_str(), O_WRONLY | O_CLOEXEC);
            if (fd < 0) fail(o->path, errno);
            if (const int err = write_all(fd, o->text)) fail(o->path, err);
        }
    } catch (...) {
        roll_back();
        throw;
    }
    // 3. Every temporary is complete: rename them all. A rename within one
    // folder fails only if the folder changed under us; what was renamed stays.
    for (std::size_t i = 0; i < pending.size(); ++i) {
        if (::rename(pending[i].temporary.c_str(), pending[i].target.c_str()) != 0) {
            const int err = errno;
            for (std::size_t j = i; j < pending.size(); ++j) ::unlink(pending[j].temporary.c_str());
            fail(pending[i].output->path, err);
        }
    }
}

}  // namespace parasim_cli
