/* SPDX-License-Identifier: MIT */
/* ctfscope serve: the report viewer over HTTP on this machine, for traces too large to
 * embed in one HTML file, and live for a program streaming its trace (src/report/serve.h
 * does the work). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../os/mprof_ring.h"
#include "../report/report.h"
#include "../report/serve.h"
#include "cli.h"
#include "cmd_net.h"
#include "load.h"
#include "report_input.h"

static const char help[] =
    "Usage: ctfscope serve [OPTIONS] TRACE...\n"
    "       ctfscope serve --listen [ADDR:]PORT [--trace-port [ADDR:]PORT] [OPTIONS]\n"
    "\n"
    "Show the report viewer (the page `ctfscope report` writes) from a small local web\n"
    "server instead of a file: the page loads its data from the server, so traces too large\n"
    "to embed stay fast to open. TRACE... are a memtrace trace, a task trace, one of each,\n"
    "or two task traces, a good and a bad run, compared as `report GOOD BAD` does.\n"
    "\n"
    "Without a TRACE, live mode: the server also waits for ONE program to stream its trace\n"
    "(memtrace or mirage-profile task trace, e.g. `ctfscope record --connect ADDR:PORT` or a\n"
    "tracer's TCP sink) to the trace port, and the page shows it while it runs, updating\n"
    "every second.\n"
    "\n"
    "Only this machine can connect unless ADDR says otherwise. The server answers GET / and\n"
    "GET /data.json only, and never reads a file named by a request.\n"
    "\n"
    "Options:\n"
    "  -l, --listen [ADDR:]PORT   address of the web server (default 127.0.0.1:0, a free\n"
    "                             port); the URL is printed on standard error\n"
    "      --trace-port [ADDR:]PORT  live mode: where the trace is received (default\n"
    "                             127.0.0.1:0, printed)\n"
    "      --title TEXT           the page's title\n"
    "      --task-offset NS       as in `ctfscope report`\n"
    "      --max-records N        as in `ctfscope report` (default 400000)\n"
    "      --top N                as in `ctfscope report` (default 50)\n"
    "      --max-clients N        web connections at once (default 64)\n"
    "      --request-timeout SECS a request must arrive within SECS (default 10)\n"
    "      --refresh SECS         live mode: how often the data is rebuilt (default 1)\n"
    "  -v, --verbose              log every request\n"
    "  -q, --quiet                do not print warnings about the traces\n"
    "  -h, --help                 show this help\n"
    "\n"
    "SIGINT (Ctrl-C) or SIGTERM stops the server.\n"
    "\n"
    "A corrupt TRACE is shown as far as it could be read (the error is printed).\n"
    "\n"
    "Exit status: 0 after a clean stop, 2 for a usage error, 3 when an address cannot be\n"
    "bound or a file cannot be read, 4 out of memory.\n";

typedef struct serve_opts {
  cts_serve_config_t cfg;
  const char *listen, *trace_port;
  cli_report_opts_t content;
} serve_opts_t;

static int on_option(void *ctx, int opt, const char *arg) {
  serve_opts_t *o = ctx;
  uint32_t ms;
  const int rc = cli_report_option(&o->content, opt, arg);
  if (rc != -2) return rc;
  switch (opt) {
    case 'l':
      o->listen = arg;
      break;
    case 'P':
      o->trace_port = arg;
      break;
    case 'v':
      o->cfg.verbose = true;
      break;
    case 'C':
      if (!cli_net_parse_count(arg, 10000u, &o->cfg.max_clients))
        return cli_usage_error("--max-clients takes a number from 1 to 10000, not '%s'", arg);
      break;
    case 'I':
      if (!cli_net_parse_seconds(arg, &ms) || ms == 0)
        return cli_usage_error("--request-timeout needs seconds above 0, not '%s'", arg);
      o->cfg.request_timeout_ms = ms;
      break;
    case 'F':
      if (!cli_net_parse_seconds(arg, &ms) || ms < 50)
        return cli_usage_error("--refresh needs at least 0.05 seconds, not '%s'", arg);
      o->cfg.refresh_ms = ms;
      break;
  }
  return -1;
}

static cts_serve_t *running;

static void on_signal(int sig) {
  (void)sig;
  if (running) cts_serve_stop(running);
}

/* Loads the traces and gives the server their document. Returns an exit code. A corrupt
 * trace is served as far as it was read, as `report` writes it; the error was printed. */
