// The one test translation unit that knows the binary's path (tests/CMakeLists.txt defines
// PARASIM_BIN for this file alone).
#include "tests/parasim_bin.h"

namespace test_support {

const char* parasim_bin() { return PARASIM_BIN; }

}  // namespace test_support
