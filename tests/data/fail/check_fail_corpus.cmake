# SPDX-License-Identifier: MIT
# Regenerates the corrupt-trace corpus into WORK with GENERATOR and fails unless it is
# identical to the committed files in COMMITTED (same names, same bytes), so the corpus
# cannot drift from its generator.
#   cmake -DGENERATOR=... -DCOMMITTED=tests/data/fail -DWORK=/tmp/x -P check_fail_corpus.cmake
foreach(var GENERATOR COMMITTED WORK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_fail_corpus: ${var} is not set")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
execute_process(COMMAND "${GENERATOR}" "${WORK}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check_fail_corpus: ${GENERATOR} failed (${rc})")
endif()

file(GLOB generated RELATIVE "${WORK}" "${WORK}/*.ctf" "${WORK}/*.ctf.expect")
file(GLOB committed RELATIVE "${COMMITTED}" "${COMMITTED}/*.ctf" "${COMMITTED}/*.ctf.expect")
list(SORT generated)
list(SORT committed)
if(NOT generated STREQUAL committed)
  set(missing ${generated})
  list(REMOVE_ITEM missing ${committed})
  set(extra ${committed})
  list(REMOVE_ITEM extra ${generated})
  message(FATAL_ERROR "check_fail_corpus: the committed files differ from the generator's.\n"
                      "  not committed: ${missing}\n  not generated: ${extra}\n"
                      "Re-run: ${GENERATOR} ${COMMITTED}")
endif()
list(LENGTH generated count)
if(count LESS 2)
  message(FATAL_ERROR "check_fail_corpus: the generator wrote nothing")
endif()

set(differ "")
foreach(name IN LISTS generated)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${WORK}/${name}"
                          "${COMMITTED}/${name}" RESULT_VARIABLE same)
  if(NOT same EQUAL 0)
    list(APPEND differ "${name}")
  endif()
endforeach()
if(differ)
  message(FATAL_ERROR "check_fail_corpus: these files differ from the generator's output: "
                      "${differ}\nRe-run: ${GENERATOR} ${COMMITTED}")
endif()
message(STATUS "check_fail_corpus: ${count} files match the generator")
