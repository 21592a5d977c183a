// End-to-end: run the parasim binary on scenarios and check what a user sees.
#include "sim/core/error.h"

#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

const std::string kRoot = PARASIM_DATA_DIR;

struct Result {
    int code = -1;
    std::string out;
    std::string err;
};

Result parasim(const std::string& args) {
    const auto dir = std::filesystem::temp_directory_path();
    const std::string err_file = (dir / ("parasim-e2e-" + std::to_string(std::rand()) + ".err")).string();
    const std::string cmd = std::string(PARASIM_BIN) + " " + args + " 2>" + err_file;
    Result r;
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::array<char, 4096> buf{};
    std::size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    const int status = pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream e(err_file);
    std::stringstream ss;
    ss << e.rdbuf();
    r.err = ss.str();
    std::filesystem::remove(err_file);
    return r;
}

YAML::Node json(const std::string& text) { return YAML::Load(text); }  // JSON is YAML

}  // namespace

TEST_CASE("parasim --help lists the subcommands and a bad command exits 2 with one line") {
    const auto help = parasim("--help");
    CHECK(help.code == 0);
    for (const char* c : {"run", "sweep", "validate", "bench"}) CHECK(help.out.find(c) != std::string::npos);
    const auto bad = parasim("frobnicate");
    CHECK(bad.code == 2);
    CHECK(bad.err == "parasim: unknown command 'frobnicate' (expected run, sweep, validate, bench or list)\n");
    const auto bad_opt = parasim("run --no-such-option x.yaml");
    CHECK(bad_opt.code == 2);
    CHECK(std::count(bad_opt.err.begin(), bad_opt.err.end(), '\n') == 1);
    CHECK(parasim("--version").code == 0);
    CHECK(parasim("run --help").code == 0);
}

TEST_CASE("the published partitioning experiment reports both strategies out of memory with the KV cache") {
    const auto r = parasim("run " + kRoot + "/scenarios/partitioning-16xh100.yaml --format json");
    REQUIRE(r.code == 0);
    const auto doc = json(r.out);
    CHECK(doc["scenario"].as<std::string>() == "partitioning-16xh100");
    REQUIRE(doc["runs"].size() == 2);
    for (const auto& run : doc["runs"]) {
        CHECK(run["feasible"].as<bool>() == false);
        CHECK(run["memory"]["oom"].as<bool>() == true);
        const double kv = run["memory"]["breakdown"]["kv_cache"].as<double>();
        CHECK(kv > run["memory"]["capacity_bytes"].as<double>());
        CHECK(run["metrics"]["tokens_per_s"].IsNull());
    }
}

TEST_CASE("the feasible partitioning variant reports every metric, with breakdowns summing to 1") {
    const auto r = parasim("run " + kRoot + "/scenarios/partitioning-16xh100-feasible.yaml --format json");
    REQUIRE(r.code == 0);
    const auto doc = json(r.out);
    REQUIRE(doc["runs"].size() == 2);
    for (const auto& run : doc["runs"]) {
        CHECK(run["feasible"].as<bool>());
        const auto m = run["metrics"];
        for (const char* k : {"tokens_per_s", "tpot_ms", "inv_tps_ms", "ttft_ms", "l2_hit_rate", "hbm_bytes", "gpu_busy"})
            CHECK_MESSAGE(!m[k].IsNull(), k);
        const auto b = m["breakdown"];
        const double sum = b["compute"].as<double>() + b["memory"].as<double>() + b["communication"].as<double>() +
                           b["idle"].as<double>();
        CHECK(sum == doctest::Approx(1.0).epsilon(0.001));
        for (const char* k : {"compute", "memory", "communication", "idle"}) {
            CHECK(b[k].as<double>() >= 0.0);
            CHECK(b[k].as<double>() <= 1.0);
        }
        CHECK(m["inv_tps_ms"].as<double>() == doctest::Approx(1000.0 / m["tokens_per_s"].as<double>()));
    }
}

