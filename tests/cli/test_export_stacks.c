/* SPDX-License-Identifier: MIT */
/* `export -f folded` (every --value), `export -f pprof` and `report` write the bytes they
 * wrote before they were made faster (issue 20: folded lines by a reused path, pprof's buffer
 * and location look-ups, its compression level, the report's look-ahead over the blocks
 * never collected): each output's size and FNV-1a hash (pprof:
 * of the inflated profile, the compressed bytes depending on the level; report: of the
 * page with each deflated column inflated and deflated again by zlib at level 6, as the
 * report wrote it with zlib, so that another deflater gives the same figures) against
 * golden/export_stacks.txt, taken from main's build before those changes. Inputs: generated
 * tries of thousands of stacks whose frame codes share names (so that folded merges nodes
 * and a line's frames come from several codes), at two sample rates, with a --drop-frames
 * variant; and the corpus's memtrace traces when the corpus is there.
 * Regenerate after an intended change: CTS_UPDATE_GOLDEN=1 build/dev/tests/cli/test_export_stacks
 * (CTS_EXPORT_STACKS_CTFSCOPE=PATH runs another build's ctfscope, to take the golden from it). */
#define _GNU_SOURCE /* memmem() */
#include <dirent.h>
#include <zlib.h>

#include "../../src/common/compiler.h"
#include "../../src/common/hash.h"
#include "../mt_file_writer.h"
#include "../run_cmd.h"
#include "../test.h"
#include "scratch_dir.h"

enum { TIMEOUT_S = 60 };

static const char *in_dir(const char *name, char *buf, size_t size) {
  return scratch_file("cts-export-stacks", name, buf, size);
}

/* Codes 1..40 are allocation points, 100.. the frames above them; names repeat every 23
 * codes (a few with ';' to check folded's escaping), so merged nodes abound. */
static size_t resolve(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  static char names[128][32];
  static const char *const files[] = {"a.ml", "b.ml", "c.ml"};
  (void)ud;
  if (!max) return 1;
  char *name = names[code % 128];
  if (code % 23 == 5)
    snprintf(name, sizeof names[0], "Mod;fn_%llu", (unsigned long long)(code % 23));
  else
    snprintf(name, sizeof names[0], "fn_%llu", (unsigned long long)(code % 23));
  out[0] = (cts_mt_location_t){.line = (uint32_t)(code % 7),
                               .start_char = 1,
                               .end_char = 9,
                               .filename = files[code % 3],
                               .defname = name};
  return 1;
}

/* n allocations over stacks of 1-24 frames, each frame one of a few codes for its depth;
 * about a third collected a few allocations later. */
static int make_trace(const char *path, uint64_t n, double rate, uint64_t seed) {
  mt_file_writer_t fw;
  int e = mt_file_writer_open(&fw, path, rate, resolve);
  if (e) return e;
  uint64_t bt[32], rng = seed, pending[16] = {0};
  for (uint64_t i = 0; !e && i < n; i++) {
    const uint64_t x = cts_splitmix64(&rng);
    const size_t depth = 1 + x % 24;
    for (size_t k = 0; k + 1 < depth; k++)
      bt[k] = 100 + k * 8 + (cts_splitmix64(&rng) >> 60) % (k < 3 ? 2 : 5);
    bt[depth - 1] = 1 + (x >> 8) % 40;
    uint64_t id;
    const uint64_t t = MT_FILE_WRITER_START_US + i * 10;
    e = cts_mt_writer_alloc(fw.w, t, 1 + (x >> 20) % 300, 1 + (x >> 32) % 3,
                            (cts_mt_source_t)((x >> 30) % 3), bt, depth, &id);
    if (e || (x >> 40) % 3) continue;
    const size_t slot = (x >> 48) % 16;
    if (pending[slot]) e = cts_mt_writer_collect(fw.w, t + 5, pending[slot] - 1);
    pending[slot] = id + 1;
  }
  return mt_file_writer_close(&fw, e);
}

