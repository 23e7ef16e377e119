// SPDX-License-Identifier: MIT
// ctfscope report viewer, part 2 of 5: the task timeline's geometry. Pure functions from the
// report's task data and a viewport to rows, pixel positions and rectangles; nothing here
// touches the DOM, a canvas or the clock, so node runs it as it is (tests/js/
// check_viewer_layout.cjs). viewer_timeline.js turns what they return into pixels; where a
// function says "drawn.x", it returns the count the status line and the tests read.
//
// Every per-frame function is bounded by the pixels it covers, not by the trace: tasks,
// activations, bands, counters and marks are aggregated per pixel column (binary searches
// over sorted arrays jump from one column to the next) and arrows are capped.
//
// A viewport is { start: ns at the left edge, scale: px per ns, y: px scrolled down }; a frame
// (frame()) is a viewport fixed for one drawing of w x h CSS pixels.
(function () {
  'use strict';
  const RULER = 28, ROWH = 16, MARKS = 26; // px: the ruler, one row, the allocation strip
  const LANEH = 6, MAX_LANES = 16; // px per thread's lane strip; strips drawn (the last takes the rest)
  const F_RESOLVED = 1, F_FAILED = 2, F_NEVER = 32; // task flags (report_tasks.c)
  const ARROW_BUDGET = 6000; // arrows considered per frame; above it, a regular sample
  const ARROW_KINDS = 5;

  // Min/max pyramid of a value array (blocks of 16, 256, ...) for range queries in
  // O(16 log16 n): what one pixel column of a step line covers.
  function minMaxLevels(v) {
    const levels = [{ min: v, max: v }];
    for (let cur = levels[0]; cur.min.length > 64;) {
      const m = Math.ceil(cur.min.length / 16), mn = new Float64Array(m), mx = new Float64Array(m);
      for (let b = 0; b < m; b++) {
        let lo = Infinity, hi = -Infinity;
        for (let k = b * 16, e = Math.min(k + 16, cur.min.length); k < e; k++) { if (cur.min[k] < lo) lo = cur.min[k]; if (cur.max[k] > hi) hi = cur.max[k]; }
        mn[b] = lo; mx[b] = hi;
      }
      levels.push((cur = { min: mn, max: mx }));
    }
    return levels;
  }
  // [min, max] of v[i..j) (j > i).
  function rangeMinMax(levels, i, j) {
    let lo = Infinity, hi = -Infinity, L = 0, a = i, b = j;
    const take = (k) => { const q = levels[L]; if (q.min[k] < lo) lo = q.min[k]; if (q.max[k] > hi) hi = q.max[k]; };
    while (a < b) {
      if (L + 1 < levels.length && b - a >= 32) {
        while (a % 16) take(a++);
        while (b % 16) take(--b);
        a /= 16; b /= 16; L++;
      } else { while (a < b) take(a++); }
    }
    return [lo, hi];
  }
  // First index in [lo, hi) with arr[i] >= v (arr ascending there).
  function lowerBound(arr, v, lo, hi) {
    while (lo < hi) { const m = (lo + hi) >>> 1; if (arr[m] < v) lo = m + 1; else hi = m; }
    return lo;
  }
  // The same, searching forward from lo (exponential steps, then binary): for the per-pixel-
  // column jumps, whose next index is usually a few entries ahead.
  function gallop(arr, v, lo, hi) {
    if (lo >= hi || arr[lo] >= v) return lo;
    for (let prev = lo, step = 1; ; step *= 2) { // arr[prev] < v
      const next = prev + step;
      if (next >= hi) return lowerBound(arr, v, prev + 1, hi);
      if (arr[next] >= v) return lowerBound(arr, v, prev + 1, next);
      prev = next;
    }
  }
  // Bands (idle, GC): [start, end] pairs sorted by end, with prefix sums of their lengths,
  // so the share of any time range they cover is two binary searches (bandColumns).
  function bandIndex(pairs) {
    const n = pairs.length / 2, S = new Float64Array(n), E = new Float64Array(n), C = new Float64Array(n + 1);
    for (let i = 0; i < n; i++) {
      S[i] = pairs[2 * i]; E[i] = Math.max(pairs[2 * i], pairs[2 * i + 1]);
      C[i + 1] = C[i] + (E[i] - S[i]);
    }
    return { n: n, S: S, E: E, C: C };
  }
  // Axis-aligned runs as x, y, w, h quadruples: a run that starts where the previous one
  // (same y and height) ends is merged into it, so a dense row is a few rectangles.
  function addRun(q, x0, x1, y, hgt) {
    const n = q.length;
    if (n && q[n - 3] === y && q[n - 1] === hgt && x0 <= q[n - 4] + q[n - 2] + 0.5) {
      const e = Math.max(q[n - 4] + q[n - 2], x1);
      q[n - 2] = e - q[n - 4];
    } else q.push(x0, y, x1 - x0, hgt);
  }

  // The index of the report's task document T (report_tasks.c; its columns decoded): what
  // the frames search, built once per load. Tasks are in row order, then by start; in a row
  // they do not overlap, so their ends are sorted too.
  function index(T) {
    const n = T.n;
    const start = T.start, dur = T.dur;
    const end = new Float64Array(n);
    for (let i = 0; i < n; i++) end[i] = start[i] + dur[i];
    const becomes = new Int32Array(n);
    for (let i = 0; i < n; i++) becomes[i] = T.becomes[i] === 0 ? -1 : i + T.becomes[i];
    const rowStart = new Int32Array(T.rows + 1);
    const taskRow = new Int32Array(n);
    for (let r = 0, k = 0; r < T.rows; r++) { rowStart[r] = k; for (let j = 0; j < T.row_n[r]; j++) taskRow[k++] = r; }
    rowStart[T.rows] = n;
    // Labels per task (sorted by task, then time).
    const L = T.labels, nl = L.task.length;
    const labelStart = new Int32Array(n + 1);
    for (let i = 0; i < nl; i++) labelStart[L.task[i] + 1]++;
    for (let i = 0; i < n; i++) labelStart[i + 1] += labelStart[i];
    // Activations grouped by row.
    const A = T.acts, na = A.task.length;
    const actT0 = A.t0, actT1 = new Float64Array(na);
    for (let i = 0; i < na; i++) actT1[i] = actT0[i] + A.dur[i];
    const actRowStart = new Int32Array(T.rows + 1);
    for (let i = 0; i < na; i++) actRowStart[taskRow[A.task[i]] + 1]++;
    for (let r = 0; r < T.rows; r++) actRowStart[r + 1] += actRowStart[r];
    // Arrows sorted by their earlier end.
    const W = T.arrows, nw = W.kind.length;
    const arT0 = W.t0, arT1 = new Float64Array(nw), arMin = new Float64Array(nw);
    const arRowA = new Int32Array(nw), arRowB = new Int32Array(nw); // rows of their ends
    for (let i = 0; i < nw; i++) {
      arT1[i] = arT0[i] + W.dt[i]; arMin[i] = Math.min(arT0[i], arT1[i]);
      arRowA[i] = taskRow[W.src[i]]; arRowB[i] = taskRow[W.dst[i]];
    }
    // Counters of one group (name before '#') share a scale.
    const counters = T.counters.map((c) => {
      const grp = c.name.includes('#') ? c.name.slice(0, c.name.lastIndexOf('#')) : c.name === 'tcp-ackd-segs' ? 'tcp-to-ip' : c.name;
      return { name: c.name, group: grp, t: c.t, v: c.v };
    });
    const scales = {};
    for (const c of counters) {
      const s = scales[c.group] || (scales[c.group] = { min: 0, max: 10 });
      for (const v of c.v) { if (v < s.min) s.min = v; if (v > s.max) s.max = v; }
    }
    for (const k in scales) if (scales[k].max - scales[k].min < 10) scales[k].max = scales[k].min + 10;
    for (const c of counters) c.mm = minMaxLevels(c.v);
    // Running periods per lane (a thread each: report_tasks.c), in time order, for the lane
    // strips; only with more than one lane. Lanes from MAX_LANES - 1 on share the last strip.
    let lanes = null;
    if (T.lanes > 1 && A.lane) {
      const nl = Math.min(T.lanes, MAX_LANES), byLane = [];
      for (let l = 0; l < nl; l++) byLane.push([]);
      for (let i = 0; i < na; i++) byLane[Math.min(A.lane[i], nl - 1)].push(i);
      lanes = byLane.map((list) => {
        list.sort((x, y) => actT0[x] - actT0[y]);
        const t0 = new Float64Array(list.length), t1 = new Float64Array(list.length);
        list.forEach((k, j) => { t0[j] = actT0[k]; t1[j] = actT1[k]; });
        // End of the running periods so far: the strips jump by it (periods may overlap).
        const reach = new Float64Array(list.length);
        for (let j = 0, m = -Infinity; j < list.length; j++) reach[j] = m = Math.max(m, t1[j]);
        return { t0: t0, t1: t1, reach: reach };
      });
    }
    const marks = T.marks ? { t: T.marks.t, s: T.marks.s, sum: new Float64Array(T.marks.s.length + 1) } : null;
    if (marks) for (let i = 0; i < marks.s.length; i++) marks.sum[i + 1] = marks.sum[i] + marks.s[i];
    const t0 = Math.min(T.first, 0), t1 = Math.max(T.end, t0 + 1);
    return {
      T: T, n: n, rows: T.rows, start: start, end: end, becomes: becomes, becameFrom: null,
      rowStart: rowStart, taskRow: taskRow, L: L, nl: nl, labelStart: labelStart,
      na: na, actT0: actT0, actT1: actT1, actRowStart: actRowStart,
      W: W, nw: nw, arT0: arT0, arT1: arT1, arMin: arMin, arRowA: arRowA, arRowB: arRowB,
      counters: counters, scales: scales, marks: marks, marksH: marks ? MARKS : 0,
      lanes: lanes, lanesH: lanes ? lanes.length * LANEH + 4 : 0,
      hdr: (marks ? MARKS : 0) + (lanes ? lanes.length * LANEH + 4 : 0),
      idle: bandIndex(T.idle), gc: bandIndex(T.gc), t0: t0, t1: t1,
    };
  }

  // The viewport showing the whole trace in a canvas w px wide, of which view.marginR px
  // on the right are kept free (for the counters' names).
  function fit(ix, view, w) {
    view.start = ix.t0 - (ix.t1 - ix.t0) * 0.01;
    view.scale = (w - 20 - (view.marginR || 0)) / ((ix.t1 - ix.t0) * 1.02);
    view.y = 0;
  }
  // Where the activity is: the shortest time range holding 90 % of the tasks' starts, as
  // [from, to]; null when that is more than a quarter of the trace (the activity is spread
  // out: the whole trace is the view to start with) or there are few tasks. net.ctf's 6.5 s
  // hold nine in ten of its task starts in their first 0.1 s.
  function busyRange(ix) {
    const n = ix.n;
    if (n < 20) return null;
    const s = Float64Array.from(ix.startTrace || ix.start).sort(), k = Math.ceil(n * 0.9);
    let best = Infinity, a = 0;
    for (let i = 0; i + k <= n; i++) if (s[i + k - 1] - s[i] < best) { best = s[i + k - 1] - s[i]; a = i; }
    if (!(best < (ix.t1 - ix.t0) / 4)) return null;
    return [s[a], Math.max(s[a + k - 1], s[a] + 1)];
  }
  // The viewport showing [from, to] with 5 % margins (as fit(), keeping view.marginR free).
  function showRange(view, from, to, w) {
    const d = to - from;
    view.start = from - d * 0.05;
    view.scale = (w - 20 - (view.marginR || 0)) / (d * 1.1);
    view.y = 0;
  }
  // Keeps the viewport in bounds (in place): zoomed out to the whole trace at most, in to
  // 100 px per ns; at least half the width on the trace; no scrolling past the last row.
  function clampView(ix, view, w, h) {
    const minScale = (w - 20 - (view.marginR || 0)) / ((ix.t1 - ix.t0) * 1.05);
    if (view.scale < minScale) view.scale = minScale;
    if (view.scale > 100) view.scale = 100; // 100 px per ns
    const span = w / view.scale;
    const lo = ix.t0 - span * 0.5, hi = ix.t1 - span * 0.5;
    view.start = Math.min(Math.max(view.start, lo), Math.max(lo, hi));
    const maxY = Math.max(0, rowMap(ix, view, w, h).contentH + 40 - (h - RULER - ix.hdr));
    view.y = Math.min(Math.max(view.y, 0), maxY);
  }
  // x of a time (clamped to +-1e6 px: far-off ends stay finite) and y of a row's line, with
  // every row shown (no compaction): the rows start under the ruler and the allocation strip.
  function xOf(view, t) { const x = (t - view.start) * view.scale; return x < -1e6 ? -1e6 : x > 1e6 ? 1e6 : x; }
  function rowY(view, r, hdr) { return RULER + (hdr || 0) + 14 + r * ROWH - view.y; }
  // Where the rows go in a w x h view, before scrolling by view.y: base[r] is row r's line,
  // NaN for a row left out. With view.compact, only the rows with a task overlapping the
  // time range in view, or at an end of an arrow crossing it, are kept (active, ascending),
  // and they are squeezed (down to MINROWH px each) until all of them fit in the height, as
  // mirage-trace-viewer keeps every thread on screen: zoomed into a busy stretch, its rows
  // are not left below the visible ones. contentH: the height of the rows (what scrolling
  // covers). With view.fisheye as well, squeezed rows get a lens instead: ROWH-high rows
  // around active slot view.focus (labels fit there), the others thinner (slotY: the lines
  // by slot, heights: by row, lens: [first slot, slots]), everything still on screen.
  // Cached for the last time range, height and focus (scrolling and redrawing reuse it);
  // O(rows log n + ARROW_BUDGET) to compute.
  const MINROWH = 3;
  function rowMap(ix, view, w, h) {
    if (!(w > 0)) w = 800;
    if (!(h > 0)) h = 560;
    const vs = view.start, ve = view.start + w / view.scale, compact = !!view.compact;
    const fish = compact && !!view.fisheye, focus = fish ? view.focus || 0 : 0;
    const c = ix.rowMapCache;
    if (c && c.vs === vs && c.ve === ve && c.h === h && c.compact === compact && c.hdr === ix.hdr && c.fish === fish && c.focus === focus) return c;
    const rows = ix.rows, base = new Float64Array(rows), top = RULER + ix.hdr;
    let rowh = ROWH, pad = 14, active = null, slotY = null, heights = null, lens = null;
    if (compact) {
      const on = new Uint8Array(rows);
      for (let r = 0; r < rows; r++) {
        const b = ix.rowStart[r + 1], i = lowerBound(ix.end, vs, ix.rowStart[r], b);
        if (i < b && ix.start[i] <= ve) on[r] = 1;
      }
      // The rows at both ends of the arrows crossing the view (those arrows() may draw:
      // earlier end at most the fade-out length before it), e.g. a read of a result from a
      // task that ended before the view: activity in view too. At most ARROW_BUDGET of them,
      // evenly spaced, as arrows() draws.
      const fade = 6000 / view.scale, a0 = lowerBound(ix.arMin, vs - fade, 0, ix.nw), a1 = lowerBound(ix.arMin, ve, a0, ix.nw);
      let stride = 1;
      while ((a1 - a0) / stride > ARROW_BUDGET) stride *= 2;
      for (let a = Math.ceil(a0 / stride) * stride; a < a1; a += stride)
        if (Math.max(ix.arT0[a], ix.arT1[a]) >= vs) { on[ix.arRowA[a]] = 1; on[ix.arRowB[a]] = 1; }
      const list = [];
      for (let r = 0; r < rows; r++) if (on[r]) list.push(r);
      active = Int32Array.from(list);
      const nA = active.length, avail = h - top - 12, fitH = avail / Math.max(1, nA);
      base.fill(NaN);
      // The fisheye: a lens of full-height rows (40 % of the height) around slot `focus`,
      // the others sharing the rest evenly (at least half a pixel each: beyond that, the
      // uniform squeeze and scrolling).
      const nFull = Math.max(1, Math.min(nA - 1, Math.floor((avail * 0.4) / ROWH)));
      const thin = (avail - nFull * ROWH) / Math.max(1, nA - nFull);
      if (fish && fitH < ROWH && thin >= 0.5) {
        const f0 = Math.min(Math.max(0, Math.round(focus) - (nFull >> 1)), nA - nFull);
        slotY = new Float64Array(nA); heights = new Float64Array(rows).fill(NaN);
        let y = top + 6;
        for (let k = 0; k < nA; k++) {
          const hk = k >= f0 && k < f0 + nFull ? ROWH : thin;
          slotY[k] = base[active[k]] = y + hk / 2;
          heights[active[k]] = hk;
          y += hk;
        }
        rowh = thin; pad = 6 + thin / 2; lens = [f0, nFull];
      } else {
        if (fitH < ROWH) { rowh = Math.max(MINROWH, fitH); pad = 6 + rowh / 2; }
        for (let k = 0; k < nA; k++) base[active[k]] = top + pad + k * rowh;
      }
    } else for (let r = 0; r < rows; r++) base[r] = top + pad + r * ROWH;
    const n = active ? active.length : rows;
    return (ix.rowMapCache = {
      vs: vs, ve: ve, h: h, compact: compact, hdr: ix.hdr, fish: fish, focus: focus, base: base, rowh: rowh, pad: pad,
      active: active, top: top, slotY: slotY, heights: heights, lens: lens,
      contentH: slotY ? h - top - 6 : pad + n * rowh,
    });
  }
  // The height of row r's band in layout m (the fisheye's vary).
  function rowHeight(m, r) { return m.heights ? m.heights[r] : m.rowh; }
  // The y of row r's line in a view whose rows are laid out by rowMap m; a row left out is
  // just above the rows' area (links and arrows to it point off-screen, upwards).
  function mapY(m, view, r) { const b = m.base[r]; return b === b ? b - view.y : m.top - 6; }
  // The row whose line is nearest to y (within half a row, 8 px at most); -1 for none.
  function rowAt(m, view, y) {
    const n = m.active ? m.active.length : m.base.length;
    if (m.slotY) { // the fisheye: the nearest line
      let k = lowerBound(m.slotY, y + view.y, 0, n);
      if (k === n || (k > 0 && y + view.y - m.slotY[k - 1] < m.slotY[k] - y - view.y)) k--;
      if (k < 0) return -1;
      const r = m.active[k];
      return Math.abs(mapY(m, view, r) - y) <= Math.min(8, Math.max(1.5, m.heights[r] / 2)) ? r : -1;
    }
    const k = Math.round((y + view.y - m.top - m.pad) / m.rowh);
    if (k < 0 || k >= n) return -1;
    const r = m.active ? m.active[k] : k;
    return Math.abs(mapY(m, view, r) - y) <= Math.min(8, Math.max(1.5, m.rowh / 2)) ? r : -1;
  }
  // One drawing: the time range in view, the rows that may show (r0..r1), the top of the
  // rows' area (under the ruler and the allocation strip) and the row height (rowh).
  function frame(ix, view, w, h) {
    const m = rowMap(ix, view, w, h), top = m.top;
    let r0, r1;
    const k0 = Math.max(0, Math.floor((view.y - m.pad) / m.rowh) - 1), k1 = Math.ceil((view.y + h - top) / m.rowh) + 1;
    if (m.slotY) { r0 = m.active[0]; r1 = m.active[m.active.length - 1]; } // fits: no scrolling
    else if (m.active) {
      r0 = m.active.length ? m.active[Math.min(k0, m.active.length - 1)] : 0;
      r1 = m.active.length ? m.active[Math.min(k1, m.active.length - 1)] : -1;
    } else { r0 = k0; r1 = Math.min(ix.rows - 1, k1); }
    return {
      view: view, w: w, h: h, vs: view.start, ve: view.start + w / view.scale, scale: view.scale,
      pxNs: 1 / view.scale, top: top, r0: r0, r1: r1, rowh: m.rowh, shownRows: m.active ? m.active.length : ix.rows,
      X: (t) => xOf(view, t), rowY: (r) => mapY(m, view, r), rowHeight: (r) => rowHeight(m, r), lens: m.lens,
      lensTop: m.lens ? m.slotY[m.lens[0]] - ROWH / 2 - view.y : 0, // the lens's top edge
    };
  }
  // Whether row r's line is close enough to the visible area to be drawn.
  function rowShows(f, y) { return !(y < f.top - 4 || y > f.h + 4); }

  // Band coverage: cov[x] (x a pixel column) = the share of the column's time the bands B
  // cover; a band wide enough for a name gets one centred on it (texts: x, text pairs).
  // Returns the number of columns covered.
  function bandColumns(B, f, cov, text, texts) {
    const { n, S, E, C } = B, vs = f.vs, pxNs = f.pxNs, w = f.w;
    let cols = 0;
    if (!n) return 0;
    const covered = (t) => { const k = lowerBound(E, t, 0, n); return C[k] + (k < n && S[k] < t ? t - S[k] : 0); };
    let k0 = lowerBound(E, vs, 0, n), kPrev = k0; // E[kPrev - 1] < the next column's end
    if (k0 >= n) return 0;
    let x = Math.max(0, Math.floor((S[k0] - vs) * f.scale)), lastText = -1;
    let cA = covered(vs + x * pxNs);
    while (x < w) {
      const tb = vs + (x + 1) * pxNs, kb = (kPrev = gallop(E, tb, kPrev, n));
      const cB = C[kb] + (kb < n && S[kb] < tb ? tb - S[kb] : 0);
      const fr = Math.min(1, Math.max(0, (cB - cA) / pxNs));
      cov[x] = fr;
      if (fr > 0) cols++;
      if (kb < n && S[kb] < tb && kb !== lastText && (E[kb] - S[kb]) * f.scale > 40) {
        lastText = kb;
        texts.push(f.X((S[kb] + E[kb]) / 2), text);
      }
      x++;
      cA = cB;
      if (fr === 0 && !(kb < n && S[kb] < tb)) { // nothing here: jump to the next band's column
        if (kb >= n) break;
        const nx = Math.floor((S[kb] - vs) * f.scale);
        if (nx > x) { x = nx; cA = covered(vs + x * pxNs); }
      }
    }
    return cols;
  }
  // The background strip: per pixel column, idle (grey) and GC (brown) shares blended into
  // the background, as r, g, b bytes.
  function bandStrip(idleCov, gcCov) {
    const wCols = idleCov.length, rgb = new Uint8ClampedArray(3 * wCols);
    for (let x = 0; x < wCols; x++) {
      const fi = idleCov[x], fg = gcCov[x];
      rgb[3 * x] = 230 + (204 - 230) * fi + (179 - 230) * fg;
      rgb[3 * x + 1] = 230 + (204 - 230) * fi + (153 - 230) * fg;
      rgb[3 * x + 2] = 230 + (204 - 230) * fi + (153 - 230) * fg;
    }
    return rgb;
  }
  // The grid: a power of ten of ns at least 90 px apart; ticks are the times of its lines in
  // view (200 at most), grid their 1-px rectangles.
  function gridLines(f) {
    const step = Math.pow(10, Math.ceil(Math.log10(90 / f.scale)));
    const ticks = [], grid = [];
    for (let t = Math.ceil(f.vs / step) * step, k = 0; t <= f.ve && k < 200; t += step, k++) {
      ticks.push(t);
      grid.push(Math.round(f.X(t)), RULER, 1, f.h - RULER);
    }
    return { step: step, ticks: ticks, grid: grid };
  }
  // The ruler's text for time t (ns since the start) with grid step `step`: time since the
  // start and, when the wall clock of the start is known (startUs, µs), the UTC time of day.
  function rulerLabel(t, step, startUs) {
    const digits = Math.max(0, Math.min(9, -Math.floor(Math.log10(step / 1e9))));
    const rel = (t / 1e9).toFixed(digits) + ' s';
    if (startUs) {
      const ms = startUs / 1000 + t / 1e6;
      const d = new Date(ms);
      const frac = digits > 3 ? String(((t / 1e9) % 1).toFixed(digits)).slice(5, 5 + digits - 3) : '';
      return rel + '  ' + d.toISOString().slice(11, 23) + frac;
    }
    return rel;
  }

  // Which ruler labels to draw (texts widths[k] px wide, for grid.ticks[k]): each at 3 px
  // right of its line, every k-th tick (by its multiple of the step, so the choice stays put
  // while panning) with k the smallest power of two that keeps labels 12 px apart; none past
  // the right edge. Returns tick index, x, width triples.
  function rulerPlacements(f, grid, widths) {
    const stepPx = grid.step * f.scale, out = [];
    let wmax = 0;
    for (const wd of widths) wmax = Math.max(wmax, wd);
    let every = 1;
    while (every * stepPx < wmax + 12 && every < 1 << 20) every *= 2;
    for (let k = 0; k < grid.ticks.length; k++) {
      const t = grid.ticks[k], x = f.X(t) + 3;
      if (Math.round(t / grid.step) % every !== 0 || x + widths[k] > f.w - 2) continue;
      out.push(k, x, widths[k]);
    }
    return out;
  }
  // Baselines for labels wanted at ys (gap px tall each) in [lo, hi]: in the same order, at
  // least gap apart, each moved as little as the others allow (pushed down from the top, then
  // up from the bottom when they run out of room).
  function spreadLabels(ys, gap, lo, hi) {
    const order = ys.map((y, k) => k).sort((a, b) => ys[a] - ys[b] || a - b), out = ys.slice();
    let prev = -Infinity;
    for (const k of order) { out[k] = Math.max(Math.min(Math.max(ys[k], lo), hi), prev + gap); prev = out[k]; }
    let next = Infinity;
    for (let q = order.length - 1; q >= 0; q--) { const k = order[q]; out[k] = Math.min(out[k], hi, next - gap); next = out[k]; }
    return out;
  }

  // Tasks and activations of the visible rows, as rectangles: lineRuns (a task's 2-px line,
  // failed ones in failRuns with a 16-px tick at their end), links (1-px verticals to the
  // parent's and the `becomes` task's rows), heads (triangles: a task that is still pending),
  // actRuns (running periods, 3 px), labelJobs (task, y pairs: tasks wide enough for labels).
  // At most one task per pixel column and row: a task under a pixel is followed by the first
  // one starting in the next column.
  function taskRows(ix, f) {
    const T = ix.T, start = ix.start, end = ix.end, X = f.X, vs = f.vs, ve = f.ve, pxNs = f.pxNs;
    const out = { lineRuns: [], failRuns: [], links: [], actRuns: [], heads: [], labelJobs: [], tasks: 0, acts: 0, rows: 0 };
    for (let r = f.r0; r <= f.r1; r++) {
      const y = f.rowY(r);
      if (!rowShows(f, y)) continue;
      out.rows++;
      const a = ix.rowStart[r], b = ix.rowStart[r + 1];
      let i = lowerBound(end, vs, a, b);
      while (i < b && start[i] <= ve) {
        const x0 = X(start[i]), x1 = Math.max(X(end[i]), x0 + 1);
        const failed = (T.flags[i] & F_FAILED) !== 0;
        addRun(failed ? out.failRuns : out.lineRuns, x0, x1, y - 1, 2);
        out.tasks++;
        if (x1 - x0 >= 2) {
          const p = (ix.shownParent || T.parent)[i];
          if (p >= 0) { const py = f.rowY(ix.taskRow[p]); if (py !== y) out.links.push(x0 - 0.5, Math.min(py, y), 1, Math.abs(py - y)); }
          const bcm = ix.becomes[i];
          if (bcm >= 0) { const by = f.rowY(ix.taskRow[bcm]); if (by !== y) out.links.push(x1 - 0.5, Math.min(by, y), 1, Math.abs(by - y)); }
          else if (!(T.flags[i] & F_RESOLVED) && x1 - x0 > 4 && !failed) out.heads.push(x1, y - 3, x1 + 4, y, x1, y + 3);
          if (failed) out.failRuns.push(x1 - 1, y - 8, 2, 16);
          if (x1 - x0 > 16 && ix.labelStart[i] < ix.labelStart[i + 1]) out.labelJobs.push(i, y);
        }
        // Tiny tasks: jump to the first task that starts in the next pixel column.
        if (X(end[i]) - x0 < 1) {
          const nextT = start[i] + pxNs;
          const j = gallop(start, nextT, i + 1, b);
          i = j > i + 1 ? j : i + 1;
        } else i++;
      }
      // Activations in this row.
      const aa = ix.actRowStart[r], ab = ix.actRowStart[r + 1], actT0 = ix.actT0, actT1 = ix.actT1;
      let k = lowerBound(actT1, vs, aa, ab);
      while (k < ab && actT0[k] <= ve) {
        const x0 = X(actT0[k]), x1 = Math.max(X(actT1[k]), x0 + 1);
        addRun(out.actRuns, x0, x1, y - 1.5, 3);
        out.acts++;
        if (X(actT1[k]) - x0 < 1) { const j = gallop(actT0, actT0[k] + pxNs, k + 1, ab); k = j > k + 1 ? j : k + 1; } else k++;
      }
    }
    return out;
  }
  // Boxes behind the highlighted tasks in view (hl: their indexes, ascending, i.e. by row
  // then start, so by end too inside a row), even those the one-per-pixel-column thinning
  // of taskRows skipped; one per pixel column and row.
  function highlightBoxes(ix, f, hl) {
    const start = ix.start, end = ix.end, X = f.X, boxes = [];
    let count = 0;
    for (let r = f.r0; r <= f.r1; r++) {
      const y = f.rowY(r);
      if (!rowShows(f, y)) continue;
      let k = lowerBound(hl, ix.rowStart[r], 0, hl.length);
      const kEnd = lowerBound(hl, ix.rowStart[r + 1], k, hl.length);
      let lo = k, hi = kEnd; // first highlighted task of the row ending at or after vs
      while (lo < hi) { const m = (lo + hi) >>> 1; if (end[hl[m]] < f.vs) lo = m + 1; else hi = m; }
      for (k = lo; k < kEnd && start[hl[k]] <= f.ve;) {
        const i = hl[k];
        const x0 = X(start[i]), x1 = Math.max(X(end[i]), x0 + 2);
        boxes.push(x0 - 3, y - 4, x1 - x0 + 6, 8);
        count++;
        if (x1 - x0 < 3) { // skip the others starting in the same pixel column
          const tNext = start[i] + f.pxNs;
          let a = k + 1, b = kEnd;
          while (a < b) { const m = (a + b) >>> 1; if (start[hl[m]] < tNext) a = m + 1; else b = m; }
          k = a;
        } else k++;
      }
    }
    return { boxes: boxes, count: count };
  }
  // Arrows whose earlier end is in view widened by the fade-out length, per kind: byKind
  // (x0, y0, x1, y1 segments) and headsByKind (triangles) for slanted and short ones; the
  // vertical ones (both ends in one pixel column: the common case zoomed out) apart, as
  // vLines (x, ya, yb) and vHeads (x, y of the tip, dir: the way the head extends from it,
  // +1 down, -1 up), one head per place.
  // Above ARROW_BUDGET, every stride-th arrow (stride a power of two, indexes multiple of it:
  // stable while panning). Arrows are on whole pixels, and one that would look exactly like
  // one already placed (same kind, same ends) is left out: zoomed out, thousands of arrows
  // between the same rows fall on the same few pixel columns.
  function arrows(ix, f) {
    const X = f.X, w = f.w, h = f.h, nw = ix.nw, arT0 = ix.arT0, arT1 = ix.arT1, kind = ix.W.kind;
    const fade = 6000 / f.scale;
    const out = { byKind: [], headsByKind: [], vLines: [], vHeads: [], nVert: 0, stride: 1, count: 0, merged: 0 };
    for (let kd = 0; kd < ARROW_KINDS; kd++) { out.byKind.push([]); out.headsByKind.push([]); out.vLines.push([]); out.vHeads.push([]); }
    const aFirst = lowerBound(ix.arMin, f.vs - fade, 0, nw), aLast = lowerBound(ix.arMin, f.ve + f.pxNs, aFirst, nw);
    let stride = 1;
    while ((aLast - aFirst) / stride > ARROW_BUDGET) stride *= 2;
    out.stride = stride;
    const yTop = f.top - 10, yBot = h + 10;
    const seen = new Set(), merged = f.view.mergeReads ? tryReadsRead(ix) : null;
    for (let ai = Math.ceil(aFirst / stride) * stride; ai < aLast; ai += stride) {
      if (merged && merged[ai]) { out.merged++; continue; }
      const xa0 = X(arT0[ai]), xb0 = X(arT1[ai]);
      if (Math.abs(xb0 - xa0) > 5940) continue; // faded out
      if (Math.max(xa0, xb0) < 0 || Math.min(xa0, xb0) > w) continue;
      const ya = Math.round(f.rowY(ix.arRowA[ai])), yb = Math.round(f.rowY(ix.arRowB[ai]));
      if ((ya < yTop && yb < yTop) || (ya > yBot && yb > yBot)) continue;
      const kd = kind[ai];
      const xr = Math.round(xa0), xs = Math.round(xb0), xa = xr + 0.5, xb = xs + 0.5;
      if (xr >= -2048 && xr < 6144 && xs >= -2048 && xs < 6144 && ya >= -1024 && ya < 3072 && yb >= -1024 && yb < 3072) {
        const key = ((((xr + 2048) * 8192 + xs + 2048) * 4096 + ya + 1024) * 4096 + yb + 1024) * 8 + kd; // < 2^53
        if (seen.has(key)) continue;
        seen.add(key);
      }
      out.count++;
      if (xr === xs && Math.abs(yb - ya) > 10) {
        out.vLines[kd].push(xr, ya, yb);
        out.nVert++;
        const dir = yb > ya ? -1 : 1, hk = ((xr + 2048) * 8192 + yb + 4096) * 16 + (dir + 1) * 4 + kd;
        if (!(xr >= -2048 && xr < 6144 && yb >= -4096 && yb < 4096) || !seen.has(-hk - 1)) {
          seen.add(-hk - 1);
          out.vHeads[kd].push(xr, yb, dir);
        }
        continue;
      }
      out.byKind[kd].push(xa, ya, xb, yb);
      if (Math.abs(yb - ya) > 10) { const dir = yb > ya ? -1 : 1; out.headsByKind[kd].push(xb - 3, yb + dir * 6, xb + 3, yb + dir * 6, xb, yb); }
      else { const dir = xb >= xa ? -1 : 1; out.headsByKind[kd].push(xb + dir * 6, yb - 3, xb + dir * 6, yb + 3, xb, yb); }
    }
    return out;
  }
  // The vertical arrows of arrows() as segments and triangles like the others (in place),
  // for a painter with no pixel layer or when they are few.
  function verticalsAsSegments(a) {
    for (let kd = 0; kd < ARROW_KINDS; kd++) {
      const V = a.vLines[kd], Hd = a.vHeads[kd];
      for (let q = 0; q < V.length; q += 3) a.byKind[kd].push(V[q] + 0.5, V[q + 1], V[q] + 0.5, V[q + 2]);
      for (let q = 0; q < Hd.length; q += 3) { const xb = Hd[q] + 0.5, yb = Hd[q + 1], dir = Hd[q + 2]; a.headsByKind[kd].push(xb - 3, yb + dir * 6, xb + 3, yb + dir * 6, xb, yb); }
    }
  }
  // Vertical lines of one kind (x, ya, yb triples in time order) with those of one column
  // that overlap or touch merged: x, top, height triples for the pixel layer.
  function mergedVerticals(V) {
    const out = [];
    let cx = NaN, c0 = 0, c1 = 0;
    for (let q = 0; q <= V.length; q += 3) {
      const y0 = q < V.length ? Math.min(V[q + 1], V[q + 2]) : 0, y1 = q < V.length ? Math.max(V[q + 1], V[q + 2]) : 0;
      if (q < V.length && V[q] === cx && y0 <= c1 && y1 >= c0) { c0 = Math.min(c0, y0); c1 = Math.max(c1, y1); continue; }
      if (!Number.isNaN(cx)) out.push(cx, c0, c1 - c0);
      if (q < V.length) { cx = V[q]; c0 = y0; c1 = y1; }
    }
    return out;
  }

  // Counter c as a step line on its group's scale sc, in the plot [plotTop, plotTop + plotH]:
  // per pixel column one vertical extent (min/max over its samples, from the pyramid) and
  // one horizontal run; columns with no sample are jumped over. geo holds [0, x0, x1, y]
  // runs and [1, x, top, bottom] columns in x order; lastY is the y at the right edge (null
  // when nothing is in view).
  function counterGeometry(c, sc, f, plotTop, plotH) {
    const yv = (v) => Math.round(plotTop + plotH - ((v - sc.min) / (sc.max - sc.min)) * plotH);
    const geo = [], nt = c.t.length;
    let k = lowerBound(c.t, f.vs, 0, nt);
    let runX = 0, runY = k > 0 ? yv(c.v[k - 1]) : null;
    while (k < nt && c.t[k] <= f.ve) {
      const x = Math.max(0, Math.floor(f.X(c.t[k])));
      const kb = Math.max(k + 1, gallop(c.t, f.vs + (x + 1) * f.pxNs, k, nt));
      const mm = rangeMinMax(c.mm, k, kb);
      let lo = yv(mm[1]), hi = yv(mm[0]);
      if (runY !== null) { geo.push(0, runX, x, runY); lo = Math.min(lo, runY); hi = Math.max(hi, runY); }
      geo.push(1, x, lo, hi);
      runX = x; runY = yv(c.v[kb - 1]);
      k = kb;
    }
    const lastY = runY;
    if (runY !== null) geo.push(0, runX, f.w, runY);
    return { geo: geo, lastY: lastY };
  }
  // The step line of counterGeometry's geo, sw px wide, as rectangles that do not overlap
  // (the shadow is translucent). With `snap`, edges on whole pixels: no anti-aliased edge to
  // blend, and more neighbours of the same extent merge.
  function stepRects(geo, w, sw, snap) {
    const hw = sw / 2, out = [], R = snap ? Math.round : (v) => v;
    let right = -Infinity;
    for (let q = 0; q < geo.length; q += 4) {
      if (geo[q] === 0) {
        const x0 = Math.max(R(geo[q + 1]), right), x1 = geo[q + 2] === w ? w : R(geo[q + 2] - hw);
        if (x1 > x0) { const y0 = R(geo[q + 3] - hw); addRun(out, x0, x1, y0, R(geo[q + 3] - hw + sw) - y0); right = x1; }
      } else { // neighbour columns of the same extent (dense counters) merge
        const x0 = Math.max(R(geo[q + 1] - hw), right), x1 = R(geo[q + 1] + hw);
        if (x1 > x0) { const y0 = R(geo[q + 2] - hw); addRun(out, x0, x1, y0, R(geo[q + 3] + hw) - y0); right = x1; }
      }
    }
    return out;
  }
  // Whether geo is dense (a sample in most pixel columns: drawn as a translucent band with no
  // outline), and for a dense one whether its columns' ends move little from one to the next
  // (cheap as one polygon, whose cost grows with the length of its vertical edges).
  function counterIsDense(geo) { return geo.length >= 4 * 2 * 256; }
  function smoothColumns(r) {
    let edges = 0;
    for (let q = 4; q < r.length; q += 4) edges += Math.abs(r[q + 1] - r[q - 3]) + Math.abs(r[q + 1] + r[q + 3] - r[q - 3] - r[q - 1]);
    return edges < 40 * r.length / 4;
  }
  // Where the y of a counter's name goes: by its line's last y, staggered by its index.
  function counterNameY(f, plotTop, lastY, ci) { return Math.max(plotTop + 12, Math.min(f.h - 4, lastY - 6 - 16 * (ci % 3))); }

  // Labels of the tasks in labelJobs (task, y pairs), packed left to right inside each task,
  // pinned to the left edge when it starts off-screen, `budget` in all: task, string index
  // (into T.strings), x, y (baseline), width allowed, five per label.
  function labelPlacements(ix, f, labelJobs, budget) {
    const L = ix.L, strings = ix.T.strings, out = [];
    for (let q = 0, placed = 0; q < labelJobs.length; q += 2) {
      const i = labelJobs[q], y = labelJobs[q + 1];
      const xEnd = Math.min(f.X(ix.end[i]), f.w);
      let xMin = Math.max(f.X(ix.start[i]), 0);
      for (let k = ix.labelStart[i]; k < ix.labelStart[i + 1] && placed < budget; k++) {
        const lx = Math.max(f.X(L.t[k]), xMin);
        if (lx >= xEnd - 8) break;
        const s = strings[L.s[k]];
        const maxw = xEnd - lx;
        out.push(i, L.s[k], lx + 2, y - 3, maxw);
        xMin = lx + Math.min(maxw, 7 * s.length + 6);
        placed++;
      }
    }
    return out;
  }
  // Allocation marks (a memory trace next to the tasks): samples per pixel column, as bars in
  // the strip under the ruler scaled to the fullest column. count: the marks in view.
  function markBars(ix, f) {
    const marks = ix.marks, cols = [], bars = [];
    let mx = 0, count = 0;
    const nm = marks.t.length;
    for (let k = lowerBound(marks.t, f.vs, 0, nm); k < nm && marks.t[k] <= f.ve;) {
      const x = Math.floor(f.X(marks.t[k]));
      const kb = Math.max(k + 1, gallop(marks.t, f.vs + (x + 1) * f.pxNs, k, nm));
      const sum = marks.sum[kb] - marks.sum[k];
      cols.push(x, sum);
      if (sum > mx) mx = sum;
      count += kb - k;
      k = kb;
    }
    for (let q = 0; q < cols.length; q += 2) {
      if (cols[q + 1] <= 0) continue;
      const hgt = Math.max(2, (cols[q + 1] / mx) * (MARKS - 6));
      bars.push(cols[q], RULER + MARKS - 1 - hgt, 1, hgt);
    }
    return { bars: bars, count: count };
  }

  // The lane strips (one per thread, under the allocation strip): each lane's running
  // periods in view as x, y, w, h rectangles (runs merged, at most one period started per
  // pixel column), tops[l] the y of strip l; count: the periods in view.
  function laneBars(ix, f) {
    const out = { bars: [], tops: [], count: 0 };
    if (!ix.lanes) return out;
    const X = f.X, y0 = RULER + ix.marksH + 2;
    ix.lanes.forEach((L, l) => {
      const y = y0 + l * LANEH, n = L.t0.length;
      out.tops.push(y);
      let k = lowerBound(L.reach, f.vs, 0, n);
      while (k < n && L.t0[k] <= f.ve) {
        const x0 = X(L.t0[k]), x1 = Math.max(X(L.t1[k]), x0 + 1);
        addRun(out.bars, x0, x1, y, LANEH - 2);
        out.count++;
        const j = gallop(L.t0, L.t0[k] + f.pxNs, k + 1, n);
        k = j > k + 1 && X(L.t1[k]) - x0 < 1 ? j : k + 1;
      }
    });
    return out;
  }

  // The task under the point (x, y) of a w x h canvas (CSS px): one whose row line is within
  // 8 px and whose span is within 16 px, the closest in time; -1 for none.
  function hitTask(ix, view, x, y, w, h) {
    const m = rowMap(ix, view, w, h);
    if (y < m.top) return -1; // the ruler and the allocation strip cover the rows under them
    const row = rowAt(m, view, y);
    if (row < 0) return -1;
    const start = ix.start, end = ix.end;
    const t = view.start + x / view.scale, tol = 16 / view.scale;
    const a = ix.rowStart[row], b = ix.rowStart[row + 1];
    let i = lowerBound(end, t - tol, a, b);
    let best = -1, bestD = Infinity;
    for (; i < b && start[i] <= t + tol; i++) {
      const d = t < start[i] ? start[i] - t : t > end[i] ? t - end[i] : 0;
      if (d < bestD) { bestD = d; best = i; }
    }
    return best;
  }
  // Where a pointer aims at task i: a little inside its start, on its row.
  function taskPoint(ix, view, i, w, h) {
    const x0 = xOf(view, ix.start[i]);
    return [x0 + Math.min(20, (xOf(view, ix.end[i]) - x0) / 2), mapY(rowMap(ix, view, w, h), view, ix.taskRow[i])];
  }
  // Task i and every task linked to it by `becomes`, both ways: a 0/1 flag per task, count.
  function becomesClosure(ix, i) {
    const n = ix.n, becomes = ix.becomes;
    if (!ix.becameFrom) {
      const from = (ix.becameFrom = new Map());
      for (let k = 0; k < n; k++) if (becomes[k] >= 0) { const l = from.get(becomes[k]); if (l) l.push(k); else from.set(becomes[k], [k]); }
    }
    const set = new Uint8Array(n), todo = [i];
    let count = 0;
    while (todo.length) {
      const k = todo.pop();
      if (set[k]) continue;
      set[k] = 1; count++;
      if (becomes[k] >= 0) todo.push(becomes[k]);
      for (const fr of ix.becameFrom.get(k) || []) todo.push(fr);
    }
    return { set: set, count: count };
  }
  // The tasks with a label containing q (case-insensitive): a 0/1 flag per task, count.
  function searchLabels(ix, q) {
    const strings = ix.T.strings, L = ix.L, needle = q.toLowerCase();
    const hitStr = new Uint8Array(strings.length);
    for (let s = 0; s < strings.length; s++) hitStr[s] = strings[s].toLowerCase().includes(needle) ? 1 : 0;
    const set = new Uint8Array(ix.n);
    let count = 0;
    for (let k = 0; k < ix.nl; k++) if (hitStr[L.s[k]] && !set[L.task[k]]) { set[L.task[k]] = 1; count++; }
    return { set: set, count: count };
  }

  // Arrow kinds (report_tasks.c, the model's CTS_LINK_*): a try_read's src waits for its dst;
  // a read's dst reads its src's result at t0 + dt.
  const K_TRY_READ = 0, K_READ = 1, K_FAILED_READ = 2;
  // Who acts in arrow a (the reader of a read, else src) and when.
  function actorOf(ix, a) { const k = ix.W.kind[a]; return k === K_READ || k === K_FAILED_READ ? ix.W.dst[a] : ix.W.src[a]; }
  function actTime(ix, a) { const k = ix.W.kind[a]; return k === K_READ || k === K_FAILED_READ ? ix.arT1[a] : ix.arT0[a]; }
  // The try_read arrows followed by a read of the same task by the same reader, with no other
  // interaction of the reader between: mirage-trace-viewer shows only the read (the wait
  // is over when it reads). A 0/1 flag per arrow, computed once.
  function tryReadsRead(ix) {
    if (ix.tryReadHidden) return ix.tryReadHidden;
    const nw = ix.nw, order = new Int32Array(nw), who = new Int32Array(nw), when = new Float64Array(nw);
    for (let a = 0; a < nw; a++) { order[a] = a; who[a] = actorOf(ix, a); when[a] = actTime(ix, a); }
    order.sort((a, b) => who[a] - who[b] || when[a] - when[b] || a - b);
    const hidden = new Uint8Array(nw), kind = ix.W.kind;
    for (let q = 0; q + 1 < nw; q++) {
      const a = order[q], b = order[q + 1];
      if (kind[a] === K_TRY_READ && (kind[b] === K_READ || kind[b] === K_FAILED_READ) && who[b] === ix.W.src[a] && ix.W.src[b] === ix.W.dst[a]) hidden[a] = 1;
    }
    return (ix.tryReadHidden = hidden);
  }
  // Bind simplification, as mirage-trace-viewer does it: a bind-like task (bind, try, map,
  // on_failure, on_termination, ignore_result) that is not what its parent becomes and whose
  // first act is to read another task's result (before any label on it, and before anyone
  // waited on it with a try_read) only matters from that read on: it starts at its wake-up
  // time and its creation link is not drawn. Chains of binds then show as the work they
  // wait for, not as lines back to where they were set up. Returns { start, parent, count }:
  // the start of every task and the parent to link it to (-1: none) with the binds
  // simplified, and how many were; computed once.
  const BIND_LIKE = new Set([2, 3, 7, 10, 11, 13]); // indexes of the viewer's TYPES
  function simplifiedBinds(ix) {
    if (ix.binds) return ix.binds;
    const T = ix.T, n = ix.n, nw = ix.nw, kind = ix.W.kind;
    const firstAct = new Float64Array(n).fill(Infinity), firstKind = new Int8Array(n).fill(-1);
    const firstChecked = new Float64Array(n).fill(Infinity);
    for (let a = 0; a < nw; a++) {
      const who = actorOf(ix, a), t = actTime(ix, a);
      if (t < firstAct[who]) { firstAct[who] = t; firstKind[who] = kind[a]; }
      if (kind[a] === K_TRY_READ && t < firstChecked[ix.W.dst[a]]) firstChecked[ix.W.dst[a]] = t;
    }
    const start = Float64Array.from(ix.start), parent = Int32Array.from(T.parent);
    let count = 0;
    for (let i = 0; i < n; i++) {
      const p = T.parent[i], wake = firstAct[i];
      if (!BIND_LIKE.has(T.type[i]) || firstKind[i] !== K_READ || !(wake < firstChecked[i])) continue;
      if (p >= 0 && ix.becomes[p] === i) continue;
      if (ix.labelStart[i] < ix.labelStart[i + 1] && ix.L.t[ix.labelStart[i]] < wake) continue;
      start[i] = Math.min(Math.max(start[i], wake), ix.end[i]);
      parent[i] = -1;
      count++;
    }
    return (ix.binds = { start: start, parent: parent, count: count });
  }
  // Switches the index between the trace's tasks and the simplified ones (in place): the
  // frames then draw and hit the tasks where simplifiedBinds puts them.
  function setSimplified(ix, on) {
    if (!ix.startTrace) ix.startTrace = ix.start;
    const b = on ? simplifiedBinds(ix) : null;
    ix.start = b ? b.start : ix.startTrace;
    ix.shownParent = b ? b.parent : null;
    ix.rowMapCache = null;
    return b ? b.count : 0;
  }

  const layout = {
    RULER: RULER, ROWH: ROWH, MARKS: MARKS, LANEH: LANEH, MAX_LANES: MAX_LANES, F_RESOLVED: F_RESOLVED, F_FAILED: F_FAILED, F_NEVER: F_NEVER,
    ARROW_KINDS: ARROW_KINDS, ARROW_BUDGET: ARROW_BUDGET,
    minMaxLevels: minMaxLevels, rangeMinMax: rangeMinMax, lowerBound: lowerBound, gallop: gallop,
    bandIndex: bandIndex, addRun: addRun, index: index, fit: fit, clampView: clampView, xOf: xOf,
    rowY: rowY, rowMap: rowMap, rowAt: rowAt, rowHeight: rowHeight, MINROWH: MINROWH, frame: frame, bandColumns: bandColumns, bandStrip: bandStrip, gridLines: gridLines,
    rulerLabel: rulerLabel, rulerPlacements: rulerPlacements, spreadLabels: spreadLabels, taskRows: taskRows, highlightBoxes: highlightBoxes, arrows: arrows,
    verticalsAsSegments: verticalsAsSegments, mergedVerticals: mergedVerticals,
    counterGeometry: counterGeometry, stepRects: stepRects, counterIsDense: counterIsDense,
    smoothColumns: smoothColumns, counterNameY: counterNameY, labelPlacements: labelPlacements,
    markBars: markBars, laneBars: laneBars, hitTask: hitTask, taskPoint: taskPoint, becomesClosure: becomesClosure,
    searchLabels: searchLabels, tryReadsRead: tryReadsRead, simplifiedBinds: simplifiedBinds,
    setSimplified: setSimplified, busyRange: busyRange, showRange: showRange,
  };
  if (typeof module === 'object' && module.exports) module.exports = layout; // node (tests)
  else window.ctsViewer.layout = layout;
})();
