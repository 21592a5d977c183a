// The seeded randomness the property tests share (test_properties.cpp,
// test_flow_properties.cpp): the seed and scenario count (overridable from the
// environment), a platform-independent RNG, and the shipped clusters the
// generators draw from.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace property_test {

constexpr std::uint64_t kDefaultSeed = 20240611;
constexpr int kDefaultScenarios = 300;

// PARASIM_PROPERTY_SEED and PARASIM_PROPERTY_SCENARIOS explore further
// (e.g. a nightly run of 5000); CI uses the defaults.
inline std::uint64_t env_or(const char* name, std::uint64_t fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}
inline const std::uint64_t kSeed = env_or("PARASIM_PROPERTY_SEED", kDefaultSeed);
inline const int kScenarios = static_cast<int>(env_or("PARASIM_PROPERTY_SCENARIOS", kDefaultScenarios));

// splitmix64: the same sequence on every platform and standard library.
struct Rng {
    std::uint64_t state;
    std::uint64_t next() {
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    int pick(int lo, int hi) { return lo + static_cast<int>(next() % static_cast<std::uint64_t>(hi - lo + 1)); }
    bool coin(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
    template <class T>
    const T& of(const std::vector<T>& v) {
        return v[next() % v.size()];
    }
};

struct ClusterChoice {
    std::string name;
    int max_gpus;
    bool hopper;  // fp8
};

inline const std::vector<ClusterChoice> kClusters = {{"dgx-h100", 8, true},
                                                     {"dgx-h100-x2", 16, true},
                                                     {"dgx-a100", 8, false},
                                                     {"pcie-h100-x8", 8, true},
                                                     {"dgx-h100-pod", 64, true}};

}  // namespace property_test
