// The scale-out of `plan` and `sweep` over processes (docs/planning.md):
// under `mpirun -n R` or `srun` in a build with MPI, rank 0 hands out the
// positions of an OrderedWork one at a time to whichever rank asks next
// (dynamic balancing), gathers the results' bytes and alone writes the
// report, byte-identical to a one-process run. Without MPI (or when the
// process was not started by a launcher) this is one process, run_local.
// MPI itself stays behind this file (scaleout_mpi.cpp); the simulator never
// sees it (DESIGN.md section 10).
#pragma once

#include "sim/search/work.h"

namespace parasim_cli {

class ScaleOut {
public:
    // Joins the MPI job when launched as one of its ranks; a guard: MPI ends
    // with it. One per process.
    ScaleOut();
    ~ScaleOut();
    ScaleOut(const ScaleOut&) = delete;
    ScaleOut& operator=(const ScaleOut&) = delete;

    int rank() const { return rank_; }
    int ranks() const { return ranks_; }
    // Whether this process writes the report (rank 0, or the only process).
    bool reports() const { return rank_ == 0; }
    // Runs the work over every rank; `threads`: simulations at once in this
    // process (rank 0 under MPI: 0 means 1, beside its coordinator; the other
    // ranks run one at a time). Returns reports(). Every rank must call it.
    bool run(sim::search::OrderedWork& work, int threads);

private:
    int rank_ = 0, ranks_ = 1;
    bool mpi_ = false;
};

}  // namespace parasim_cli
