// SPDX-License-Identifier: MIT
// The report timeline's geometry (src/report/viewer_layout.js), run by CTest in plain node:
// small task documents of the shape report_tasks.c writes go through the layout functions,
// and the rows, positions and overlaps they return are checked against values worked out by
// hand. What the page looks like is checked in a browser by tests/report/check_report.cjs.
//
// Usage: node check_viewer_layout.cjs VIEWER_LAYOUT_JS
// Exit status: 0 = all good, 1 = a check failed.
'use strict';
const assert = require('assert');
const path = require('path');

const layout = require(path.resolve(process.argv[2]));
let failures = 0, passes = 0;
function test(name, fn) {
  try {
    fn();
    passes++;
  } catch (e) {
    failures++;
    console.log('FAIL: ' + name + ': ' + (e && e.message));
  }
}
const near = (a, b, what) => assert.ok(Math.abs(a - b) < 1e-9, `${what}: ${a} != ${b}`);
const quads = (r) => { const out = []; for (let i = 0; i < r.length; i += 4) out.push(r.slice(i, i + 4)); return out; };

// A task document: tasks listed as [row, start, dur, {flags, parent, becomes, labels}], in
// row order then by start (as the report sorts them); times in ns.
function doc(tasks, extra) {
  const n = tasks.length, rows = tasks.length ? tasks[tasks.length - 1][0] + 1 : 0;
  const T = {
    n: n, rows: rows, row_n: new Array(rows).fill(0), start: new Float64Array(n), dur: new Float64Array(n),
    id: tasks.map((t, i) => 100 + i), parent: new Int32Array(n).fill(-1), becomes: new Int32Array(n),
    flags: new Uint8Array(n), type: new Uint8Array(n), labels: { task: [], t: [], s: [] }, strings: [],
    acts: { task: [], t0: [], dur: [] }, arrows: { kind: [], t0: [], dt: [], src: [], dst: [] },
    counters: [], idle: [], gc: [], marks: null, first: 0, end: 0, mem: null,
  };
  tasks.forEach(([row, start, dur, o], i) => {
    o = o || {};
    T.row_n[row]++;
    T.start[i] = start; T.dur[i] = dur;
    T.flags[i] = o.flags === undefined ? layout.F_RESOLVED : o.flags;
    if (o.parent !== undefined) T.parent[i] = o.parent;
    if (o.becomes !== undefined) T.becomes[i] = o.becomes - i; // relative, as in the document
    for (const [t, s] of o.labels || []) { T.labels.task.push(i); T.labels.t.push(t); T.labels.s.push(T.strings.push(s) - 1); }
    T.end = Math.max(T.end, start + dur);
  });
  return Object.assign(T, extra || {});
}
// A viewport of `scale` px per ns from `start`, not scrolled.
const view = (start, scale) => ({ start: start, scale: scale, y: 0 });

test('binary searches', () => {
  const a = [1, 3, 3, 5, 9, 12, 12, 20];
  for (let v = 0; v <= 21; v++) {
    const want = a.findIndex((x) => x >= v) < 0 ? a.length : a.findIndex((x) => x >= v);
    assert.strictEqual(layout.lowerBound(a, v, 0, a.length), want, 'lowerBound ' + v);
    for (let lo = 0; lo <= want; lo++) assert.strictEqual(layout.gallop(a, v, lo, a.length), want, 'gallop ' + v + ' from ' + lo);
  }
});

test('min/max pyramid answers every range like a scan', () => {
  const v = new Float64Array(1000);
  for (let i = 0; i < v.length; i++) v[i] = ((i * 7919) % 1013) - 500;
  const lv = layout.minMaxLevels(v);
  assert.ok(lv.length >= 2, 'a 1000-value array has a coarser level');
  for (const [i, j] of [[0, 1000], [0, 1], [5, 37], [16, 32], [17, 300], [250, 999], [999, 1000], [31, 545]]) {
    let lo = Infinity, hi = -Infinity;
    for (let k = i; k < j; k++) { lo = Math.min(lo, v[k]); hi = Math.max(hi, v[k]); }
    assert.deepStrictEqual(layout.rangeMinMax(lv, i, j), [lo, hi], `[${i}, ${j})`);
  }
});

