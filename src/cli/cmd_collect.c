/* SPDX-License-Identifier: MIT */
/* ctfscope collect: a TCP server that receives traces from many traced programs at once and
 * writes each one to its own file (src/collector/collector.h does the work). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../collector/collector.h"
#include "cli.h"
#include "cmd_net.h"

static const char help[] =
    "Usage: ctfscope collect --listen [ADDR:]PORT [--dir DIR] [OPTIONS]\n"
    "\n"
    "Receive traces over TCP from many traced programs at once (memtrace allocation traces\n"
    "and mirage-profile task traces, told apart by their first bytes), and write each one\n"
    "to its own file in DIR, named PROGRAM.PID.STARTTIME.PEER.ctf from the trace's own\n"
    "header. Each stream is checked as it arrives; when a connection ends, its file keeps\n"
    "everything up to the last complete packet that passed the checks of --validate. At the\n"
    "default level (packets) only the framing and packet headers are checked: a stream with\n"
    "corrupt events inside well-formed packets is saved as it came, and the readers reject\n"
    "it (exit 1). With --validate full every saved file reads back whole. One\n"
    "line per connection on standard error says how it ended and what was saved: bytes,\n"
    "allocations (or events, with --validate events or full) and packets.\n"
    "\n"
    "Options:\n"
    "  -l, --listen [ADDR:]PORT  address to listen on; without ADDR only 127.0.0.1 (this\n"
    "                            machine). 0.0.0.0:PORT or [::]:PORT accept from anywhere.\n"
    "                            Port 0 picks a free port (printed at start).\n"
    "  -d, --dir DIR             directory for the traces (default: the current one;\n"
    "                            created if missing)\n"
    "      --max-clients N       connections at once; more are refused (default 256)\n"
    "      --max-bytes SIZE      drop a trace that grows past SIZE bytes (k, M, G suffixes;\n"
    "                            default: no limit). Its file keeps the complete packets.\n"
    "      --idle-timeout SECS   drop a connection that sends nothing for SECS seconds\n"
    "                            (default 0: never; a program that allocates nothing sends\n"
    "                            nothing)\n"
    "      --packet-timeout SECS drop a connection whose packet (the trace header first)\n"
    "                            takes more than SECS seconds to arrive (default 10; 0: never)\n"
    "      --max-packet SIZE     largest packet accepted (default 1M)\n"
    "      --validate LEVEL      how deeply each stream is checked as it arrives: packets\n"
    "                            (every packet header and the framing: the default, keeps\n"
    "                            up with the network), events (every event decoded too),\n"
    "                            or full (events and their backtraces). The deeper levels\n"
    "                            catch corrupt events inside well-formed packets, and\n"
    "                            receive only as fast as the decoder runs.\n"
    "  -v, --verbose             also log when a connection opens\n"
    "  -h, --help                show this help\n"
    "\n"
    "SIGINT (Ctrl-C) or SIGTERM stops the collector: it reads what every connection had\n"
    "already sent and finishes every file before exiting.\n"
    "\n"
    "Exit status: 0 after a clean stop, 2 for a usage error, 3 when the address cannot be\n"
    "bound or the directory cannot be used.\n";

typedef struct collect_opts {
  cts_collector_config_t cfg;
  const char *listen, *dir;
  bool bad;
} collect_opts_t;

bool cli_net_parse_seconds(const char *s, uint32_t *ms) {
  char *end;
  errno = 0;
  const double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= 0) || v > 86400.0) return false;
  *ms = (uint32_t)llround(v * 1000.0);
  return true;
}

bool cli_net_parse_size(const char *s, uint64_t *bytes) {
  char *end;
  errno = 0;
  if (*s < '0' || *s > '9') return false;
  const unsigned long long v = strtoull(s, &end, 10);
  if (errno) return false;
  unsigned shift = 0;
  if (*end) {
    switch (*end) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      case 't':
      case 'T':
        shift = 40;
        break;
      default:
        return false;
    }
    if (end[1] && strcmp(end + 1, "B") != 0 && strcmp(end + 1, "iB") != 0) return false;
  }
  if (shift && v > (UINT64_MAX >> shift)) return false;
  *bytes = (uint64_t)v << shift;
  return true;
}

bool cli_net_parse_count(const char *s, unsigned max, unsigned *out) {
  char *end;
  errno = 0;
  if (*s < '0' || *s > '9') return false;
  const unsigned long v = strtoul(s, &end, 10);
  if (errno || *end || v == 0 || v > max) return false;
  *out = (unsigned)v;
  return true;
}

static int on_option(void *ctx, int opt, const char *arg) {
  collect_opts_t *o = ctx;
  uint64_t size;
  switch (opt) {
    case 'l':
      o->listen = arg;
      break;
    case 'd':
      o->dir = arg;
      break;
    case 'C':
      if (!cli_net_parse_count(arg, 100000, &o->cfg.max_clients))
        return cli_usage_error("--max-clients needs a count from 1 to 100000, not '%s'", arg);
      break;
    case 'B':
      if (!cli_net_parse_size(arg, &o->cfg.max_bytes) || o->cfg.max_bytes == 0)
        return cli_usage_error("--max-bytes needs a size such as 100M, not '%s'", arg);
      break;
    case 'I':
      if (!cli_net_parse_seconds(arg, &o->cfg.idle_timeout_ms))
        return cli_usage_error("--idle-timeout needs seconds, not '%s'", arg);
      break;
    case 'T':
      if (!cli_net_parse_seconds(arg, &o->cfg.packet_timeout_ms))
        return cli_usage_error("--packet-timeout needs seconds, not '%s'", arg);
      break;
    case 'P':
      if (!cli_net_parse_size(arg, &size) || size < 128 || size > (1u << 30))
        return cli_usage_error("--max-packet needs a size from 128 to 1G, not '%s'", arg);
      o->cfg.max_packet_size = (uint32_t)size;
      break;
    case 'V':
      if (!cts_sink_validate_parse(arg, &o->cfg.validate))
        return cli_usage_error("--validate takes packets, events or full, not '%s'", arg);
      break;
    case 'v':
      o->cfg.log_connects = true;
      break;
  }
  return -1;
}

static cts_collector_t *running;

static void on_signal(int sig) {
  (void)sig;
  if (running) cts_collector_stop(running);
}

int cmd_collect(int argc, char **argv) {
  static const struct option longopts[] = {
      {"listen", required_argument, NULL, 'l'},
      {"dir", required_argument, NULL, 'd'},
      {"max-clients", required_argument, NULL, 'C'},
      {"max-bytes", required_argument, NULL, 'B'},
      {"idle-timeout", required_argument, NULL, 'I'},
      {"packet-timeout", required_argument, NULL, 'T'},
      {"max-packet", required_argument, NULL, 'P'},
      {"validate", required_argument, NULL, 'V'},
      {"verbose", no_argument, NULL, 'v'},
      {0},
  };
  collect_opts_t o = {.dir = "."};
  cts_collector_config_init(&o.cfg);
  int first;
  const int rc = cli_parse(argc, argv, "l:d:v", longopts, help, on_option, &o, &first);
  if (rc >= 0) return rc;
  if (first < argc) return cli_usage_error("unexpected argument '%s'", argv[first]);
  if (!o.listen) return cli_usage_error("--listen [ADDR:]PORT is required");
  char err[CTS_NET_ERR_LEN + 64];
  if (cts_net_parse_listen(o.listen, &o.cfg.listen_addr, err, sizeof err) != 0)
    return cli_usage_error("--listen %s", err);
  if (mkdir(o.dir, 0755) != 0 && errno != EEXIST) {
    cli_error("cannot create the directory '%s': %s", o.dir, strerror(errno));
    return CLI_EXIT_IO;
  }
  o.cfg.dir = o.dir;
  o.cfg.log = cli_log_line;
  cts_collector_t *c;
  if (cts_collector_create(&c, &o.cfg, err, sizeof err) != 0) {
    cli_error("%s", err);
    return CLI_EXIT_IO;
  }
  running = c;
  cli_catch_stop_signals(on_signal);
  char addr[CTS_NET_ADDR_STRLEN];
  cli_note("listening on %s, writing traces to %s",
           cts_net_addr_format(cts_collector_address(c), addr, sizeof addr), o.dir);
  const int run_err = cts_collector_run(c);
  cts_collector_stats_t st;
  cts_collector_get_stats(c, &st);
  running = NULL;
  cts_collector_destroy(c);
  char events[48] = "";
  if (o.cfg.validate != CTS_SINK_VALIDATE_PACKETS)
    snprintf(events, sizeof events, ", %llu events", (unsigned long long)st.events);
  cli_note(
      "stopped: %llu connections, %llu traces saved, %llu dropped, %llu refused, %llu bytes, "
      "%llu allocations%s",
      (unsigned long long)st.accepted, (unsigned long long)st.saved, (unsigned long long)st.dropped,
      (unsigned long long)st.refused, (unsigned long long)st.bytes,
      (unsigned long long)st.allocations, events);
  return run_err ? CLI_EXIT_IO : CLI_EXIT_OK;
}
