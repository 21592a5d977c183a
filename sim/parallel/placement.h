// Rank placement: which parallel dimension gets consecutive GPU ids (and so
// stays inside a node). The emitter maps (replica, stage, cp rank, tp rank)
// to GPU ids with it (emitter.h, Emitter::real).
#pragma once

namespace sim::parallel {

// tp-first (default): TP groups inside nodes, stages and replicas across
// them; pp-first: pipeline stages on neighbouring GPUs.
enum class Placement { tp_first, pp_first };

}  // namespace sim::parallel