/* FNV-1a over bytes. */
static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* The hash and size of the file, inflated first with gz (gzip's trailer checked). */
static bool file_hash(const char *path, bool gz, uint64_t *h, uint64_t *size) {
  *h = 0xcbf29ce484222325ull;
  *size = 0;
  unsigned char buf[65536];
  if (gz) {
    gzFile f = gzopen(path, "rb");
    if (!f) return false;
    int n;
    while ((n = gzread(f, buf, sizeof buf)) > 0) {
      *h = fnv(*h, buf, (size_t)n);
      *size += (uint64_t)n;
    }
    int err = Z_OK;
    gzerror(f, &err);
    const bool ok = n == 0 && err == Z_OK && gzdirect(f) == 0;
    gzclose(f);
    return ok;
  }
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
    *h = fnv(*h, buf, n);
    *size += n;
  }
  fclose(f);
  return true;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Appends n bytes to the buffer *p of *len bytes (capacity *cap); false without memory. */
static bool put(unsigned char **p, size_t *len, size_t *cap, const void *src, size_t n) {
  if (*len + n > *cap) {
    size_t c = *cap ? *cap : 4096;
    while (c < *len + n) c *= 2;
    unsigned char *q = realloc(*p, c);
    if (!q) return false;
    *p = q;
    *cap = c;
  }
  memcpy(*p + *len, src, n);
  *len += n;
  return true;
}

/* base64 text s[0..n) (padded) decoded into a new buffer; NULL if it is not base64. */
static unsigned char *unbase64(const char *s, size_t n, size_t *out_n) {
  if (n % 4) return NULL;
  unsigned char *out = malloc(n / 4 * 3 + 1);
  size_t k = 0;
  for (size_t i = 0; out && i < n; i += 4) {
    uint32_t v = 0;
    unsigned pad = 0;
    for (unsigned j = 0; j < 4; j++) {
      const char *at = s[i + j] == '=' ? NULL : strchr(b64, s[i + j]);
      if (s[i + j] == '=')
        pad++;
      else if (!at || !s[i + j] || pad)
        return free(out), NULL;
      v = v << 6 | (uint32_t)(at ? at - b64 : 0);
    }
    out[k++] = (unsigned char)(v >> 16);
    if (pad < 2) out[k++] = (unsigned char)(v >> 8);
    if (pad < 1) out[k++] = (unsigned char)v;
  }
  *out_n = k;
  return out;
}

/* The zlib stream z[0..n) inflated into *p (appended); false if it is not one. */
static bool inflate_into(const unsigned char *z, size_t n, unsigned char **p, size_t *len,
                         size_t *cap) {
  z_stream st = {.next_in = (unsigned char *)z, .avail_in = (uInt)n};
  if (inflateInit(&st) != Z_OK) return false;
  unsigned char buf[65536];
  int rc;
  do {
    st.next_out = buf;
    st.avail_out = sizeof buf;
    rc = inflate(&st, Z_NO_FLUSH);
    if ((rc != Z_OK && rc != Z_STREAM_END) || !put(p, len, cap, buf, sizeof buf - st.avail_out))
      rc = Z_DATA_ERROR;
  } while (rc == Z_OK);
  inflateEnd(&st);
  return rc == Z_STREAM_END && st.avail_in == 0;
}

/* The report's page in[0..n) with each column ("z":"…" or "zs":"…", base64 of a zlib stream)
 * inflated, deflated again by compress2 at level 6 and written in base64 as the report did
 * with zlib; false if a column is not such a stream or without memory. */
static bool page_as_zlib(const unsigned char *in, size_t n, unsigned char **out, size_t *out_n) {
  size_t len = 0, cap = 0, at = 0;
  *out = NULL;
  bool ok = true;
  while (ok) {
    const char *keys[] = {"\"z\":\"", "\"zs\":\""};
    const char *next = NULL;
    size_t key_len = 0;
    for (size_t k = 0; k < 2; k++) {
      const char *f = memmem(in + at, n - at, keys[k], strlen(keys[k]));
      if (f && (!next || f < next)) next = f, key_len = strlen(keys[k]);
    }
    if (!next) break;
    const size_t start = (size_t)(next - (const char *)in) + key_len;
    const char *end = memchr(in + start, '"', n - start);
    size_t zn = 0, raw_len = 0, raw_cap = 0;
    unsigned char *z =
        end ? unbase64((const char *)in + start, (size_t)(end - (const char *)in) - start, &zn)
            : NULL;
    unsigned char *raw = NULL;
    ok = z && inflate_into(z, zn, &raw, &raw_len, &raw_cap);
    uLongf dn = compressBound((uLong)raw_len);
    unsigned char *d = ok ? malloc(dn) : NULL;
    ok = ok && d &&
         compress2(d, &dn, raw ? raw : (const unsigned char *)"", (uLong)raw_len, 6) == Z_OK;
    ok = ok && put(out, &len, &cap, in + at, start - at);
    for (size_t i = 0; ok && i < dn; i += 3) {
      const uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < dn ? (uint32_t)d[i + 1] << 8 : 0) |
                         (i + 2 < dn ? d[i + 2] : 0);
      const char q[4] = {b64[v >> 18], b64[v >> 12 & 63], i + 1 < dn ? b64[v >> 6 & 63] : '=',
                         i + 2 < dn ? b64[v & 63] : '='};
      ok = put(out, &len, &cap, q, 4);
    }
    free(z);
    free(raw);
    free(d);
    at = ok ? (size_t)(end - (const char *)in) : at;
  }
  ok = ok && put(out, &len, &cap, in + at, n - at);
  *out_n = len;
  return ok;
}

