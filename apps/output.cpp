// Atomic output: write to a temporary file beside the target, then rename,
// so an error never leaves a half-written file behind.
#include "apps/cli.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace parasim_cli {

void write_output(const std::string& path, const std::string& text) {
    if (path.empty() || path == "-") {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
        return;
    }
    const std::string tmp = path + ".tmp-parasim";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw UsageError(fmt::format("cannot write '{}'", path));
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        out.close();
        if (!out) {
            std::remove(tmp.c_str());
            throw UsageError(fmt::format("cannot write '{}'", path));
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::remove(tmp.c_str());
        throw UsageError(fmt::format("cannot write '{}': {}", path, ec.message()));
    }
}

}  // namespace parasim_cli
