// Running gnuplot for the commands that draw plots (sweep, plan): as an
// argument vector, never through a shell.
#include "apps/cli.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace parasim_cli {

void run_gnuplot(const std::filesystem::path& dir, const std::string& script) {
    const std::string log = (dir / "gnuplot.log").string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    std::string program = "gnuplot", argument = script;
    char* argv[] = {program.data(), argument.data(), nullptr};
    pid_t pid = 0;
    const int spawned = posix_spawnp(&pid, "gnuplot", &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0)
        throw PlotError(fmt::format("--plot: cannot run gnuplot: {} (is gnuplot installed?)", std::strerror(spawned)));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
    std::string first;
    std::ifstream in(log);
    std::getline(in, first);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && first.empty()) first = "gnuplot not found";
    throw PlotError(fmt::format("--plot: gnuplot failed on {}: {}", script, first.empty() ? "no message" : first));
}

}  // namespace parasim_cli
