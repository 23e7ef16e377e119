# SPDX-License-Identifier: MIT
# Runs the example and checks its trace with `ctfscope info --json`: the figures the example
# promises (2200 allocations, 2000 collects) must be what the reader finds.
execute_process(COMMAND ${WRITE_TRACE} ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "write_trace failed (${rc})")
endif()
execute_process(COMMAND ${CTFSCOPE} info --json ${OUT} OUTPUT_VARIABLE json RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ctfscope info failed (${rc}): ${json}")
endif()
string(JSON allocs GET "${json}" allocs_total)
string(JSON collects GET "${json}" events collect)
string(JSON result GET "${json}" reader_result)
if(NOT allocs EQUAL 2200 OR NOT collects EQUAL 2000 OR NOT result STREQUAL "ok")
  message(FATAL_ERROR "unexpected figures: allocs=${allocs} collects=${collects} result=${result}")
endif()
message(STATUS "example trace: ${allocs} allocations, ${collects} collects, ${result}")
