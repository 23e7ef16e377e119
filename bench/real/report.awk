# SPDX-License-Identifier: MIT
# The Markdown report of bench/real/run.sh for one mode, from its raw figures (tab-separated:
# mode program config round wall user sys status output_md5 trace_bytes events trace_state;
# round 0 is the untraced warm-up whose output and status are the reference).
# Variables: mode (all | pinned), progs and configs (space-separated, in table order).

# Median, minimum and maximum of the space-separated numbers in s ("" gives "nan").
function stats(s, what,   v, n, i, j, t) {
  n = split(s, v, " ")
  if (n == 0) return "nan"
  for (i = 2; i <= n; i++)
    for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
  if (what == "min") return v[1]
  if (what == "max") return v[n]
  return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}

# The per-round ratios of field k (wall or cpu) of config c to config b, program p.
function ratios(p, c, b, k,   r, s) {
  s = ""
  for (r = 1; r <= maxround; r++)
    if (((p, c, r) in k) && ((p, b, r) in k) && k[p, b, r] > 0) s = s " " k[p, c, r] / k[p, b, r]
  return s
}

function ratio_cell(s,   m) {
  m = stats(s)
  return m == "nan" ? "-" : sprintf("%.2f", m)
}

function verdict(value, target, floor) {
  if (value == "nan") return "-"
  if (value + 0 <= target + 0) return "yes"
  if (floor != "nan" && floor + 0 > target + 0) return "**no** (target below the floor)"
  return "**no**"
}

# The 2-bytes-per-event verdict for bz bytes per event, of a trace of ev events and by
# bytes: a program that allocates a few hundred times cannot meet it, the trace's fixed
# part (its header, the module and location tables) being larger than 2 bytes per event.
function size_verdict(bz, ev, by) {
  if (bz == "nan") return "-"
  if (bz + 0 <= 2) return "yes"
  if (ev + 0 < 100000) return sprintf("**no** (%d events in %d bytes: the fixed part dominates)", ev, by)
  return "**no**"
}

function bytes_cell(b) {
  if (b >= 1e6) return sprintf("%.1f MB", b / 1e6)
  if (b >= 1e3) return sprintf("%.1f kB", b / 1e3)
  return sprintf("%d B", b)
}

BEGIN { FS = "\t" }

$1 == mode {
  p = $2; c = $3; r = $4
  if (r == 0) { refsum[p] = $9; refstatus[p] = $8; next }
  wall[p, c, r] = $5
  cpu[p, c, r] = $6 + $7
  if (r > maxround) maxround = r
  walls[p, c] = walls[p, c] " " $5
  cpus[p, c] = cpus[p, c] " " ($6 + $7)
  runs[p, c]++
  if ($9 != refsum[p] || $8 != refstatus[p]) {
    differs[p, c]++
    how[p, c] = how[p, c] (how[p, c] == "" ? "" : ", ") "exit " $8 ($9 != refsum[p] ? ", output" : "")
  }
  if ($8 == 124) timeouts[p, c]++
  if ($10 > 0) bytes[p, c] = bytes[p, c] " " $10
  if ($11 > 0) {
    events[p, c] = events[p, c] " " $11
    per_event[p, c] = per_event[p, c] " " $10 / $11
  }
  if ($12 == "damaged" || $12 == "unreadable") damaged[p, c]++
}

