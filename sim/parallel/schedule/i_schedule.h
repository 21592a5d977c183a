// The pipeline schedule interface and its registry. A schedule decides, for
// each pipeline stage, the order in which that stage runs the forward and
// backward passes of the micro-batches (its items), and how many model
// chunks' activations a stage holds at its peak (what memory accounting
// charges). Implementations live one per .cpp in this folder, with no header;
// registry.cpp lists them (docs/architecture.md, "Registries").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sim::parallel {

// One entry of a stage's schedule: forward or backward of micro-batch `mb`
// on model chunk `chunk` (0 unless the schedule uses virtual stages).
struct ScheduleItem {
    bool forward;
    int mb;
    int chunk;
    bool operator==(const ScheduleItem&) const = default;
};

// The pipeline a schedule orders: `stages` pipeline ranks, `microbatches`
// per iteration, `virtual_stages` model chunks per rank (1 for schedules
// that do not use them).
struct PipelineShape {
    int stages = 1;
    int microbatches = 1;
    int virtual_stages = 1;
};

class IPipelineSchedule {
public:
    virtual ~IPipelineSchedule() = default;
    // The name a scenario gives in `schedule:`.
    virtual std::string_view name() const = 0;
    // One line for `parasim list schedules`.
    virtual std::string_view description() const = 0;
    // Whether the schedule runs virtual_stages (>= 2) model chunks per rank;
    // the others run one and ignore the setting.
    virtual bool uses_virtual_stages() const { return false; }
    // The items stage `stage` (0-based) runs, in order: every (micro-batch,
    // chunk) once forward and once backward.
    virtual std::vector<ScheduleItem> items(const PipelineShape& shape, int stage) const = 0;
    // Model chunks whose activations stage `stage` holds at once at its peak
    // (each chunk holding one micro-batch's activations of its layers).
    virtual std::int64_t chunks_in_flight(const PipelineShape& shape, int stage) const = 0;
};

// Every registered schedule, in listing order; read-only after first use.
const std::vector<const IPipelineSchedule*>& pipeline_schedules();
std::vector<std::string> pipeline_schedule_names();
// nullptr when no schedule has that name.
const IPipelineSchedule* find_pipeline_schedule(std::string_view name);
// ModelError naming the registered schedules when `name` is unknown.
const IPipelineSchedule& pipeline_schedule(std::string_view name);
// What a strategy runs when it names none (1F1B).
const IPipelineSchedule& default_pipeline_schedule();

}  // namespace sim::parallel
