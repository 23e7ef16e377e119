# SPDX-License-Identifier: MIT
# `ctfscope diff GOOD BAD` on task traces as users run it, against golden files in
# tests/cli/golden/diff: the ARP-race demo's good and bad runs (recorded here by
# examples/arp_race, so times vary: "+12.6 us" and JSON times are masked) and two corpus
# traces (deterministic). The demo's first divergence must name the race itself: the
# "ARP response" condition signalled before "ring.write" resolved. UPDATE=1 rewrites the
# golden files instead (review the changes before committing).
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
execute_process(COMMAND ${ARP_RACE} --both ${OUT} OUTPUT_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "arp_race --both failed (${rc})")
endif()
set(failures 0)

# Runs ctfscope with ARGN from WORKDIR, masks what varies and compares with golden NAME.
function(check name workdir)
  execute_process(COMMAND ${CTFSCOPE} ${ARGN} WORKING_DIRECTORY ${workdir}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  set(text "${out}${err}exit ${rc}\n")
  if(MASK)
    # Times, and the padding after them (its width follows theirs).
    string(REGEX REPLACE "[0-9][0-9.]* (ns|us|ms|s)  +" "T  " text "${text}")
    string(REGEX REPLACE "[0-9][0-9.]* (ns|us|ms|s)([ ,\n])" "T\\2" text "${text}")
    string(REGEX REPLACE "\"(time_ns|duration_ns|running_ns)\": [0-9]+" "\"\\1\": T" text
                         "${text}")
  endif()
  set(golden ${SRC}/tests/cli/golden/diff/${name})
  if(UPDATE)
    file(WRITE ${golden} "${text}")
    return()
  endif()
  if(NOT EXISTS ${golden})
    message(SEND_ERROR "${name}: no golden file ${golden} (run with -DUPDATE=1)")
    return()
  endif()
  file(READ ${golden} want)
  if(NOT want STREQUAL text)
    message(SEND_ERROR "${name} differs from ${golden}:\n--- golden\n${want}--- actual\n${text}")
  endif()
endfunction()

set(MASK ON)
check(arp_race.txt ${OUT} diff arp_good.ctf arp_bad.ctf)
check(arp_race.json ${OUT} diff --json arp_good.ctf arp_bad.ctf)
check(arp_race_same.txt ${OUT} diff arp_good.ctf arp_good.ctf)
# The divergence must be the race, whatever the golden says.
execute_process(COMMAND ${CTFSCOPE} diff arp_good.ctf arp_bad.ctf WORKING_DIRECTORY ${OUT}
                OUTPUT_VARIABLE out)
if(NOT out MATCHES "then in bad +bad [^\n]*port-4 signalled ARP response\n")
  message(SEND_ERROR "the first divergence is not the ARP race:\n${out}")
endif()
set(MASK OFF)
if(EXISTS ${CORPUS}/mprof/net/net.ctf)
  file(COPY ${CORPUS}/mprof/net/net.ctf ${CORPUS}/mprof/wrapped/koleini-trace1-0a4963a.ctf
       DESTINATION ${OUT})
  check(net_koleini.txt ${OUT} diff net.ctf koleini-trace1-0a4963a.ctf)
  check(net_koleini.json ${OUT} diff --json -n 5 net.ctf koleini-trace1-0a4963a.ctf)
  check(net_net.txt ${OUT} diff net.ctf net.ctf)
else()
  message(STATUS "no corpus at ${CORPUS}: corpus cases skipped")
endif()
