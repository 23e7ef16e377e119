/* SPDX-License-Identifier: MIT */
/* Runs a command that prints JSON (run_cmd.h) and parses what it printed (json_flat.h). */
#ifndef CTS_RUN_JSON_H
#define CTS_RUN_JSON_H

#include "json_flat.h"
#include "run_cmd.h"

/* True when the command exits 0 (and, with silent, prints nothing on stderr) and its
 * output parses; says why on stderr otherwise. */
static inline bool run_json_checked(char *const argv[], json_flat_t *j, run_result_t *r,
                                    bool silent) {
  if (!run_cmd(argv, NULL, 60, r)) return false;
  if (r->exit_code != 0 || (silent && r->err_len)) {
    fprintf(stderr, "  exit %d: %s\n", r->exit_code, r->err);
    return false;
  }
  if (!json_flat_parse(j, r->out, r->out_len)) {
    fprintf(stderr, "  JSON does not parse: %s\n", j->error);
    return false;
  }
  return true;
}

/* Warnings on stderr allowed. */
static inline bool run_json(char *const argv[], json_flat_t *j, run_result_t *r) {
  return run_json_checked(argv, j, r, false);
}

/* Nothing on stderr either. */
static inline bool run_json_silent(char *const argv[], json_flat_t *j, run_result_t *r) {
  return run_json_checked(argv, j, r, true);
}

#endif /* CTS_RUN_JSON_H */
