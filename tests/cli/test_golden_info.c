/* SPDX-License-Identifier: MIT */
/* Acceptance: `ctfscope info --json --packets FILE` reports, for every trace of the golden
 * corpus, the same values as memtrace's own reader for every key of the golden
 * .summary.txt (counts, samples, lengths, estimated bytes, backtrace figures, packets and
 * the packet list). The text output is checked for the headline figures too. */
#include <ctype.h>

#include "../json_flat.h"
#include "../run_cmd.h"
#include "../test.h"
#include "corpus_files.h"

static char *trim(char *s) {
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = '\0';
  return s;
}

/* Compares one golden "key value" line with the flattened JSON; prints and returns false on a
 * mismatch. */
static bool check_key(const char *trace, const json_flat_t *j, const char *key, char *value) {
  const char *ours_path = key;
  char want[4096];
  snprintf(want, sizeof want, "%s", value);
  if (strcmp(key, "file") == 0) {
    const json_pair_t *p = json_flat_get(j, "file");
    const char *base = p ? strrchr(p->value, '/') : NULL;
    if (p && strcmp(base ? base + 1 : p->value, value) == 0) return true;
    fprintf(stderr, "  %s: file: ours %s, golden %s\n", trace, p ? p->value : "(none)", value);
    return false;
  }
  if (strcmp(key, "info.sample_rate") == 0) {
    char *space = strchr(want, ' '); /* "0.01 (0x1.47ae147ae147bp-7)" */
    if (space) *space = '\0';
  } else if (strcmp(key, "info.context") == 0) {
    if (strcmp(want, "<none>") == 0) {
      snprintf(want, sizeof want, "null");
    } else if (want[0] == '"') {
      memmove(want, want + 1, strlen(want));
      want[strlen(want) - 1] = '\0';
    }
  } else if (strcmp(key, "reader_result") == 0) {
    const json_pair_t *p = json_flat_get(j, key);
    const bool ours_ok = p && strcmp(p->value, "ok") == 0;
    if (ours_ok == (strcmp(value, "ok") == 0)) return true;
    fprintf(stderr, "  %s: reader_result: ours %s, golden %s\n", trace, p ? p->value : "(none)",
            value);
    return false;
  }
  const json_pair_t *p = json_flat_get(j, ours_path);
  if (p && strcmp(p->value, want) == 0) return true;
  fprintf(stderr, "  %s: %s: ours '%s', golden '%s'\n", trace, key, p ? p->value : "(missing)",
          want);
  return false;
}

/* golden: "packet <offset> <size> <kind> <version> <pid> <domain> <t_begin> <t_end>
 * <alloc_begin> <alloc_end> <verify_ix> <verify_pred> <verify_val>" */
static bool check_packet(const char *trace, const json_flat_t *j, size_t index, char *line) {
  static const char *const fields[] = {
      "offset",    "size",          "kind",        "version",        "pid",
      "domain",    "time_begin_us", "time_end_us", "alloc_id_begin", "alloc_id_end",
      "verify_ix", "verify_pred",   "verify_val"};
  char *save = NULL, *tok = strtok_r(line + strlen("packet "), " ", &save);
  for (size_t f = 0; f < 13; f++, tok = strtok_r(NULL, " ", &save)) {
    char path[128];
    snprintf(path, sizeof path, "packet_list[%zu].%s", index, fields[f]);
    const json_pair_t *p = json_flat_get(j, path);
    if (!tok || !p || strcmp(p->value, tok) != 0) {
      fprintf(stderr, "  %s: %s: ours '%s', golden '%s'\n", trace, path, p ? p->value : "(missing)",
              tok ? tok : "(missing)");
      return false;
    }
  }
  return true;
}

