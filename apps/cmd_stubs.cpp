// TEMPORARY: subcommands not wired yet (replaced in this session).
#include "apps/cli.h"
namespace parasim_cli {
int cmd_validate(const Args&) { throw UsageError("validate: not wired yet"); }
}  // namespace parasim_cli
