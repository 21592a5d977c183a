// ScaleOut of a build without MPI: always one process.
#include "apps/scaleout.h"

namespace parasim_cli {

ScaleOut::ScaleOut() = default;
ScaleOut::~ScaleOut() = default;

bool ScaleOut::run(sim::search::OrderedWork& work, int threads) {
    sim::search::run_local(work, threads);
    return true;
}

}  // namespace parasim_cli