test('index: rows, ends, becomes, labels and arrows by row', () => {
  const T = doc([[0, 0, 100, { labels: [[10, 'a'], [50, 'b']] }], [0, 200, 50, { becomes: 3 }], [1, 20, 30, { parent: 0 }], [2, 260, 40]], {
    arrows: { kind: [1, 3], t0: [30, 240], dt: [5, -10], src: [0, 1], dst: [2, 3] },
  });
  const ix = layout.index(T);
  assert.deepStrictEqual(Array.from(ix.rowStart), [0, 2, 3, 4]);
  assert.deepStrictEqual(Array.from(ix.taskRow), [0, 0, 1, 2]);
  assert.deepStrictEqual(Array.from(ix.end), [100, 250, 50, 300]);
  assert.deepStrictEqual(Array.from(ix.becomes), [-1, 3, -1, -1]);
  assert.deepStrictEqual(Array.from(ix.labelStart), [0, 2, 2, 2, 2]);
  assert.deepStrictEqual(Array.from(ix.arMin), [30, 230], 'an arrow is found by its earlier end');
  assert.deepStrictEqual([Array.from(ix.arRowA), Array.from(ix.arRowB)], [[0, 0], [1, 2]]);
  assert.deepStrictEqual([ix.t0, ix.t1, ix.marksH], [0, 300, 0]);
});

test('fit shows the whole trace, clampView bounds zoom and scroll', () => {
  const ix = layout.index(doc([[0, 0, 1000], [1, 500, 500]]));
  const v = view(123, 5);
  v.y = 77;
  layout.fit(ix, v, 1040);
  near(v.scale, 1, 'fit: 1020 px (20 for the margins) for 1000 ns x 1.02');
  near(v.start, -10, 'fit: 1 % margin on the left');
  assert.strictEqual(v.y, 0);
  const z = view(0, 1e9);
  layout.clampView(ix, z, 1020, 600);
  assert.strictEqual(z.scale, 100, 'at most 100 px per ns');
  const o = view(-1e9, 1e-9);
  o.y = 1e6;
  layout.clampView(ix, o, 1020, 600);
  near(o.scale, 1000 / 1050, 'zoomed out to the whole trace (+5 %) at most');
  assert.ok(o.start >= ix.t0 - (1020 / o.scale) / 2 - 1e-6, 'half the view stays on the trace');
  assert.strictEqual(o.y, 0, 'two rows fit: no scrolling');
});

test('tasks of a row: positions, one run per gapless stretch, no overlap between rows', () => {
  // Row 0: two tasks 100 ns apart; row 1: a failed one; row 2: a pending one, child of 0.
  const T = doc([[0, 0, 100], [0, 200, 100], [1, 50, 100, { flags: layout.F_FAILED }], [2, 100, 150, { flags: 0, parent: 0 }]]);
  const ix = layout.index(T);
  const f = layout.frame(ix, view(0, 1), 800, 400);
  assert.deepStrictEqual([f.r0, f.r1, f.top], [0, 2, layout.RULER]);
  const r = layout.taskRows(ix, f);
  const y0 = layout.RULER + 14;
  assert.deepStrictEqual(quads(r.lineRuns), [[0, y0 - 1, 100, 2], [200, y0 - 1, 100, 2], [100, y0 + 2 * layout.ROWH - 1, 150, 2]]);
  assert.deepStrictEqual(quads(r.failRuns), [[50, y0 + layout.ROWH - 1, 100, 2], [149, y0 + layout.ROWH - 8, 2, 16]], 'a failed task is red with a tick at its end');
  assert.deepStrictEqual(quads(r.links), [[99.5, y0, 1, 2 * layout.ROWH]], 'a 1-px link from the child up to its parent row');
  assert.deepStrictEqual(r.heads, [250, y0 + 29, 254, y0 + 32, 250, y0 + 35], 'a pending task ends in an arrow head');
  assert.deepStrictEqual([r.tasks, r.rows], [4, 3]);
  // Rows never share a y band: every run lies within its row's line +-8 px.
  for (const q of quads(r.lineRuns.concat(r.failRuns))) {
    const row = Math.round((q[1] + q[3] / 2 - y0) / layout.ROWH);
    assert.ok(q[1] >= y0 + row * layout.ROWH - 8 && q[1] + q[3] <= y0 + row * layout.ROWH + 8, 'run ' + q + ' leaves its row');
  }
});

