/* SPDX-License-Identifier: MIT */
/* ctfscope-writer: the writer process of a lazy session (writer_process.c, "The lazy
 * writer"), exec'd by the traced program at its first sample. It takes the session over
 * from the program's shared mapping (its memfd, address and size in argv) and runs the
 * writer loop until the program stops the session or is gone. Not meant to be run by
 * hand: without the program's mapping it says so and exits with status 127. */
#include <stdio.h>

#include "tracer_internal.h"

int main(int argc, char **argv) {
  /* A traced program always passes three arguments; anything else is a person. */
  if (argc != 4) {
    fputs(
        "ctfscope-writer: the writer process of a program traced by ctfscope; the preload\n"
        "library starts it at the program's first sample (see docs/tracing.md, \"The lazy\n"
        "writer\"). It is not run by hand: use `ctfscope record -- PROGRAM`.\n",
        stderr);
    return 127;
  }
  return cts__writer_exec_main(argc, argv);
}