static int load_static(cts_serve_t *s, const serve_opts_t *o, char **paths, int npaths) {
  cli_report_input_t in;
  int code;
  if (!cli_report_load(&in, &o->content, paths, npaths, &code)) return code;
  const report_doc_t doc = cli_report_doc(&in, &o->content);
  const int rc = cts_serve_set_doc(s, &doc);
  cli_report_input_free(&in);
  if (rc) {
    cli_error("out of memory");
    return CLI_EXIT_INTERNAL;
  }
  return CLI_EXIT_OK;
}

int cmd_serve(int argc, char **argv) {
  static const struct option longopts[] = {
      {"listen", required_argument, NULL, 'l'},
      {"trace-port", required_argument, NULL, 'P'},
      CLI_REPORT_LONGOPTS,
      {"max-clients", required_argument, NULL, 'C'},
      {"request-timeout", required_argument, NULL, 'I'},
      {"refresh", required_argument, NULL, 'F'},
      {"verbose", no_argument, NULL, 'v'},
      CLI_LONGOPT_QUIET,
      {0},
  };
  serve_opts_t o = {0};
  cts_serve_config_init(&o.cfg);
  int first;
  const int rc = cli_parse(argc, argv, "l:vq", longopts, help, on_option, &o, &first);
  if (rc >= 0) return rc;
  const bool live = first >= argc;
  if (live && !o.listen)
    return cli_usage_error("give a TRACE to show, or --listen [ADDR:]PORT for live mode");
  if (!live && o.trace_port)
    return cli_usage_error("--trace-port is for live mode (no TRACE given)");
  char err[CTS_NET_ERR_LEN + 128];
  if (cts_net_parse_listen(o.listen ? o.listen : "127.0.0.1:0", &o.cfg.http_addr, err,
                           sizeof err) != 0)
    return cli_usage_error("--listen %s", err);
  if (live && cts_net_parse_listen(o.trace_port ? o.trace_port : "127.0.0.1:0", &o.cfg.trace_addr,
                                   err, sizeof err) != 0)
    return cli_usage_error("--trace-port %s", err);
  o.cfg.live = live;
  o.cfg.title = o.content.title;
  o.cfg.max_records = (unsigned)o.content.max_records;
  o.cfg.top = (unsigned)o.content.top;
  o.cfg.log = cli_log_line;
  cts_serve_t *s;
  if (cts_serve_create(&s, &o.cfg, err, sizeof err) != 0) {
    cli_error("%s", err);
    return CLI_EXIT_IO;
  }
  if (!live) {
    const int code = load_static(s, &o, argv + first, argc - first);
    if (code != CLI_EXIT_OK) {
      cts_serve_destroy(s);
      return code;
    }
  }
  running = s;
  cli_catch_stop_signals(on_signal);
  char addr[CTS_NET_ADDR_STRLEN];
  cli_note("serving http://%s/", cts_net_addr_format(cts_serve_http_address(s), addr, sizeof addr));
  if (live)
    cli_note("waiting for a trace on %s (one connection)",
             cts_net_addr_format(cts_serve_trace_address(s), addr, sizeof addr));
  fflush(stderr);
  const int run_err = cts_serve_run(s);
  running = NULL;
  cts_serve_destroy(s);
  cli_note("stopped");
  return run_err ? CLI_EXIT_IO : CLI_EXIT_OK;
}