test('back-to-back tasks merge into one run; tiny ones are one per pixel column', () => {
  const tasks = [];
  for (let i = 0; i < 10; i++) tasks.push([0, i * 10, 10]); // 0..100 gapless
  for (let i = 0; i < 1000; i++) tasks.push([0, 1000 + i, 0.5]); // 1000 tasks in 1000 ns
  const ix = layout.index(doc(tasks));
  const f = layout.frame(ix, view(0, 0.1), 800, 200); // 10 ns per px
  const r = layout.taskRows(ix, f);
  const runs = quads(r.lineRuns);
  near(runs[0][0], 0, 'first run starts at 0');
  near(runs[0][2], 10, 'ten gapless tasks are one 10-px run');
  assert.strictEqual(r.tasks, 10 + 100, 'the 1000 tiny tasks cost one task per pixel column');
  for (let k = 1; k < runs.length; k++) assert.ok(runs[k][0] >= runs[k - 1][0] + runs[k - 1][2] - 0.5, 'runs of a row do not overlap');
});

test('rows out of view are skipped; scrolling moves them', () => {
  const tasks = [];
  for (let r = 0; r < 100; r++) tasks.push([r, 0, 100]);
  const ix = layout.index(doc(tasks));
  const v = view(0, 1);
  v.y = 50 * layout.ROWH;
  const f = layout.frame(ix, v, 200, 200);
  const r = layout.taskRows(ix, f);
  const ys = quads(r.lineRuns).map((q) => q[1] + 1);
  assert.ok(r.rows > 0 && r.rows < 20, 'a 200-px canvas shows about 10 of 100 rows, not ' + r.rows);
  for (const y of ys) assert.ok(y >= f.top - 4 && y <= 204, 'row line at ' + y + ' is out of view');
  assert.strictEqual(layout.rowY(v, 50), layout.RULER + 14, 'row 50 is at the top when scrolled by 50 rows');
});

test('hitTask finds the task under the pointer, within tolerance', () => {
  const ix = layout.index(doc([[0, 0, 100], [0, 300, 100], [1, 150, 10]]));
  const v = view(0, 1), y0 = layout.rowY(v, 0);
  assert.strictEqual(layout.hitTask(ix, v, 50, y0), 0);
  assert.strictEqual(layout.hitTask(ix, v, 310, y0 + 3), 1);
  assert.strictEqual(layout.hitTask(ix, v, 110, y0), 0, '10 px after the end is still the task');
  assert.strictEqual(layout.hitTask(ix, v, 200, y0), -1, '100 px from both is nothing');
  assert.strictEqual(layout.hitTask(ix, v, 155, layout.rowY(v, 1)), 2);
  assert.strictEqual(layout.hitTask(ix, v, 50, y0 + 9), -1, 'too far from the line');
  const [x, y] = layout.taskPoint(ix, v, 1);
  assert.strictEqual(layout.hitTask(ix, v, x, y), 1, 'taskPoint aims at the task');
});

test('highlights: one box per task, thinned per pixel column', () => {
  const tasks = [[0, 0, 100], [0, 200, 100]];
  for (let i = 0; i < 50; i++) tasks.push([1, 1000 + i * 0.1, 0.05]);
  const ix = layout.index(doc(tasks));
  const f = layout.frame(ix, view(0, 1), 2000, 200);
  const all = Array.from({ length: tasks.length }, (_, i) => i);
  const hl = layout.highlightBoxes(ix, f, all);
  assert.strictEqual(hl.count, 2 + 5, '50 tasks in 5 px: one box per pixel column');
  assert.deepStrictEqual(quads(hl.boxes)[0], [-3, layout.rowY(f.view, 0) - 4, 106, 8]);
  assert.strictEqual(layout.highlightBoxes(ix, f, [1]).count, 1);
});

test('arrows: slanted with their own head, vertical ones apart, duplicates dropped', () => {
  const T = doc([[0, 0, 1000], [1, 0, 1000], [2, 0, 1000]], {
    arrows: { kind: [1, 1, 3, 0], t0: [100, 100, 500, 700], dt: [0, 0, 50, 0], src: [0, 0, 1, 2], dst: [2, 2, 2, 2] },
  });
  const ix = layout.index(T);
  const f = layout.frame(ix, view(0, 1), 1000, 300);
  const a = layout.arrows(ix, f);
  const ya = Math.round(layout.rowY(f.view, 0)), yc = Math.round(layout.rowY(f.view, 2)), yb = Math.round(layout.rowY(f.view, 1));
  assert.strictEqual(a.count, 3, 'the second read arrow, identical to the first, is left out: ' + a.count);
  assert.deepStrictEqual(a.vLines[1], [100, ya, yc], 'a vertical arrow 0 -> 2');
  assert.deepStrictEqual(a.vHeads[1], [100, yc, -1], 'its head at the lower end, pointing down (extends up)');
  assert.deepStrictEqual(a.byKind[3], [500.5, yb, 550.5, yc], 'a slanted resolve arrow');
  assert.strictEqual(a.headsByKind[3].length, 6);
  assert.deepStrictEqual(a.byKind[0], [700.5, yc, 700.5, yc], 'an arrow inside a row is not vertical: it gets a sideways head');
  assert.deepStrictEqual(a.headsByKind[0], [694.5, yc - 3, 694.5, yc + 3, 700.5, yc]);
  layout.verticalsAsSegments(a);
  assert.deepStrictEqual(a.byKind[1], [100.5, ya, 100.5, yc]);
  assert.deepStrictEqual(a.headsByKind[1], [97.5, yc - 6, 103.5, yc - 6, 100.5, yc]);
});

