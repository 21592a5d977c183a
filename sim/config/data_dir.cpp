// The one translation unit that knows where the shipped data is (sim/CMakeLists.txt defines
// PARASIM_DATA_DIR for this file alone).
#include "sim/config/data_dir.h"

namespace sim::config {

const char* data_dir() { return PARASIM_DATA_DIR; }

}  // namespace sim::config
