/* SPDX-License-Identifier: MIT */
/* Writes a memtrace trace the way a unikernel or firmware would: the writer lives in a
 * static buffer, time comes from an injected clock, bytes leave through an injected write
 * function, and nothing is allocated. The simulated program is a small network service
 * whose request buffers are freed but whose connection records leak.
 *
 *   write_trace OUT.ctf     then: ctfscope info OUT.ctf; ctfscope dump OUT.ctf
 *
 * The trace is readable by memtrace's own tools (memtrace_viewer, memtrace_hotspots). */
#include <ctfscope/memtrace.h>

#include <stdio.h>
#include <string.h>

/* Where the "program" allocates: location codes (return addresses in a real tracer) and
 * what they mean. */
enum { MAIN = 1, SERVE, ACCEPT, READ_REQUEST, NEW_CONN, PARSE, NCODES };
static const cts_mt_location_t sites[NCODES] = {
    [MAIN] = {12, 0, 0, "service.c", "main"},
    [SERVE] = {40, 2, 30, "service.c", "serve_forever"},
    [ACCEPT] = {58, 4, 22, "service.c", "accept_one"},
    [READ_REQUEST] = {77, 8, 40, "request.c", "read_request"},
    [NEW_CONN] = {91, 8, 36, "conn.c", "conn_new"},
    [PARSE] = {120, 4, 28, "request.c", "parse_headers"},
};

/* Codes must be non-zero and stable; a real tracer uses return addresses. */
#define CODE(site) (0x400000u + (uint64_t)(site)*0x40u)

static size_t resolve(void *user_data, uint64_t code, cts_mt_location_t *out, size_t max) {
  (void)user_data;
  const uint64_t site = (code - 0x400000u) / 0x40u;
  if (site == 0 || site >= NCODES || max < 1) return 0;
  out[0] = sites[site];
  return 1;
}

/* A deterministic clock: 37 µs per call, from a fixed start (2026-01-01 00:00:00 UTC). */
static uint64_t fake_clock(void *user_data) {
  uint64_t *now = user_data;
  return *now += 37;
}

static int write_file(void *user_data, const void *buf, size_t len) {
  return fwrite(buf, 1, len, user_data) == len ? 0 : CTS_E_IO;
}

/* ~450 KiB writer state + 256 remembered frames, 8-byte aligned, no malloc. */
static uint64_t writer_memory[(CTS_MT_WRITER_MIN_SIZE + 256 * 10) / 8];

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.ctf\n", argv[0]);
    return 2;
  }
  FILE *out = fopen(argv[1], "wb");
  if (!out) {
    perror(argv[1]);
    return 1;
  }
  uint64_t now = 1767225600000000u;
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.sample_rate = 1.0; /* every word: exact figures for a small demo */
  cfg.executable_name = "/demo/service";
  cfg.host_name = "unikernel";
  cfg.runtime_params = "";
  cfg.context = "ctfscope example: leaking connection records";
  cfg.pid = 1;
  cfg.max_backtrace_frames = 256;
  cfg.write = write_file;
  cfg.write_user_data = out;
  cfg.clock = fake_clock;
  cfg.clock_user_data = &now;
  cfg.resolve = resolve;
  cts_mt_writer_t *w;
  int err = cts_mt_writer_init(&w, writer_memory, sizeof writer_memory, &cfg);
  const uint64_t accept_bt[] = {CODE(MAIN), CODE(SERVE), CODE(ACCEPT), CODE(NEW_CONN)};
  const uint64_t request_bt[] = {CODE(MAIN), CODE(SERVE), CODE(READ_REQUEST)};
  const uint64_t parse_bt[] = {CODE(MAIN), CODE(SERVE), CODE(READ_REQUEST), CODE(PARSE)};
  for (int conn = 0; !err && conn < 200; conn++) {
    uint64_t conn_id, req_id, hdr_id;
    /* 64-byte connection record: never freed (the leak). */
    err = cts_mt_writer_alloc(w, CTS_TIME_NOW, 8, 9, CTS_MT_SOURCE_MAJOR, accept_bt, 4, &conn_id);
    for (int req = 0; !err && req < 5; req++) {
      /* 4 KiB request buffer and a 256-byte header table, both freed after the request. */
      err = cts_mt_writer_alloc(w, CTS_TIME_NOW, 512, 513, CTS_MT_SOURCE_MAJOR, request_bt, 3,
                                &req_id);
      if (!err)
        err =
            cts_mt_writer_alloc(w, CTS_TIME_NOW, 32, 33, CTS_MT_SOURCE_MAJOR, parse_bt, 4, &hdr_id);
      if (!err) err = cts_mt_writer_collect(w, CTS_TIME_NOW, hdr_id);
      if (!err) err = cts_mt_writer_collect(w, CTS_TIME_NOW, req_id);
    }
  }
  if (!err) err = cts_mt_writer_close(w);
  if (fclose(out) != 0 && !err) err = CTS_E_IO;
  if (err) {
    fprintf(stderr, "write_trace: %s\n", cts_strerror(err));
    return 1;
  }
  printf("wrote %s: 2200 allocations, 2000 frees, 200 connection records leaked\n", argv[1]);
  return 0;
}