test('arrows above the budget are sampled by a power-of-two stride', () => {
  const N = 3 * layout.ARROW_BUDGET;
  const W = { kind: [], t0: [], dt: [], src: [], dst: [] };
  for (let i = 0; i < N; i++) { W.kind.push(i % 5); W.t0.push(i / 10); W.dt.push(0); W.src.push(0); W.dst.push(1); }
  const ix = layout.index(doc([[0, 0, N / 10], [1, 0, N / 10]], { arrows: W }));
  const f = layout.frame(ix, view(0, 1), 4000, 300);
  const a = layout.arrows(ix, f);
  assert.strictEqual(a.stride, 4);
  assert.ok(a.count <= layout.ARROW_BUDGET);
});

test('mergedVerticals joins overlapping lines of one column only', () => {
  assert.deepStrictEqual(layout.mergedVerticals([5, 10, 40, 5, 30, 60, 5, 100, 120, 6, 0, 10]), [5, 10, 50, 5, 100, 20, 6, 0, 10]);
  assert.deepStrictEqual(layout.mergedVerticals([]), []);
});

test('counters: step geometry on the group scale, step rectangles do not overlap', () => {
  const c = { name: 'q', t: [0, 100, 200, 300], v: [0, 10, 5, 10] };
  const ix = layout.index(doc([[0, 0, 400]], { counters: [c] }));
  const f = layout.frame(ix, view(0, 1), 400, 200);
  const sc = ix.scales.q;
  assert.deepStrictEqual([sc.min, sc.max], [0, 10]);
  const { geo, lastY } = layout.counterGeometry(ix.counters[0], sc, f, 100, 100);
  assert.strictEqual(lastY, 100, 'the last value (the maximum) is at the plot top');
  assert.deepStrictEqual(geo.slice(0, 8), [1, 0, 200, 200, 0, 0, 100, 200], 'a column at 0, then a run at 0 to x = 100');
  assert.ok(!layout.counterIsDense(geo));
  assert.deepStrictEqual(quads(layout.stepRects(geo, 400, 3))[0], [-1.5, 198.5, 100, 3], 'a 3-px line centred on the step, the column merged into the run');
  for (const sw of [3, 5]) {
    const r = quads(layout.stepRects(geo, 400, sw));
    assert.ok(r.length > 0);
    for (let i = 0; i < r.length; i++)
      for (let j = i + 1; j < r.length; j++) {
        const [a, b] = [r[i], r[j]];
        const ox = Math.min(a[0] + a[2], b[0] + b[2]) - Math.max(a[0], b[0]), oy = Math.min(a[1] + a[3], b[1] + b[3]) - Math.max(a[1], b[1]);
        assert.ok(!(ox > 1e-9 && oy > 1e-9), `step rectangles ${a} and ${b} overlap`);
      }
  }
});

test('bands: coverage per pixel column and their names', () => {
  const ix = layout.index(doc([[0, 0, 1000]], { idle: [100, 150, 400, 900] }));
  const f = layout.frame(ix, view(0, 0.1), 100, 200); // 10 ns per column
  const cov = new Float32Array(100), texts = [];
  const cols = layout.bandColumns(ix.idle, f, cov, 'sleeping', texts);
  assert.strictEqual(cols, 5 + 50);
  near(cov[9], 0, 'before the band');
  near(cov[10], 1, 'inside it');
  near(cov[15], 0, 'after it');
  assert.deepStrictEqual(texts, [65, 'sleeping'], 'only the 50-px band is wide enough for its name');
  const rgb = layout.bandStrip(cov, new Float32Array(100));
  assert.deepStrictEqual([rgb[0], rgb[30], rgb[31], rgb[32]], [230, 204, 204, 204]);
});

