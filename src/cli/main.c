/* SPDX-License-Identifier: MIT */
/* ctfscope: one binary, git-style subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd_net.h"

static const cli_command_t commands[] = {
    {"dump", "print every event of a trace, one line each", cmd_dump},
    {"info", "show a trace's header and summary figures", cmd_info},
    {"record", "run a program with allocation tracing (LD_PRELOAD)", cmd_record},
    {"top", "allocation sites by bytes, count, live at peak and at end", cmd_top},
    {"leaks", "blocks live at the end by site, with their growth and backtraces", cmd_leaks},
    {"stats", "allocation rates, size and lifetime histograms with percentiles", cmd_stats},
    {"export", "write folded stacks, pprof, Chrome trace JSON or CSV", cmd_export},
    {"diff", "allocation sites that changed between two traces", cmd_diff},
    {"subsample", "write a smaller trace keeping 1 sample in N", cmd_subsample},
    {"filter", "write a trace of the allocations made in a time window", cmd_filter},
    {"collect", "receive traces over TCP from many programs, one file each", cmd_collect},
    {"fetch", "save the trace a program serves over TCP (service mode)", cmd_fetch},
    {"convert", "turn a mirage-profile task trace into a CTF directory (babeltrace2)", cmd_convert},
    {"symbolize", "name a trace's addresses from ELF files (function, file, line)", cmd_symbolize},
    {"report", "write a self-contained HTML report of memory and task traces", cmd_report},
    {"serve", "serve the report viewer over HTTP, live while a program runs", cmd_serve},
};

static void print_usage(FILE *f) {
  fputs(
      "Usage: ctfscope [--version] [--help] COMMAND [ARGS...]\n"
      "\n"
      "Shows where a program's memory goes, from memtrace-format allocation traces, and\n"
      "what its threads and tasks do, from mirage-profile task traces (record --tasks,\n"
      "libctfscope's task API): dump, info, top, leaks, stats, export, diff, convert and\n"
      "report read them too, and report MEMORY_TRACE TASK_TRACE shows both together.\n"
      "\n"
      "Commands:\n",
      f);
  for (size_t i = 0; i < CTS_ARRAY_SIZE(commands); i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fputs(
      "  help       show the help of a command: ctfscope help COMMAND\n"
      "  version    print the version\n"
      "\n"
      "Run 'ctfscope COMMAND --help' for a command's options. Exit codes: 0 success,\n"
      "1 invalid trace data, 2 usage error, 3 input/output error, 4 internal error.\n",
      f);
}

static const cli_command_t *find_command(const char *name) {
  for (size_t i = 0; i < CTS_ARRAY_SIZE(commands); i++)
    if (strcmp(commands[i].name, name) == 0) return &commands[i];
  return NULL;
}

/* The closest command name, for "did you mean" (edit distance ≤ 2). */
static const char *suggest(const char *name) {
  const char *best = NULL;
  size_t best_d = 3;
  for (size_t c = 0; c < CTS_ARRAY_SIZE(commands); c++) {
    const char *t = commands[c].name;
    const size_t n = strlen(name), m = strlen(t);
    if (n > 32 || m > 32) continue;
    size_t d[33][33];
    for (size_t i = 0; i <= n; i++) d[i][0] = i;
    for (size_t j = 0; j <= m; j++) d[0][j] = j;
    for (size_t i = 1; i <= n; i++)
      for (size_t j = 1; j <= m; j++) {
        size_t v = d[i - 1][j - 1] + (name[i - 1] != t[j - 1]);
        if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
        if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
        d[i][j] = v;
      }
    if (d[n][m] < best_d) best_d = d[n][m], best = t;
  }
  return best;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    print_usage(stderr);
    return CLI_EXIT_USAGE;
  }
  const char *name = argv[1];
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
    print_usage(stdout);
    return CLI_EXIT_OK;
  }
  if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
    printf("ctfscope %s\n", CTS_VERSION_STRING);
    return CLI_EXIT_OK;
  }
  if (strcmp(name, "help") == 0) {
    if (argc < 3) {
      print_usage(stdout);
      return CLI_EXIT_OK;
    }
    const cli_command_t *c = find_command(argv[2]);
    if (!c) {
      fprintf(stderr, "ctfscope: '%s' is not a ctfscope command. See 'ctfscope --help'.\n",
              argv[2]);
      return CLI_EXIT_USAGE;
    }
    cli_set_command(c->name);
    char *help_argv[] = {argv[2], "--help", NULL};
    return c->run(2, help_argv);
  }
  const cli_command_t *c = find_command(name);
  if (!c) {
    const char *s = name[0] != '-' ? suggest(name) : NULL;
    fprintf(stderr, "ctfscope: '%s' is not a ctfscope command. See 'ctfscope --help'.\n", name);
    if (s) fprintf(stderr, "\nThe most similar command is\n\t%s\n", s);
    return CLI_EXIT_USAGE;
  }
  cli_set_command(c->name);
  return c->run(argc - 1, argv + 1);
}