/* The hash and size of the report's page at path as page_as_zlib gives it. */
static bool page_hash(const char *path, uint64_t *h, uint64_t *size) {
  *h = 0xcbf29ce484222325ull;
  *size = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  unsigned char *in = NULL, buf[65536];
  size_t len = 0, cap = 0, n;
  bool ok = true;
  while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) ok = put(&in, &len, &cap, buf, n);
  fclose(f);
  unsigned char *page = NULL;
  size_t page_n = 0;
  ok = ok && page_as_zlib(in, len, &page, &page_n);
  if (ok) {
    *h = fnv(*h, page, page_n);
    *size = page_n;
  }
  free(in);
  free(page);
  return ok;
}

static char got[1 << 16];
static size_t got_len;

static const char *ctfscope(void) {
  const char *other = getenv("CTS_EXPORT_STACKS_CTFSCOPE");
  return other && other[0] ? other : CTS_TEST_CTFSCOPE;
}

/* Runs ctfscope ARGS... -q -o OUT TRACE and records "name exit size hash". */
static void run_case(const char *name, const char *trace, bool gz, const char *const *args) {
  char out[256];
  in_dir(gz ? "out.pb.gz" : "out", out, sizeof out);
  remove(out);
  char *argv[20] = {(char *)ctfscope()};
  size_t n = 1;
  for (size_t k = 0; args[k] && n < 15; k++) argv[n++] = (char *)args[k];
  argv[n++] = "-q";
  argv[n++] = "-o";
  argv[n++] = out;
  argv[n++] = (char *)trace;
  argv[n] = NULL;
  run_result_t r;
  if (!run_cmd(argv, NULL, TIMEOUT_S, &r)) abort();
  uint64_t h = 0, size = 0;
  const bool read =
      strcmp(args[0], "report") == 0 ? page_hash(out, &h, &size) : file_hash(out, gz, &h, &size);
  got_len += (size_t)snprintf(got + got_len, sizeof got - got_len, "%s %d %llu %016llx%s\n", name,
                              r.signal ? 128 + r.signal : r.exit_code, (unsigned long long)size,
                              (unsigned long long)h, read ? "" : " unreadable");
  run_result_free(&r);
}