test('labels are packed left to right inside their task, within the budget', () => {
  const ix = layout.index(doc([[0, 0, 300, { labels: [[0, 'first'], [10, 'second'], [250, 'third'], [295, 'late']] }]]));
  const f = layout.frame(ix, view(0, 1), 1000, 200);
  const r = layout.taskRows(ix, f);
  assert.deepStrictEqual(r.labelJobs, [0, layout.rowY(f.view, 0)]);
  const l = layout.labelPlacements(ix, f, r.labelJobs, 4000);
  assert.strictEqual(l.length / 5, 3, 'the last one, 5 px before the end, is left out');
  assert.deepStrictEqual([l[2], l[7], l[12]], [2, 43, 252], 'the second waits for the first (7 px a character + 6)');
  near(l[14], 50, 'the last label may use the task up to its end');
  assert.strictEqual(layout.labelPlacements(ix, f, r.labelJobs, 1).length, 5);
});

test('allocation marks: one bar per pixel column scaled to the fullest', () => {
  const ix = layout.index(doc([[0, 0, 100]], { marks: { t: [0, 0.2, 10, 50], s: [1, 1, 4, 2] } }));
  assert.strictEqual(ix.marksH, layout.MARKS);
  const f = layout.frame(ix, view(0, 1), 100, 200);
  const m = layout.markBars(ix, f);
  assert.strictEqual(m.count, 4);
  const full = layout.MARKS - 6;
  assert.deepStrictEqual(quads(m.bars).map((q) => [q[0], q[3]]), [[0, full / 2], [10, full], [50, full / 2]]);
});

test('with allocation marks, the first row is under the strip, not behind it', () => {
  const ix = layout.index(doc([[0, 0, 100], [1, 0, 50]], { marks: { t: [0], s: [1] } }));
  const v = view(0, 1), f = layout.frame(ix, v, 200, 300);
  assert.ok(f.rowY(0) - 4 >= f.top, `row 0 at y ${f.rowY(0)}, the rows start at ${f.top}`);
  const r = layout.taskRows(ix, f);
  assert.strictEqual(r.tasks, 2, 'both tasks are drawn');
  assert.strictEqual(layout.hitTask(ix, v, 50, f.rowY(0)), 0);
  assert.strictEqual(layout.hitTask(ix, v, 20, f.rowY(1)), 1);
  const [x, y] = layout.taskPoint(ix, v, 1);
  assert.strictEqual(layout.hitTask(ix, v, x, y), 1, 'taskPoint aims at the task');
});

test('a lane strip per thread: its running periods; the rows start under the strips', () => {
  // Task 0 runs on lane 0 over [0, 40) and [60, 70); task 1 on lane 1 over [10, 30).
  const T = doc([[0, 0, 100], [1, 0, 50]], { lanes: 2, acts: { task: [0, 0, 1], t0: [0, 60, 10], dur: [40, 10, 20], lane: [0, 0, 1] } });
  const ix = layout.index(T);
  assert.strictEqual(ix.lanesH, 2 * layout.LANEH + 4);
  const f = layout.frame(ix, view(0, 1), 200, 300);
  assert.strictEqual(f.top, layout.RULER + ix.lanesH);
  assert.ok(f.rowY(0) - 4 >= f.top, `row 0 at y ${f.rowY(0)}, the rows start at ${f.top}`);
  const lb = layout.laneBars(ix, f);
  assert.strictEqual(lb.count, 3);
  const y0 = layout.RULER + 2, h = layout.LANEH - 2;
  assert.deepStrictEqual(quads(lb.bars), [[0, y0, 40, h], [60, y0, 10, h], [10, y0 + layout.LANEH, 20, h]]);
  // One lane (a single-threaded trace): no strip, nothing moves.
  const one = layout.index(doc([[0, 0, 100]], { lanes: 1, acts: { task: [0], t0: [0], dur: [10], lane: [0] } }));
  assert.strictEqual(one.lanesH, 0);
  assert.strictEqual(layout.laneBars(one, layout.frame(one, view(0, 1), 200, 300)).count, 0);
});

test('search and becomes closure', () => {
  const ix = layout.index(doc([[0, 0, 10, { labels: [[0, 'RX-1']], becomes: 1 }], [0, 20, 10, { becomes: 2 }], [1, 0, 30, { labels: [[0, 'tx']] }], [2, 0, 5]]));
  const s = layout.searchLabels(ix, 'rx');
  assert.deepStrictEqual([Array.from(s.set), s.count], [[1, 0, 0, 0], 1]);
  const b = layout.becomesClosure(ix, 1);
  assert.deepStrictEqual([Array.from(b.set), b.count], [[1, 1, 1, 0], 3]);
});