static bool check_trace(const char *trace, const char *golden, size_t *keys_checked) {
  char *argv[] = {CTS_TEST_CTFSCOPE, "info", "--json", "--packets", (char *)trace, NULL};
  run_result_t r;
  if (!run_cmd(argv, NULL, 120, &r)) return false;
  bool ok = true;
  json_flat_t j;
  if (!json_flat_parse(&j, r.out, r.out_len)) {
    fprintf(stderr, "  %s: --json output does not parse: %s\n", trace, j.error);
    run_result_free(&r);
    json_flat_free(&j);
    return false;
  }
  FILE *g = fopen(golden, "r");
  char line[8192];
  size_t packet_index = 0;
  while (g && fgets(line, sizeof line, g)) {
    trim(line);
    if (line[0] == '#' || strncmp(line, "identify|", 9) == 0 || !line[0]) continue;
    if (strncmp(line, "packet ", 7) == 0) {
      ok &= check_packet(trace, &j, packet_index++, line);
      ++*keys_checked;
      continue;
    }
    char *space = strchr(line, ' ');
    if (!space) continue;
    *space = '\0';
    ok &= check_key(trace, &j, line, space + 1);
    ++*keys_checked;
  }
  char extra[64];
  snprintf(extra, sizeof extra, "packet_list[%zu].offset", packet_index);
  if (json_flat_get(&j, extra)) {
    fprintf(stderr, "  %s: we list more packets than the golden (%zu)\n", trace, packet_index);
    ok = false;
  }
  if (g) fclose(g);
  json_flat_free(&j);
  run_result_free(&r);
  return ok;
}

CTS_TEST(info_json_matches_every_golden_summary) {
  CTS_REQUIRE_CORPUS(corpus);
  corpus_list_t l;
  corpus_list_memtrace(corpus, &l);
  size_t failures = 0, keys = 0;
  for (size_t i = 0; i < l.n; i++) {
    char buf[1200];
    snprintf(buf, sizeof buf, "%s.summary.txt", l.paths[i]);
    if (access(buf, R_OK) != 0) {
      fprintf(stderr, "  %s: no golden summary\n", l.paths[i]);
      failures++;
      continue;
    }
    if (!check_trace(l.paths[i], buf, &keys)) failures++;
  }
  corpus_list_free(&l);
  fprintf(stderr, "  %zu golden values compared\n", keys);
  CTS_ASSERT_MSG(keys > 1000, "too few values compared (%zu)", keys);
  CTS_ASSERT_MSG(failures == 0, "%zu traces differ from their golden summary", failures);
}

CTS_TEST(info_text_shows_headline_figures) {
  CTS_REQUIRE_CORPUS(corpus);
  char path[1024];
  snprintf(path, sizeof path, "%s/memtrace/traces/p1_short_lived.r1e-2.ctf", corpus);
  char *argv[] = {CTS_TEST_CTFSCOPE, "info", path, NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(argv, NULL, 60, &r));
  const bool ok =
      r.exit_code == 0 && strstr(r.out, "41 722") && strstr(r.out, "21 586") &&
      strstr(r.out, "17268800 bytes") && strstr(r.out, "/opt/samples/p1_short_lived.exe") &&
      strstr(r.out, "2026-11-21 22:51:42.659947 UTC") && strstr(r.out, "corpus p1_short_lived");
  if (!ok) fprintf(stderr, "%s", r.out);
  run_result_free(&r);
  CTS_ASSERT_MSG(ok, "headline figures missing from the text output");
}

CTS_TEST(info_json_for_several_traces_is_an_array) {
  CTS_REQUIRE_CORPUS(corpus);
  char a[1024], b[1024];
  snprintf(a, sizeof a, "%s/memtrace/traces/p3_large_arrays.r1.ctf", corpus);
  snprintf(b, sizeof b, "%s/memtrace/traces/p4_deep_recursion.r1.ctf", corpus);
  char *argv[] = {CTS_TEST_CTFSCOPE, "info", "--json", a, b, NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(argv, NULL, 60, &r));
  json_flat_t j;
  const bool parsed = json_flat_parse(&j, r.out, r.out_len);
  const json_pair_t *p0 = json_flat_get(&j, "[0].events_total");
  const json_pair_t *p1 = json_flat_get(&j, "[1].events_total");
  const bool ok = parsed && p0 && p1 && strcmp(p0->value, "1222") == 0;
  if (!ok) fprintf(stderr, "%s\n%s", parsed ? "" : j.error, r.out);
  json_flat_free(&j);
  run_result_free(&r);
  CTS_ASSERT_MSG(ok, "expected a JSON array of two summaries");
}

CTS_TEST_MAIN()