TEST_CASE("a trace opens in Perfetto: every slice has ph, ts, dur, pid, tid") {
    const auto path = (std::filesystem::temp_directory_path() / "parasim-e2e-trace.json").string();
    const auto r = parasim("run " + kRoot + "/tests/data/scenarios/one-layer-tp2.yaml --trace " + path);
    REQUIRE(r.code == 0);
    const auto doc = YAML::LoadFile(path);
    const auto events = doc["traceEvents"];
    REQUIRE(events.IsSequence());
    int slices = 0;
    for (const auto& e : events) {
        const std::string ph = e["ph"].as<std::string>();
        if (ph != "X") continue;
        ++slices;
        for (const char* k : {"ts", "dur", "pid", "tid", "name"}) CHECK_MESSAGE(e[k].IsDefined(), k);
        CHECK(e["dur"].as<double>() >= 0);
    }
    CHECK(slices > 10);
    std::filesystem::remove(path);
}

TEST_CASE("a sweep gives byte-identical JSON with 1 and 2 threads") {
    const std::string cmd = "sweep " + kRoot + "/scenarios/partitioning-scaling.yaml --format json --threads ";
    const auto a = parasim(cmd + "1");
    const auto b = parasim(cmd + "2");
    REQUIRE(a.code == 0);
    CHECK(a.out == b.out);
    const auto doc = json(a.out);
    CHECK(doc["points"].size() == 3);
}

TEST_CASE("an unknown key names its file:line:column and the nearest valid key, exit 2, no output file") {
    const auto dir = std::filesystem::temp_directory_path();
    const auto bad = (dir / "parasim-e2e-bad.yaml").string();
    std::ofstream(bad) << "name: x\ncluster: dgx-h100\nmodel: llama3-8b\nworkload:\n  mode: inference\n  dtype: fp16\n"
                          "  bacth: 4\n  prompt_tokens: 16\n  output_tokens: 4\nstrategies:\n  - tp: 8\n";
    const auto out = (dir / "parasim-e2e-out.json").string();
    std::filesystem::remove(out);
    const auto r = parasim("run " + bad + " --output " + out);
    CHECK(r.code == 2);
    CHECK(r.err.find(bad + ":7:3: unknown key 'workload.bacth'") == 0);
    CHECK(r.err.find("did you mean 'batch'") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(out));
    std::filesystem::remove(bad);
}

TEST_CASE("sweep --plot runs gnuplot without a shell: a hostile scenario or folder name runs nothing") {
    const auto base = std::filesystem::temp_directory_path() / "parasim-e2e-plot";
    std::filesystem::remove_all(base);
    std::filesystem::create_directories(base);
    const auto mark = base / "MARK";
    const auto mark2 = base / "MARK2";
    // The name of the issue, with the mark at a fixed place whatever gnuplot's folder.
    const std::string name = "x'; system(\"touch " + mark.string() + "\"); print '";
    std::ifstream in(kRoot + "/tests/data/scenarios/one-layer-tp2.yaml");
    std::stringstream yaml;
    YAML::Emitter quoted;
    quoted << name;
    for (std::string line; std::getline(in, line);)
        yaml << (line.rfind("name: ", 0) == 0 ? "name: " + std::string(quoted.c_str()) : line) << "\n";
    yaml << "sweep:\n  workload.batch: [1, 2]\n";
    const auto scenario = base / "s.yaml";
    std::ofstream(scenario) << yaml.str();
    const auto plain = base / "plots";
    const auto r = parasim("sweep " + scenario.string() + " --plot " + plain.string());
    CHECK_FALSE(std::filesystem::exists(mark));
    // A folder name that closes a single-quoted shell word.
    const auto dir = base / ("p'; touch " + mark2.string() + "; echo '");
    const auto r2 = parasim("sweep " + scenario.string() + " --plot \"" + dir.string() + "\"");
    CHECK_FALSE(std::filesystem::exists(mark2));
    if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
        CHECK(r.code == 0);
        CHECK(r2.code == 0);
        std::ifstream svg(plain / "throughput.svg");
        std::stringstream text;
        text << svg.rdbuf();
        CHECK(text.str().find(name + ": throughput") != std::string::npos);  // shown verbatim
        CHECK(std::filesystem::exists(dir / "breakdown.svg"));
    } else {
        MESSAGE("gnuplot is not installed: only checking that nothing ran");
        CHECK(r.code == 2);
    }
    std::filesystem::remove_all(base);
}