test('ruler labels: relative time and, with a start time, the wall clock', () => {
  assert.strictEqual(layout.rulerLabel(1.5e9, 1e8, 0), '1.5 s');
  assert.strictEqual(layout.rulerLabel(2e9, 1e9, 1e15), '2 s  01:46:42.000');
  const g = layout.gridLines(layout.frame(layout.index(doc([[0, 0, 1000]])), view(0, 1), 450, 100));
  assert.deepStrictEqual([g.step, g.ticks], [100, [0, 100, 200, 300, 400]]);
});

test('row 0 lies under the allocation strip, and is drawn and hit there', () => {
  // A memory trace next to the tasks adds the marks strip under the ruler: the rows start
  // under it, so row 0 is not hidden behind it.
  const ix = layout.index(doc([[0, 0, 100], [1, 0, 100]], { marks: { t: [10], s: [1] } }));
  const v = view(0, 1), f = layout.frame(ix, v, 400, 300);
  assert.strictEqual(f.rowY(0), layout.RULER + layout.MARKS + 14);
  const r = layout.taskRows(ix, f);
  assert.deepStrictEqual([r.rows, r.tasks], [2, 2], 'both rows and tasks are drawn');
  assert.strictEqual(layout.hitTask(ix, v, 50, f.rowY(0), 400, 300), 0, 'row 0 is under the pointer at its line');
});

test('compact rows: only the rows active in view, squeezed until all fit', () => {
  // 300 rows, each with one task; rows 100..199 run in [1000, 2000), the others in [0, 500).
  const tasks = [];
  for (let r = 0; r < 300; r++) tasks.push(r >= 100 && r < 200 ? [r, 1000, 1000] : [r, 0, 500]);
  const ix = layout.index(doc(tasks));
  const v = Object.assign(view(1000, 0.4), { compact: true }); // [1000, 2000) in 400 px
  const f = layout.frame(ix, v, 400, 600);
  const r = layout.taskRows(ix, f);
  assert.deepStrictEqual([r.rows, r.tasks], [100, 100], 'the 100 active rows are drawn, the others not');
  const y100 = f.rowY(100), y199 = f.rowY(199);
  assert.ok(y100 >= f.top && y199 <= 600 && y199 > y100, `the active rows are on screen: ${y100}..${y199}`);
  assert.ok(f.rowh >= layout.MINROWH && f.rowh < layout.ROWH, 'squeezed rows: ' + f.rowh);
  assert.ok(f.rowY(0) < f.top - 4, 'an inactive row is not shown');
  assert.strictEqual(layout.hitTask(ix, v, 50, f.rowY(150), 400, 600), 150, 'a squeezed row is hit at its line');
  const [x, y] = layout.taskPoint(ix, v, 160, 400, 600);
  assert.strictEqual(layout.hitTask(ix, v, x, y, 400, 600), 160, 'taskPoint aims at the task in a compacted view');
  // Without compaction, rows 100..199 are far below a 600-px view (the defect: "drawn: 1 tasks").
  const g = layout.frame(ix, view(1000, 0.4), 400, 600);
  assert.strictEqual(layout.taskRows(ix, g).tasks, 0, 'uncompacted, none of the active rows is on screen');
  // Few active rows keep their full height; scrolling is bounded by them.
  const v2 = Object.assign(view(0, 0.8), { compact: true, y: 1e6 }); // [0, 500): 200 rows
  layout.clampView(ix, v2, 400, 600);
  const f2 = layout.frame(ix, v2, 400, 600);
  assert.ok(f2.rowh === layout.MINROWH, '200 rows in 600 px: ' + f2.rowh);
  assert.ok(f2.rowY(299) <= 600 + layout.ROWH, 'the last active row can be scrolled to: ' + f2.rowY(299));
});

test('ruler labels never overlap and stay inside the canvas', () => {
  const ix = layout.index(doc([[0, 0, 1e6]]));
  const f = layout.frame(ix, view(0, 1), 1000, 200); // 1 px per ns: 100-ns grid
  const g = layout.gridLines(f);
  const widths = g.ticks.map((t) => 7 * layout.rulerLabel(t, g.step, 1.6e15).length); // 'x s  hh:mm:ss.mmmuuu'
  const p = layout.rulerPlacements(f, g, widths);
  assert.ok(p.length >= 6, 'some labels are drawn: ' + p.length / 3);
  for (let q = 0; q < p.length; q += 3) {
    assert.ok(p[q + 1] >= 0 && p[q + 1] + p[q + 2] <= 1000, 'label ' + p[q] + ' is outside the canvas');
    if (q) assert.ok(p[q + 1] >= p[q - 2] + p[q - 1] + 12, 'labels ' + p[q - 3] + ' and ' + p[q] + ' overlap');
  }
});

