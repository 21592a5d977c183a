// Rank placement: which parallel dimension gets consecutive GPU ids (and so
// stays inside a node). The emitter maps (replica, stage, cp rank, tp rank)
// to GPU ids with it (emitter.h, Emitter::real).
#pragma once

namespace sim::parallel {

// tp-first (default): TP groups inside nodes, stages and replicas across
// them; pp-first: pipeline stages on neighbouring GPUs; pp-last:
// Megatron-LM's order (tp, cp, dp, pp from innermost: the dp ranks of a
// stage are neighbours, so a data- or expert-parallel group fills whole
// nodes and only the pipeline crosses them).
enum class Placement { tp_first, pp_first, pp_last };

}  // namespace sim::parallel