static void trace_cases(const char *label, const char *trace) {
  static const char *const values[] = {"bytes", "count", "samples", "live", "peak"};
  char name[160];
  for (size_t v = 0; v < CTS_ARRAY_SIZE(values); v++) {
    snprintf(name, sizeof name, "%s:folded-%s", label, values[v]);
    run_case(name, trace, false,
             (const char *const[]){"export", "-f", "folded", "--value", values[v], NULL});
  }
  snprintf(name, sizeof name, "%s:folded-drop", label);
  run_case(name, trace, false,
           (const char *const[]){"export", "-f", "folded", "--drop-frames", "^fn_1[0-4]$", NULL});
  snprintf(name, sizeof name, "%s:pprof", label);
  run_case(name, trace, true, (const char *const[]){"export", "-f", "pprof", NULL});
  snprintf(name, sizeof name, "%s:pprof-drop", label);
  run_case(name, trace, true,
           (const char *const[]){"export", "-f", "pprof", "--drop-frames", "^fn_1[0-4]$", NULL});
  /* The report: its blocks never collected are finished with look-ahead (report_mem.c); a
   * small budget coarsens the records while they are (a fixed title: not the path). */
  snprintf(name, sizeof name, "%s:report", label);
  run_case(name, trace, false, (const char *const[]){"report", "--title", "t", NULL});
  snprintf(name, sizeof name, "%s:report-1000", label);
  run_case(name, trace, false,
           (const char *const[]){"report", "--title", "t", "--max-records", "1000", NULL});
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* got against the golden file; without the corpus, against its lines of the generated
 * traces (they come first). */
static bool compare_with(const char *golden, bool corpus) {
  const char *update = getenv("CTS_UPDATE_GOLDEN");
  if (update && strcmp(update, "1") == 0 && corpus) {
    FILE *f = fopen(golden, "w");
    if (!f || fwrite(got, 1, got_len, f) != got_len) return false;
    fclose(f);
    fprintf(stderr, "  wrote %s\n", golden);
    return true;
  }
  static char want[1 << 16];
  FILE *f = fopen(golden, "r");
  if (!f) {
    fprintf(stderr, "  %s: missing (CTS_UPDATE_GOLDEN=1 writes it)\n", golden);
    return false;
  }
  const size_t n = fread(want, 1, sizeof want - 1, f);
  fclose(f);
  want[n] = '\0';
  if ((corpus ? n == got_len : n >= got_len) && memcmp(want, got, got_len) == 0) return true;
  fprintf(stderr, "  differs from %s; got:\n%s", golden, got);
  return false;
}

CTS_TEST(folded_pprof_and_report_write_the_bytes_they_wrote) {
  got_len = 0;
  static const struct {
    const char *name;
    uint64_t n;
    double rate;
    uint64_t seed;
  } gen[] = {{"gen-rate1.ctf", 6000, 1.0, 7}, {"gen-sampled.ctf", 20000, 0.01, 11}};
  for (size_t i = 0; i < CTS_ARRAY_SIZE(gen); i++) {
    char path[256];
    in_dir(gen[i].name, path, sizeof path);
    CTS_ASSERT_EQ_INT(make_trace(path, gen[i].n, gen[i].rate, gen[i].seed), 0);
    trace_cases(gen[i].name, path);
  }
  const char *corpus = cts_test_corpus_dir();
  if (corpus) {
    char mdir[512];
    snprintf(mdir, sizeof mdir, "%s/memtrace/traces", corpus);
    DIR *d = opendir(mdir);
    char *names[64];
    size_t nn = 0;
    for (struct dirent *e; d && (e = readdir(d)) && nn < 64;) {
      const size_t len = strlen(e->d_name);
      if (len > 4 && strcmp(e->d_name + len - 4, ".ctf") == 0) names[nn++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, nn, sizeof *names, cmp_names);
    for (size_t i = 0; i < nn; i++) {
      char t[700];
      snprintf(t, sizeof t, "%s/%s", mdir, names[i]);
      trace_cases(names[i], t);
      free(names[i]);
    }
  }
  CTS_ASSERT(compare_with(CTS_GOLDEN_FILE, corpus != NULL));
}

CTS_TEST(pprof_is_compressed_at_the_fastest_level) {
  /* The level was chosen by measurement (src/cli/cmd_export.c, gz_begin): gzip's header
   * says which it was (XFL 4: the fastest), so a change back is seen here. */
  char trace[256], out[256];
  in_dir("level.ctf", trace, sizeof trace);
  in_dir("level.pb.gz", out, sizeof out);
  CTS_ASSERT_EQ_INT(make_trace(trace, 2000, 1.0, 3), 0);
  char *argv[] = {(char *)CTS_TEST_CTFSCOPE, "export", "-q", "-f", "pprof", "-o", out, trace, NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(argv, NULL, TIMEOUT_S, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 0);
  run_result_free(&r);
  FILE *f = fopen(out, "rb");
  CTS_ASSERT(f);
  unsigned char head[10];
  CTS_ASSERT(fread(head, 1, sizeof head, f) == sizeof head);
  fclose(f);
  CTS_ASSERT(head[0] == 0x1f && head[1] == 0x8b && head[2] == 8);
  CTS_ASSERT_EQ_INT(head[8], 4);
}

CTS_TEST_MAIN()