test('spreadLabels moves overlapping labels apart, in order, inside the bounds', () => {
  assert.deepStrictEqual(layout.spreadLabels([50, 52, 51, 200], 14, 20, 300), [50, 78, 64, 200]);
  assert.deepStrictEqual(layout.spreadLabels([295, 299], 14, 20, 300), [286, 300]);
  assert.deepStrictEqual(layout.spreadLabels([5], 14, 20, 300), [20]);
});

test('fit leaves view.marginR px free on the right', () => {
  const ix = layout.index(doc([[0, 0, 1000]]));
  const v = Object.assign(view(0, 1), { marginR: 100 });
  layout.fit(ix, v, 1140);
  layout.clampView(ix, v, 1140, 400);
  assert.ok(layout.xOf(v, 1000) <= 1140 - 100, 'the trace ends at ' + layout.xOf(v, 1000));
});

test('a try_read followed by the read of the same task is merged into the read', () => {
  // Task 1 try_reads task 0 at 10 and reads it at 30 (merged); task 2 try_reads 0 at 12, then
  // signals task 1 at 20 before reading 0 at 40 (kept: something happened in between).
  const T = doc([[0, 0, 25], [1, 0, 50], [2, 0, 50]], {
    arrows: { kind: [0, 0, 4, 1, 1], t0: [10, 12, 20, 25, 25], dt: [0, 0, 0, 5, 15], src: [1, 2, 2, 0, 0], dst: [0, 0, 1, 1, 2] },
  });
  const ix = layout.index(T);
  assert.deepStrictEqual(Array.from(layout.tryReadsRead(ix)), [1, 0, 0, 0, 0]);
  const v = Object.assign(view(0, 10), { mergeReads: true });
  const on = layout.arrows(ix, layout.frame(ix, v, 600, 300));
  const off = layout.arrows(ix, layout.frame(ix, view(0, 10), 600, 300));
  assert.deepStrictEqual([on.count, on.merged, off.count, off.merged], [4, 1, 5, 0]);
});

test('bind simplification: a bind that first reads starts when it wakes, without its creation link', () => {
  // Task 0 (main) creates binds 1 and 2 at 0 and 5. Bind 1 reads task 3 at 40 (simplified);
  // bind 2 is try_read by main first (kept); task 3 is a plain task (kept).
  const T = doc([[0, 0, 100], [1, 0, 60, { parent: 0 }], [2, 5, 90, { parent: 0 }], [3, 10, 30, { parent: 0 }]], {
    arrows: { kind: [1, 0, 1], t0: [40, 20, 50], dt: [0, 0, 0], src: [3, 0, 3], dst: [1, 2, 2] },
  });
  T.type[1] = 2; T.type[2] = 2; T.type[3] = 1; // bind, bind, task (the viewer's TYPES)
  const ix = layout.index(T);
  const b = layout.simplifiedBinds(ix);
  assert.deepStrictEqual([Array.from(b.start), Array.from(b.parent), b.count], [[0, 40, 5, 10], [-1, -1, 0, 0], 1]);
  const links = () => quads(layout.taskRows(ix, layout.frame(ix, view(0, 4), 600, 300)).links).map((q) => q[0]);
  assert.deepStrictEqual(links(), [-0.5, 19.5, 39.5], 'before: every child links to its creator');
  assert.strictEqual(layout.setSimplified(ix, true), 1);
  assert.deepStrictEqual(links(), [19.5, 39.5], 'simplified: bind 1 has no creation link');
  const r = layout.taskRows(ix, layout.frame(ix, view(0, 4), 600, 300));
  assert.strictEqual(quads(r.lineRuns).find((q) => q[1] === layout.rowY(view(0, 4), 1) - 1)[0], 160, 'bind 1 starts at its wake-up');
  layout.setSimplified(ix, false);
  assert.deepStrictEqual(links(), [-0.5, 19.5, 39.5], 'the toggle restores the trace');
});

