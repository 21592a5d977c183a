// The eight-step order shared by DualPipe and DualPipeV (dual_steps.h).
#include "sim/parallel/schedule/dual_steps.h"

#include <algorithm>
#include <deque>

namespace sim::parallel::schedules {

std::vector<ScheduleItem> dual_steps(const DualRank& r) {
    const int h = r.h, big_h = r.big_h, n = r.per_chunk;
    const int near = r.near, far = 1 - near;
    int fwd_done[2] = {0, 0}, bwd_done[2] = {0, 0};
    std::deque<ScheduleItem> weights;  // input-gradient backwards whose weight gradient waits
    std::vector<ScheduleItem> out;
    const auto f = [&](int c, bool paired = false) {
        out.push_back({true, r.first_mb[c] + fwd_done[c]++, c, BackwardPart::all, paired});
    };
    const auto b = [&](int c, bool zero_bubble = false) {
        const ScheduleItem it{false, r.first_mb[c] + bwd_done[c]++, c,
                              zero_bubble ? BackwardPart::input : BackwardPart::all, false};
        out.push_back(it);
        if (zero_bubble) weights.push_back({false, it.mb, c, BackwardPart::weight, false});
    };
    const auto w = [&] {
        out.push_back(weights.front());
        weights.pop_front();
    };
    const auto fb = [&](int cf, int cb) {  // an overlapped pair: forward cf with backward cb
        f(cf, true);
        b(cb);
    };
    for (int i = 0; i < 2 * (big_h - h - 1); ++i) f(near);  // 1
    for (int i = 0; i < h + 1; ++i) {                       // 2
        f(near);
        f(far);
    }
    for (int i = 0; i < big_h - h - 1; ++i) {  // 3
        b(far, true);
        w();
        f(far);
    }
    for (int i = 0; i < n - 2 * big_h + h + 1; ++i) {  // 4
        if (i == 0 && h == big_h - 1) {
            f(near);
            b(far);
        } else {
            fb(near, far);
        }
        fb(far, near);
    }
    for (int i = 0; i < big_h - h - 1; ++i) {  // 5
        b(far);
        fb(far, near);
    }
    bool zero_bubble = false;  // 6
    for (int i = 0; i < h + 1; ++i) {
        if (i == (h + 1) / 2 && h % 2 == 1) zero_bubble = true;
        b(far, zero_bubble);
        if (i == (h + 1) / 2 && h % 2 == 0) zero_bubble = true;
        b(near, zero_bubble);
    }
    for (int i = 0; i < big_h - h - 1; ++i) {  // 7
        w();
        b(near, true);
    }
    while (!weights.empty()) w();  // 8: h + 1 of them
    return out;
}

std::int64_t dual_steps_peak(const std::vector<ScheduleItem>& items) {
    std::int64_t held = 0, peak = 0;
    for (const auto& it : items) {
        if (it.forward) ++held;
        else if (it.part != BackwardPart::weight) --held;
        peak = std::max(peak, held);
    }
    return peak;
}

}  // namespace sim::parallel::schedules
