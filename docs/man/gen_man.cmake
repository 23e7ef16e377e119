# SPDX-License-Identifier: MIT
# Renders `ctfscope COMMAND --help` as a man page (ctfscope-COMMAND.1), so that the help
# text stays the one source of the documentation of each command's options.
# Inputs: CTFSCOPE (binary), COMMAND, OUT (file), VERSION.
execute_process(COMMAND ${CTFSCOPE} ${COMMAND} --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ctfscope ${COMMAND} --help failed (${rc})")
endif()
# The NAME line is the command's summary from the top-level help.
execute_process(COMMAND ${CTFSCOPE} --help OUTPUT_VARIABLE top)
string(REGEX MATCH "\n  ${COMMAND} +([^\n]*)" _ "${top}")
set(summary "${CMAKE_MATCH_1}")
if(summary STREQUAL "")
  message(FATAL_ERROR "ctfscope --help does not list '${COMMAND}'")
endif()
# roff: escape backslashes, and protect lines starting with '.' or '\''.
string(REPLACE "\\" "\\e" help "${help}")
string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" help "${help}")
string(REGEX MATCH "^Usage: [^\n]*" usage "${help}")
string(REGEX REPLACE "^Usage: [^\n]*\n\n?" "" body "${help}")
string(TOUPPER "ctfscope-${COMMAND}" title)
file(WRITE ${OUT} ".TH ${title} 1 \"\" \"ctfscope ${VERSION}\" \"User commands\"
.SH NAME
ctfscope-${COMMAND} \\- ${summary}
.SH SYNOPSIS
.nf
${usage}
.fi
.SH DESCRIPTION
.nf
${body}
.fi
.SH SEE ALSO
ctfscope(1), docs/user-guide.md
")