END {
  np = split(progs, P, " ")
  nc = split(configs, C, " ")
  have_ht = configs ~ /(^| )heaptrack( |$)/
  have_z = configs ~ /(^| )rate1-compress( |$)/
  wall_target = mode == "pinned" ? 0.7 : 0.5
  if (mode == "pinned") print "## Pinned to one CPU (`taskset -c`)"
  else print "## On every CPU"
  print ""
  print "### Wall time (median s, and x untraced: the median of the per-round ratios)"
  print ""
  line = "| program |"; rule = "|---|"
  for (j = 1; j <= nc; j++) { line = line " " C[j] " |"; rule = rule "---|" }
  print line
  print rule
  for (i = 1; i <= np; i++) {
    p = P[i]
    line = "| " p " |"
    for (j = 1; j <= nc; j++) {
      c = C[j]
      if (runs[p, c] == 0) { line = line " - |"; continue }
      cell = sprintf("%.2f", stats(walls[p, c]))
      if (c != "untraced") cell = cell " (" ratio_cell(ratios(p, c, "untraced", wall)) "x)"
      if (differs[p, c] > 0) cell = cell " **DIFFERS**"
      line = line " " cell " |"
    }
    print line
  }
  print ""
  print "### Targets (issue #16)"
  print ""
  print "Ratios are medians of the ratios within each round. The floor is untraced / heaptrack:"
  print "a rate-1 target below it cannot be met by any tracer. The targets are of wall time; the"
  print "same ratios of CPU time (every process of the run) follow in brackets: on a loaded"
  print "machine they are the steadier figure."
  print ""
  printf "| program | rate 1, default unwinder: wall x heaptrack (target <= %.1f) | floor | met? |", wall_target
  printf " default rate: wall x untraced (<= 1.05) | met? | rate 1 compressed: bytes/event (<= 2) | met? | output of every traced run |\n"
  print "|---|---|---|---|---|---|---|---|---|"
  for (i = 1; i <= np; i++) {
    p = P[i]
    rh = have_ht ? stats(ratios(p, "rate1", "heaptrack", wall)) : "nan"
    fl = have_ht ? stats(ratios(p, "untraced", "heaptrack", wall)) : "nan"
    du = stats(ratios(p, "default-rate", "untraced", wall))
    rhc = have_ht ? ratio_cell(ratios(p, "rate1", "heaptrack", cpu)) : "-"
    flc = have_ht ? ratio_cell(ratios(p, "untraced", "heaptrack", cpu)) : "-"
    duc = ratio_cell(ratios(p, "default-rate", "untraced", cpu))
    bz = have_z ? stats(per_event[p, "rate1-compress"]) : "nan"
    bad = ""
    for (j = 1; j <= nc; j++)
      if (C[j] != "untraced" && C[j] != "heaptrack" && differs[p, C[j]] > 0) bad = bad " " C[j]
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p,
      rh == "nan" ? "-" : sprintf("%.2f (CPU %s)", rh, rhc),
      fl == "nan" ? "-" : sprintf("%.2f (CPU %s)", fl, flc), verdict(rh, wall_target, fl),
      du == "nan" ? "-" : sprintf("%.3f (CPU %s)", du, duc), verdict(du, 1.05, "nan"),
      have_z ? (bz == "nan" ? "-" : sprintf("%.2f", bz)) : "not run (no --compress)",
      have_z ? size_verdict(bz, stats(events[p, "rate1-compress"]), stats(bytes[p, "rate1-compress"])) : "-",
      bad == "" ? "same as untraced" : "**DIFFERS:**" bad
  }
  print ""
  print "### Every configuration"
  print ""
  print "Wall and CPU seconds: median [min-max]; CPU is user + system of every process (the"
  print "writer process, heaptrack's interpreter, redis' benchmark client included). Heaptrack's"
  print "bytes per event divide its file by the events of the rate-1 trace of the same program."
  print ""
  print "| program | configuration | wall s | CPU s | wall x untraced | CPU x untraced | wall x heaptrack | output, exit status | trace size | events | bytes/event |"
  print "|---|---|---|---|---|---|---|---|---|---|---|"
  for (i = 1; i <= np; i++) {
    p = P[i]
    for (j = 1; j <= nc; j++) {
      c = C[j]
      if (runs[p, c] == 0) continue
      out = differs[p, c] > 0 ? sprintf("**DIFFERS** %d/%d (%s)", differs[p, c], runs[p, c], how[p, c]) : "same"
      if (timeouts[p, c] > 0) out = out sprintf(", %d timed out", timeouts[p, c])
      size = "-"; ev = "-"; per = "-"
      b = stats(bytes[p, c])
      if (b != "nan") size = bytes_cell(b)
      if (damaged[p, c] > 0) size = size sprintf(" (**%d damaged**)", damaged[p, c])
      e = stats(events[p, c])
      if (e != "nan") { ev = sprintf("%d", e); per = sprintf("%.2f", stats(per_event[p, c])) }
      if (c == "heaptrack" && b != "nan") {
        e1 = stats(events[p, "rate1"])
        if (e1 != "nan") per = sprintf("%.3f (per rate-1 event)", b / e1)
      }
      printf "| %s | %s | %.3f [%.3f-%.3f] | %.3f [%.3f-%.3f] | %s | %s | %s | %s | %s | %s | %s |\n",
        p, c, stats(walls[p, c]), stats(walls[p, c], "min"), stats(walls[p, c], "max"),
        stats(cpus[p, c]), stats(cpus[p, c], "min"), stats(cpus[p, c], "max"),
        ratio_cell(ratios(p, c, "untraced", wall)), ratio_cell(ratios(p, c, "untraced", cpu)),
        have_ht ? ratio_cell(ratios(p, c, "heaptrack", wall)) : "-", out, size, ev, per
    }
  }
  print ""
}
