// Annotations loader (see annotations.h): reads each entry with MapReader,
// resolves its selector against the dataset, and sets the fields it states on
// the points it selects, refusing any contradiction.
#include "sim/validate/annotations.h"

#include "sim/config/run_details.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <utility>

namespace sim::validate {

namespace {

using config::MapReader;
using config::Node;

// Point fields an entry may not set, with the reason. Anything else unknown
// is rejected by MapReader::finish with its "did you mean".
const std::vector<std::pair<std::string, std::string>> kNotAnnotatable = {
    {"measured", "a measured value comes from the dataset's source, never from an annotation"},
    {"id", "an entry selects points with 'select'; it does not rename them"},
    {"kind", "the kind decides what is measured; it is the dataset's"},
    {"notes", "cite the evidence in the entry's own 'source'"},
    {"hardware", "only 'software' may be annotated"},
    {"model", "only 'software' may be annotated"},
    {"workload", "only 'software' may be annotated"},
    {"parallelism", "only 'software' may be annotated"},
    {"op", "only 'software' may be annotated"},
};

// The points of the dataset ordered by `source`, so that the points whose
// source begins with a prefix are one contiguous range (found in log time,
// whatever the number of entries).
struct SourceIndex {
    std::vector<std::pair<std::string_view, std::size_t>> by_source;
    explicit SourceIndex(const Dataset& d) {
        for (std::size_t i = 0; i < d.points.size(); ++i) by_source.emplace_back(d.points[i].source, i);
        std::sort(by_source.begin(), by_source.end());
    }
    std::vector<std::size_t> with_prefix(std::string_view prefix) const {
        std::vector<std::size_t> out;
        auto it = std::lower_bound(by_source.begin(), by_source.end(), std::pair{prefix, std::size_t{0}});
        for (; it != by_source.end() && it->first.substr(0, prefix.size()) == prefix; ++it) out.push_back(it->second);
        std::sort(out.begin(), out.end());  // dataset order
        return out;
    }
};

// The points an entry's `select` names: exactly one of `source_prefix` (every
// point whose source begins with it) and `ids` (a list of point ids).
std::vector<std::size_t> select_points(const Node& node, const Dataset& d, const SourceIndex& index,
                                       const std::map<std::string, std::size_t, std::less<>>& by_id) {
    MapReader r(node);
    const std::optional<Node> prefix = r.optional("source_prefix"), ids = r.optional("ids");
    r.finish();
    if (prefix.has_value() == ids.has_value()) node.fail("give exactly one of 'source_prefix' and 'ids'");
    std::vector<std::size_t> out;
    if (prefix) {
        const std::string p = prefix->as_string();
        if (p.empty()) prefix->fail("source_prefix: an empty prefix would select every point; name the source");
        out = index.with_prefix(p);
        if (out.empty()) prefix->fail(fmt::format("no point of {} has a source beginning '{}'", d.file, p));
        return out;
    }
    const auto list = ids->elements();
    if (list.empty()) ids->fail("ids: an empty list selects no point");
    std::set<std::string, std::less<>> seen;
    for (const Node& n : list) {
        const std::string id = n.as_string();
        if (!seen.insert(id).second) n.fail(fmt::format("ids: '{}' is listed twice", id));
        const auto it = by_id.find(id);
        if (it == by_id.end()) n.fail(fmt::format("ids: no point '{}' in {}", id, d.file));
        out.push_back(it->second);
    }
    return out;
}

std::string software_text(const config::SoftwareSpec& s) {
    return s.version.empty() ? s.name : fmt::format("{} {}", s.name, s.version);
}

}  // namespace

void annotate(Dataset& d, const Node& root) {
    MapReader r(root);
    r.optional("description");
    const Node list = r.required("annotations");
    r.finish();
    const auto entries = list.elements();
    if (entries.empty()) list.fail("annotations: the file annotates nothing");
    const SourceIndex index(d);
    std::map<std::string, std::size_t, std::less<>> by_id;
    for (std::size_t i = 0; i < d.points.size(); ++i) by_id.emplace(d.points[i].id, i);
    // point index -> where its software was annotated: a second entry that
    // sets it again is an error, whatever it says.
    std::map<std::size_t, SourceLocation> annotated;
    for (const Node& entry : entries) {
        MapReader e(entry);
        const auto chosen = select_points(e.required("select"), d, index, by_id);
        const Node source = e.required("source");
        if (source.as_string().empty()) source.fail("source: say why this is known (a page, a table, a command)");
        for (const auto& [key, why] : kNotAnnotatable)
            if (auto n = e.optional(key)) n->fail(fmt::format("'{}' cannot be annotated: {}", key, why));
        const Node software_node = e.required("software");
        const config::SoftwareSpec software = config::read_software(software_node);
        e.finish();
        const SourceLocation at = software_node.location();
        for (const std::size_t i : chosen) {
            Point& p = d.points[i];
            if (auto it = annotated.find(i); it != annotated.end())
                software_node.fail(
                    fmt::format("point '{}' has its software annotated already (at {})", p.id, it->second.to_string()));
            annotated.emplace(i, at);
            if (p.software.given()) {
                // The dataset's own statement wins; an annotation may only
                // repeat it, or add a version to a stack it names without one.
                const bool same_name = p.software.name == software.name;
                const bool same_version = p.software.version.empty() || p.software.version == software.version;
                if (!same_name || !same_version)
                    software_node.fail(fmt::format("point '{}' ({}) states software {}; this says {}", p.id,
                                                   p.where.to_string(), software_text(p.software),
                                                   software_text(software)));
                if (p.software.version == software.version) continue;  // nothing new
            }
            p.software = software;
            p.annotated.push_back(fmt::format("software={} ({})", software_text(software), at.to_string()));
        }
    }
}

void annotate(Dataset& dataset, const std::string& path) { annotate(dataset, config::load_file(path)); }

}  // namespace sim::validate
