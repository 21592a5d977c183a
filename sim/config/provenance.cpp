// {value, source | fitted_on} maps (see provenance.h).
#include "sim/config/provenance.h"

namespace sim::config {

namespace {

// Reads the evidence keys of a value map (after its unknown keys are
// refused); exactly one of source / fitted_on.
Provenance read_provenance(MapReader& r) {
    const auto src = r.optional("source");
    const auto fit = r.optional("fitted_on");
    r.finish();
    if (src && fit) fit->fail("give either source or fitted_on, not both");
    if (!src && !fit) r.node().fail("a value needs its evidence: source: or fitted_on:");
    const Node& n = src ? *src : *fit;
    if (!n.is_scalar() || n.as_string().empty()) n.fail("the evidence is a non-empty string");
    return {src ? "source" : "fitted_on", n.as_string()};
}

}  // namespace

Node sourced(MapReader& parent, const std::string& key, Provenance& from) {
    MapReader r(parent.required(key));
    const Node v = r.required("value");
    from = read_provenance(r);
    return v;
}

Node sourced(MapReader& parent, const std::string& key) {
    Provenance ignored;
    return sourced(parent, key, ignored);
}

}  // namespace sim::config
