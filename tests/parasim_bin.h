// The path of the parasim binary that the end-to-end tests run. Only parasim_bin.cpp holds it, so a
// checkout in another folder recompiles that one file and a compiler cache hits on every other test.
#pragma once

namespace test_support {

const char* parasim_bin();

}  // namespace test_support
