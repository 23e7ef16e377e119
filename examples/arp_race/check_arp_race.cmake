# SPDX-License-Identifier: MIT
# Runs `arp_race --both` and compares the two traces as `ctfscope dump` prints them, times
# left out: they must be the same up to the first network event, where the good run
# resolves "ring.write" and the bad one notifies the "ARP response" condition that nobody
# waits on yet; the good run resolves the should_resolve task "main", the bad run never
# does and ends idle.
cmake_minimum_required(VERSION 3.25) # IN_LIST, list(SUBLIST)
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
execute_process(COMMAND ${ARP_RACE} --both ${OUT} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "arp_race --both failed (${rc}):\n${out}")
endif()

function(dump_events name var)
  execute_process(COMMAND ${CTFSCOPE} dump --no-comments ${OUT}/arp_${name}.ctf
                  OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ctfscope dump ${name} failed (${rc})")
  endif()
  string(REGEX REPLACE "(^|\n)[0-9]+ " "\\1" text "${text}") # drop the times
  string(REGEX REPLACE "\n$" "" text "${text}")
  string(REPLACE ";" "," text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(${var} "${lines}" PARENT_SCOPE)
endfunction()
dump_events(good good)
dump_events(bad bad)

# The task ids, from their labels (the same in both runs: tasks are numbered from 1).
foreach(line IN LISTS good)
  if(line MATCHES "^label thread=([0-9]+) label=\"__should_resolve\"$")
    set(main ${CMAKE_MATCH_1})
  elseif(line MATCHES "^label thread=([0-9]+) label=\"ring.write\"$")
    set(ring_write ${CMAKE_MATCH_1})
  elseif(line MATCHES "^label thread=([0-9]+) label=\"ARP response\"$" AND NOT cond)
    set(cond ${CMAKE_MATCH_1})
  endif()
endforeach()
if(NOT main OR NOT ring_write OR NOT cond)
  message(FATAL_ERROR "labels missing: main=${main} ring.write=${ring_write} cond=${cond}")
endif()

# The common prefix, and the first difference.
list(LENGTH good ngood)
list(LENGTH bad nbad)
set(i 0)
while(i LESS ngood AND i LESS nbad)
  list(GET good ${i} g)
  list(GET bad ${i} b)
  if(NOT g STREQUAL b)
    break()
  endif()
  math(EXPR i "${i} + 1")
endwhile()
if(i EQUAL ngood OR i EQUAL nbad)
  message(FATAL_ERROR "one trace is a prefix of the other")
endif()
list(SUBLIST good 0 ${i} prefix)
if(NOT "label thread=${main} label=\"__should_resolve\"" IN_LIST prefix)
  message(FATAL_ERROR "the traces differ before main is marked should_resolve")
endif()
if(NOT g MATCHES "^fulfills thread=[0-9]+ resolvee=${ring_write}$" OR
   NOT b MATCHES "^signal thread=${cond} source=[0-9]+$")
  message(FATAL_ERROR "first difference (event ${i}):\n  good: ${g}\n  bad:  ${b}")
endif()

# The good run resolves main; the bad run never does, and ends idle.
set(good_resolves OFF)
foreach(line IN LISTS good)
  if(line MATCHES "^fulfills thread=[0-9]+ resolvee=${main}$")
    set(good_resolves ON)
  endif()
endforeach()
foreach(line IN LISTS bad)
  if(line MATCHES "resolvee=${main}$")
    message(FATAL_ERROR "the bad run resolves main: ${line}")
  endif()
endforeach()
list(GET bad -1 last)
if(NOT good_resolves OR NOT last STREQUAL "switch thread=-1")
  message(FATAL_ERROR "good resolves main: ${good_resolves}; bad ends with: ${last}")
endif()
message(STATUS "arp_race: ${i} events in common, then good: '${g}', bad: '${b}'; "
               "main (task ${main}) resolves only in the good run")
