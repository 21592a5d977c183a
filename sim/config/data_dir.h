// The folder that parasim's shipped data lives in (models/, topologies/, scenarios/, docs/): the
// source tree it was built from. Only data_dir.cpp holds the path, so a checkout in another folder
// recompiles that one file and a compiler cache hits on every other one.
#pragma once

namespace sim::config {

// The absolute path of the source tree, without a trailing slash.
const char* data_dir();

}  // namespace sim::config
