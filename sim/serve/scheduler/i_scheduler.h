// The serving batch scheduler: what runs in the next iteration of an
// inference engine. One interface, one file per implementation (static
// batching, continuous batching, chunked prefill), listed by name in
// registry.cpp (docs/architecture.md, "Registries"; docs/serving.md).
#pragma once

#include "sim/serve/engine_state.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sim::serve {

class IServingScheduler {
public:
    virtual ~IServingScheduler() = default;
    virtual std::string_view name() const = 0;
    virtual std::string_view description() const = 0;
    // max_tokens_per_iteration when the scenario does not give it.
    virtual std::int64_t default_max_tokens() const = 0;
    // Whether a prompt may take several iterations (otherwise a prompt longer
    // than max_tokens_per_iteration can never run).
    virtual bool chunks_prefill() const = 0;
    // Whether sequences may join and leave the running set between any two
    // iterations (disaggregated decode replicas receive them one by one).
    virtual bool iteration_level() const { return true; }
    // Chooses the next iteration's work (appended to `out`, empty when
    // nothing can run): admits waiting requests, allocates their KV blocks,
    // and preempts running ones when blocks run out. Each work item feeds
    // `tokens` tokens of one sequence.
    virtual void schedule(EngineState& state, std::vector<Work>& out) const = 0;
};

const std::vector<const IServingScheduler*>& serving_schedulers();
std::vector<std::string> serving_scheduler_names();
// ModelError listing the registered names when `name` is not one.
const IServingScheduler& serving_scheduler(std::string_view name);
const IServingScheduler& default_serving_scheduler();

}  // namespace sim::serve
