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

// Which part of a backward an item runs. Zero-bubble schedules split a
// backward into its input-gradient part (what the previous stage waits for)
// and its weight-gradient GEMMs, run later to fill a bubble.
enum class BackwardPart : std::uint8_t { all, input, weight };

// One entry of a stage's schedule: forward or backward of micro-batch `mb`
// on model chunk `chunk` (0 unless the schedule holds several chunks per
// rank). `paired`: under overlap.moe_a2a this item and the next one run as
// an overlapped pair (only for schedules whose names_pairs() is true).
struct ScheduleItem {
    bool forward;
    int mb;
    int chunk;
    BackwardPart part = BackwardPart::all;
    bool paired = false;
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
    // How many virtual stages per rank the model is cut into (pp x this in
    // all), given the scenario's virtual_stages: that for a schedule that
    // uses them, else 1 (DualPipe's two chunks are two copies of pp
    // virtual stages); DualPipeV cuts one copy into 2 x pp.
    virtual int virtual_stages_per_rank(int asked) const { return uses_virtual_stages() ? asked : 1; }
    // The items stage `stage` (0-based) runs, in order: every (micro-batch,
    // chunk) once forward and once backward.
    virtual std::vector<ScheduleItem> items(const PipelineShape& shape, int stage) const = 0;
    // Model chunks whose activations stage `stage` holds at once at its peak
    // (each chunk holding one micro-batch's activations of its layers).
    virtual std::int64_t chunks_in_flight(const PipelineShape& shape, int stage) const = 0;

    // Where the layers live. The model is cut into virtual stages (the
    // partitioner's split); rank `stage` runs `chunks` of them, chunk c being
    // virtual stage virtual_stage(shape, stage, c). A micro-batch on chunk c
    // moves from virtual stage vs to vs + 1 on rank stage_of(shape, vs + 1, c).
    // Default (1F1B, GPipe, interleaved): chunk c of rank s is virtual stage
    // c x pp + s, and virtual stage vs runs on rank vs mod pp.
    virtual int chunks(const PipelineShape& shape) const { return shape.virtual_stages; }
    virtual int virtual_stage(const PipelineShape& shape, int stage, int chunk) const {
        return chunk * shape.stages + stage;
    }
    virtual int stage_of(const PipelineShape& shape, int vs, int /*chunk*/) const { return vs % shape.stages; }
    // Whether the schedule marks its overlapped pairs (ScheduleItem::paired);
    // otherwise overlap.moe_a2a pairs a backward with the forward after it.
    // A schedule that marks them counts the pair's forward in
    // chunks_in_flight already (it starts before the backward frees).
    virtual bool names_pairs() const { return false; }
    // Whether the plan search tries the schedule when `space.schedule` is
    // not given (a schedule it bounds only loosely is tried when named).
    virtual bool searched_by_default() const { return true; }
    // Whether the schedule orders a training step only (inference refuses it).
    virtual bool training_only() const { return false; }
    // Empty, or why a pipeline of this shape cannot run the schedule.
    virtual std::string refusal(const PipelineShape&) const { return {}; }
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
