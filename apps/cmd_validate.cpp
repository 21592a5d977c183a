// parasim validate DATASET: simulate every published measurement of a
// dataset with the machinery of `parasim run` and report the error per
// point and the MAPE per kind (docs/validation.md).
#include "apps/cli.h"
#include "apps/command_line.h"
#include "sim/validate/annotations.h"
#include "sim/validate/translate.h"
#include "sim/validate/validate.h"

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <sstream>

namespace po = boost::program_options;

namespace parasim_cli {

namespace {

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (!item.empty()) out.push_back(item);
    }
    return out;
}

}  // namespace

int cmd_validate(const Args& args) {
    CommandLine cl({.command = "validate",
                    .input = "dataset",
                    .input_help = "dataset file",
                    .missing_input = "a dataset file",
                    .formats = {"table", "json"},
                    .overrides = false});
    cl.add()("kind", po::value<std::string>(), "only points of these kinds (comma-separated: training,inference,...)")(
        "id", po::value<std::string>(), "only the points with these ids (comma-separated)")(
        "jobs,j", po::value<int>()->default_value(0), "points simulated in parallel (0: one per hardware thread)")(
        "scenarios", po::value<std::string>(),
        "also write each whole-run (serving) point as a scenario file DIR/<id>.yaml that 'parasim run' ('parasim "
        "serve') "
        "simulates identically")("gpu-dir", po::value<std::string>(),
                                 "read GPU files from DIR instead of topologies/gpus (tools/fit-gemms.py)")(
        "software-dir", po::value<std::string>(),
        "read software profiles from DIR instead of topologies/software (tools/fit-profiles.py)")(
        "attention-fit", po::value<std::string>(),
        "read the attention shape constants from FILE instead of topologies/kernels/flash-attention.yaml "
        "(tools/fit-kernel-constants.py --attention-shape)")(
        "annotations", po::value<std::string>(),
        "set on the dataset's points the run details FILE states that the dataset does not (software: {name, "
        "version}), each entry selecting points by source prefix or id and citing its own source; a selector that "
        "matches nothing, or a value that contradicts the point, is an error (docs/validation.md section 2, "
        "\"Annotations\")");
    if (!cl.parse(args,
                  "Example: parasim validate ../shared/validation/published.yaml --format json\n"
                  "         parasim validate ../shared/validation/published.yaml --annotations "
                  "tests/data/validation/published-annotations.yaml\n"
                  "The dataset format is described in docs/validation.md.\n"))
        return 0;
    const auto& vm = cl.vm();
    const std::string& format = cl.format();
    sim::validate::ValidateOptions vo;
    vo.jobs = cl.int_at_least("jobs", 0);
    if (vm.count("gpu-dir")) vo.gpu_dir = vm["gpu-dir"].as<std::string>();
    if (vm.count("software-dir")) vo.software_dir = vm["software-dir"].as<std::string>();
    if (vm.count("attention-fit")) vo.attention_fit = vm["attention-fit"].as<std::string>();
    if (vm.count("id")) vo.ids = split(vm["id"].as<std::string>());
    if (vm.count("kind")) {
        for (const auto& name : split(vm["kind"].as<std::string>())) {
            bool found = false;
            for (auto k : sim::validate::kAllKinds)
                if (name == sim::validate::to_string(k)) {
                    vo.kinds.push_back(k);
                    found = true;
                }
            if (!found)
                throw UsageError(fmt::format(
                    "--kind: '{}' is not a kind (training, inference, gemm, attention, collective, memory, serving)",
                    name));
        }
    }
    auto dataset = sim::validate::load_dataset(cl.input());
    if (vm.count("annotations")) {
        vo.annotations = vm["annotations"].as<std::string>();
        sim::validate::annotate(dataset, vo.annotations);
    }
    if (!vo.ids.empty()) {
        for (const auto& id : vo.ids) {
            bool found = false;
            for (const auto& p : dataset.points) found = found || p.id == id;
            if (!found) throw UsageError(fmt::format("--id: no point '{}' in {}", id, dataset.file));
        }
    }
    OutputSet outputs;  // the report and the scenario files: all or none
    if (vm.count("scenarios")) {
        const std::string dir = vm["scenarios"].as<std::string>();
        outputs.add_directory(dir);
        sim::config::GpuCatalog catalog;
        const sim::validate::ShippedClusters shipped;
        for (const auto& p : dataset.points) {
            if (p.kind != sim::validate::Kind::training && p.kind != sim::validate::Kind::inference &&
                p.kind != sim::validate::Kind::serving)
                continue;
            if (!vo.ids.empty() && std::find(vo.ids.begin(), vo.ids.end(), p.id) == vo.ids.end()) continue;
            const auto setup = sim::validate::translate(p, catalog, shipped, vo.software_dir);
            if (!setup.skip) outputs.add(dir + "/" + p.id + ".yaml", sim::validate::scenario_yaml(p, setup));
        }
    }
    const auto report = sim::validate::validate(dataset, vo);
    outputs.add(cl.output(),
                format == "json" ? sim::validate::format_json(report) : sim::validate::format_table(report));
    outputs.commit();
    return 0;
}

}  // namespace parasim_cli