test('no task is hit through the ruler when rows are scrolled under it', () => {
  const tasks = [];
  for (let r = 0; r < 40; r++) tasks.push([r, 0, 100]);
  const ix = layout.index(doc(tasks));
  const v = view(0, 1);
  v.y = 10 * layout.ROWH; // row 8's line is at y 12, under the ruler
  assert.ok(layout.rowY(v, 8) > 0 && layout.rowY(v, 8) < layout.RULER);
  assert.strictEqual(layout.hitTask(ix, v, 50, layout.rowY(v, 8), 400, 300), -1);
  assert.strictEqual(layout.hitTask(ix, v, 50, layout.rowY(v, 12), 400, 300), 12, 'a row below the ruler is hit');
});

test('compact rows keep the row an arrow in view comes from', () => {
  // Task 0 (row 0) resolves at 100; task 1 (row 1) reads its result at 1500; task 2 (row 2)
  // is not involved. In view [1000, 2000): rows 0 (the arrow's other end) and 1, not row 2.
  const ix = layout.index(doc([[0, 0, 100], [1, 0, 2000], [2, 0, 500]], {
    arrows: { kind: [1], t0: [100], dt: [1400], src: [0], dst: [1] },
  }));
  const v = Object.assign(view(1000, 0.4), { compact: true });
  const m = layout.rowMap(ix, v, 400, 600);
  assert.deepStrictEqual(Array.from(m.active), [0, 1]);
  const f = layout.frame(ix, v, 400, 600);
  const a = layout.arrows(ix, f);
  assert.strictEqual(a.count, 1);
  assert.ok(f.rowY(0) >= f.top && f.rowY(2) < f.top - 4, 'row 0 shown, row 2 not');
});

test('fisheye: full-height rows around the focus, the others squeezed, all on screen', () => {
  const tasks = [];
  for (let r = 0; r < 200; r++) tasks.push([r, 0, 1000]);
  const ix = layout.index(doc(tasks));
  const v = Object.assign(view(0, 0.4), { compact: true, fisheye: true, focus: 100 });
  const f = layout.frame(ix, v, 400, 600);
  const [f0, nFull] = f.lens;
  assert.ok(nFull >= 10 && f0 <= 100 && f0 + nFull > 100, 'the lens covers the focus: ' + f.lens);
  for (let r = 0; r < 200; r++) {
    const inLens = r >= f0 && r < f0 + nFull;
    assert.strictEqual(f.rowHeight(r), inLens ? layout.ROWH : f.rowh, 'row ' + r + ' height');
    if (r) assert.ok(f.rowY(r) - f.rowY(r - 1) >= Math.min(f.rowHeight(r), f.rowHeight(r - 1)) - 1e-9, 'rows in order, apart');
  }
  assert.ok(f.rowY(0) >= f.top && f.rowY(199) <= 600, 'all 200 rows on screen');
  assert.strictEqual(layout.taskRows(ix, f).tasks, 200);
  assert.strictEqual(layout.hitTask(ix, v, 50, f.rowY(f0 + 1), 400, 600), f0 + 1, 'a lens row is hit at its line');
  const [x, y] = layout.taskPoint(ix, v, 20, 400, 600);
  assert.strictEqual(layout.hitTask(ix, v, x, y, 400, 600), 20, 'and a squeezed one');
  v.focus = 0;
  assert.strictEqual(layout.frame(ix, v, 400, 600).lens[0], 0, 'moving the focus moves the lens');
});

test('busyRange: where nine in ten tasks start, unless that is a quarter of the trace', () => {
  const tasks = [];
  for (let i = 0; i < 95; i++) tasks.push([i, 1000 + 10 * i, 5]); // 95 tasks in [1000, 1950)
  for (let i = 0; i < 5; i++) tasks.push([95 + i, 20000 * (i + 1), 5]); // 5 up to 100 000
  const ix = layout.index(doc(tasks));
  assert.deepStrictEqual(layout.busyRange(ix), [1000, 1890]);
  const v = view(0, 1);
  layout.showRange(v, 1000, 1890, 1000);
  near(v.start, 1000 - 44.5, 'a 5 % margin on the left');
  near(layout.xOf(v, 1890), 1000 - 20 - 44.5 * v.scale, 'and on the right');
  const spread = [];
  for (let i = 0; i < 100; i++) spread.push([i, 1000 * i, 5]);
  assert.strictEqual(layout.busyRange(layout.index(doc(spread))), null, 'activity spread out: the whole trace');
});

console.log(passes + ' passed, ' + failures + ' failed');
process.exit(failures ? 1 : 0);
