// Iteration cost: plan, execute, cache by exact shape.
#include "sim/serve/iteration_cost.h"

#include <algorithm>
#include <tuple>

namespace sim::serve {

std::size_t IterationCost::KeyHash::operator()(const std::vector<std::int64_t>& k) const {
    std::uint64_t h = 1469598103934665603ULL;  // FNV-1a over the words
    for (const auto v : k) {
        h ^= static_cast<std::uint64_t>(v);
        h *= 1099511628211ULL;
    }
    return static_cast<std::size_t>(h);
}

IterationCost::IterationCost(const config::ScenarioSpec& sc, const parallel::PlanBuild& base, const hw::CostModel& cm,
                             int stage)
    : sc_(sc), base_(base), stage_(stage), memo_cm_(cm, sc.gpu), topo_(sc.cluster, sc.gpus) {
    eo_.host_kernel_issue = sc.profile.kernel_issue;
    eo_.launch_queue_depth = sc.profile.launch_queue_depth;
    eo_.kernel_efficiency = sc.profile.kernel_efficiency;
    eo_.collectives = sc.collectives;
}

Time IterationCost::time(const parallel::IterationBatch& batch) {
    key_.clear();
    key_.push_back(batch.sampled);
    for (const auto& g : batch.groups) {
        key_.push_back(g.sequences);
        key_.push_back(g.new_tokens);
        key_.push_back(g.context);
    }
    if (const auto it = cache_.find(key_); it != cache_.end()) {
        ++hits_;
        return it->second;
    }
    ++misses_;
    const parallel::Plan plan = parallel::build_iteration_plan(sc_, base_, batch, stage_);
    const Time t = exec::execute(plan, sc_.gpu, topo_, memo_cm_, eo_).makespan;
    cache_.emplace(key_, t);
    return t;
}

// The iteration's shape, canonical: every decode in one group of its mean
// context (rounded up), each prefill chunk a group of its own, equal chunks
// merged, groups sorted (docs/serving.md says why the mean).
void batch_shape(const EngineState& st, const std::vector<Work>& work, std::int64_t bucket, parallel::IterationBatch& b,
                 std::vector<parallel::IterationGroup>& prefills) {
    b.groups.clear();
    b.sampled = 0;
    prefills.clear();
    std::int64_t decodes = 0, decode_ctx = 0;
    for (const auto& w : work) {
        const Sequence& s = st.seqs[w.seq];
        const std::int64_t ctx = s.computed + w.tokens;
        if (ctx == s.prompt + s.generated) ++b.sampled;
        if (w.tokens == 1 && !s.prefilling()) {
            ++decodes;
            decode_ctx += ctx;
        } else {
            prefills.push_back(parallel::IterationGroup{1, w.tokens, ctx});
        }
    }
    std::sort(prefills.begin(), prefills.end(), [](const auto& a, const auto& c) {
        return std::tie(a.new_tokens, a.context) < std::tie(c.new_tokens, c.context);
    });
    for (const auto& g : prefills) {
        if (!b.groups.empty() && b.groups.back().new_tokens == g.new_tokens && b.groups.back().context == g.context)
            ++b.groups.back().sequences;
        else b.groups.push_back(g);
    }
    if (decodes > 0) {
        const std::int64_t mean = (decode_ctx + decodes - 1) / decodes;
        b.groups.push_back(parallel::IterationGroup{decodes, 1, (mean + bucket - 1) / bucket * bucket});
    }
}

}  // namespace sim::serve
