# Writes CTEST_FILE: one ctest test per doctest case of TEST_EXECUTABLE,
# labelled by its doctest test suite, each suite in LABELS_LIST (a
# `|`-separated list). Run after every link of the test binary
# (tests/CMakeLists.txt).
#
# Debian's doctest 2.4.9 ships doctest_discover_tests(... ADD_LABELS 1), but
# its script loses the label of every case whose name holds a comma (it asks
# for the case's suite with an unescaped filter), splits a name that holds a
# semicolon into two tests, and starts the binary once per case. Here the
# binary runs once per label, names reach ctest whole (bracket arguments), and
# the filter escapes `\` and `,` as doctest's --test-case expects.
string(REPLACE "|" ";" labels "${LABELS_LIST}")
set(script "")
foreach(label IN LISTS labels)
  execute_process(
    COMMAND "${TEST_EXECUTABLE}" --list-test-cases "--test-suite=${label}" --no-version
    OUTPUT_VARIABLE output
    RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${TEST_EXECUTABLE} --list-test-cases failed (${result}):\n${output}")
  endif()
  # Keep semicolons of the names out of CMake's list splitting.
  string(REPLACE ";" "<semicolon>" output "${output}")
  string(REPLACE "\n" ";" lines "${output}")
  foreach(line IN LISTS lines)
    if(line STREQUAL "" OR line MATCHES "^\\[doctest\\] " OR line MATCHES "^=+$")
      continue()
    endif()
    string(REPLACE "<semicolon>" ";" name "${line}")
    string(REPLACE "\\" "\\\\" filter "${name}")
    string(REPLACE "," "\\," filter "${filter}")
    string(APPEND script
      "add_test([==[${name}]==] \"${TEST_EXECUTABLE}\" [==[--test-case=${filter}]==])\n"
      "set_tests_properties([==[${name}]==] PROPERTIES LABELS ${label})\n")
  endforeach()
endforeach()
file(WRITE "${CTEST_FILE}" "${script}")
