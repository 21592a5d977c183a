// TEMPORARY: subcommands not wired yet (replaced in this session).
#include "apps/cli.h"
namespace parasim_cli {
int cmd_run(const Args&) { throw UsageError("run: not wired yet"); }
int cmd_sweep(const Args&) { throw UsageError("sweep: not wired yet"); }
int cmd_validate(const Args&) { throw UsageError("validate: not wired yet"); }
int cmd_list(const Args&) { throw UsageError("list: not wired yet"); }
int bench_scale(const std::string&) { throw UsageError("bench scale: not wired yet"); }
void write_output(const std::string&, const std::string&) {}
}  // namespace parasim_cli
