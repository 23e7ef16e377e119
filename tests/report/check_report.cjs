// SPDX-License-Identifier: MIT
// Browser tests of `ctfscope report`, run by CTest: each report is opened in headless Debian
// chromium (driven by playwright-core) and checked on the page itself.
//
// Usage: node check_report.cjs CTFSCOPE GEN_REPORT_TRACES WRITE_TRACE CORPUS_DIR OUT_DIR
// Exit status: 0 = all good, 1 = a check failed, 77 = skipped (chromium or node_modules
// missing: `apt-get install -y chromium` and `npm ci` in tests/report), unless CI=true,
// where anything missing is a failure. Screenshots go to OUT_DIR (test artifacts).
// BENCH_TASKS=N (environment) also measures pan/zoom frame times on an N-task trace
// (bench/report_bench.cjs measures more, and more carefully: bench/README.md).
'use strict';
const fs = require('fs');
const path = require('path');
const os = require('os');
const { execFileSync } = require('child_process');

const SKIP = 77;
const ci = process.env.CI === 'true';
const [ctfscope, genTraces, writeTrace, corpus, outDir] = process.argv.slice(2);
const chromiumPath = '/usr/bin/chromium';
const modules = path.join(__dirname, 'node_modules');

function skip(why) {
  console.log(why);
  process.exit(ci ? 1 : SKIP);
}
if (!fs.existsSync(path.join(modules, 'playwright-core')))
  skip("playwright-core is not installed: run 'npm ci' in tests/report");
if (!fs.existsSync(chromiumPath)) skip('chromium is not installed: apt-get install -y chromium');
const { chromium } = require(path.join(modules, 'playwright-core'));

let failures = 0, passes = 0, skips = 0;
function check(cond, what) {
  if (cond) { passes++; return true; }
  failures++;
  console.log('FAIL: ' + what);
  return false;
}
function run(args) { return execFileSync(ctfscope, args, { encoding: 'utf8', maxBuffer: 1 << 28 }); }

fs.mkdirSync(outDir, { recursive: true });
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cts-report-'));

async function main() {
  execFileSync(genTraces, [work, '3000']);
  execFileSync(writeTrace, [path.join(work, 'demo.ctf')], { stdio: 'ignore' });
  const memTraces = [path.join(work, 'demo.ctf'), path.join(work, 'hostile.mt.ctf')];
  const taskTraces = [path.join(work, 'hostile.tasks.ctf')];
  const mt = path.join(corpus, 'memtrace');
  if (fs.existsSync(mt)) {
    for (const d of ['traces', 'public'])
      for (const f of fs.readdirSync(path.join(mt, d)).sort())
        if (f.endsWith('.ctf')) memTraces.push(path.join(mt, d, f));
    taskTraces.push(path.join(corpus, 'mprof/net/net.ctf'), path.join(corpus, 'mprof/wrapped/koleini-trace1-0a4963a.ctf'));
  } else if (ci) {
    check(false, 'the corpus is missing at ' + corpus);
  } else {
    console.log('SKIP: corpus traces (not found at ' + corpus + ')');
    skips++;
  }

  const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cts-chromium-'));
  const ctx = await chromium.launchPersistentContext(userDir, {
    executablePath: chromiumPath, headless: true, viewport: { width: 1400, height: 1000 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = await ctx.newPage();
    let problems = [];
    page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(m.type() + ': ' + m.text()); });
    page.on('pageerror', (e) => problems.push('page error: ' + e.message));
    page.on('dialog', (d) => { problems.push('dialog opened: ' + d.message()); d.dismiss(); });
    let serveOrigin = null; // `ctfscope serve` pages may fetch from their own server only
    page.on('request', (r) => { if (!r.url().startsWith('file:') && !r.url().startsWith('blob:') && !r.url().startsWith('data:') && !r.url().startsWith('about:') && !(serveOrigin && r.url().startsWith(serveOrigin + '/'))) problems.push('network request: ' + r.url()); });

    async function open(report, label) {
      problems = [];
      const t = Date.now();
      await page.goto('file://' + report, { timeout: 180000 });
      await page.waitForFunction(() => window.ctsReport && window.ctsReport.ready, null, { timeout: 180000 });
      const ms = Date.now() - t;
      const size = fs.statSync(report).size;
      console.log(`${label}: ${(size / 1e6).toFixed(2)} MB, opened in ${ms} ms`);
      return ms;
    }
    function noProblems(label) { check(problems.length === 0, label + ': ' + problems.join('; ')); }

    // --- memory reports: figures equal the CLI's, filters change the flame graph -------
    for (const trace of memTraces) {
      const name = path.basename(trace);
      const report = path.join(work, name + '.html');
      let code = 0;
      try { run(['report', '-q', trace, '-o', report]); } catch (e) { code = e.status; }
      let infoJson;
      try { infoJson = JSON.parse(run(['info', '--json', '-q', trace])); } catch (e) { infoJson = JSON.parse(e.stdout); }
      if (!check(code === 0 || (code === 1 && infoJson.reader_result !== 'ok'), name + ': report exit ' + code)) continue;
      let topJson, topText;
      try { topJson = JSON.parse(run(['top', '--json', '-q', '-n', '50', trace])); } catch (e) { topJson = JSON.parse(e.stdout); }
      try { topText = run(['top', '-q', '-n', '50', trace]); } catch (e) { topText = e.stdout; }
      await open(report, name);
      const dom = await page.evaluate(() => {
        const info = document.getElementById('mem-info');
        const rows = [...document.querySelectorAll('#sites tr')].slice(1);
        return {
          samples: +info.dataset.samples, allocs: +info.dataset.allocs,
          program: info.querySelector('td[data-key="Program"]').textContent,
          sites: rows.map((r) => ({ samples: +r.dataset.samples, cells: [...r.children].map((c) => c.textContent) })),
          flame: window.ctsReport.mem.drawn.flame,
          heap: window.ctsReport.mem.drawn.heap,
          endUs: window.ctsReport.data.mem.end_us,
        };
      });
      // The heap graph's time axis: six distinct ticks whatever the trace's duration (a 3 ms
      // trace's read +0.001 s twice at three decimals).
      if (dom.heap && dom.endUs >= 5)
        check(dom.heap.ticks && new Set(dom.heap.ticks).size === dom.heap.ticks.length, `${name}: heap graph ticks repeat: ${dom.heap.ticks}`);
      check(dom.samples === infoJson.samples_total, `${name}: samples ${dom.samples} != info ${infoJson.samples_total}`);
      check(dom.allocs === infoJson.allocs_total, `${name}: allocations ${dom.allocs} != info ${infoJson.allocs_total}`);
      check(dom.program === infoJson.info.executable_name, `${name}: program '${dom.program}' != info '${infoJson.info.executable_name}'`);
      check(dom.sites.length === topJson.sites.length, `${name}: ${dom.sites.length} sites shown, top has ${topJson.sites.length}`);
      const textLines = topText.split('\n').filter((l) => /^\s+\S+ \S*B\s+\d/.test(l));
      for (let i = 0; i < Math.min(dom.sites.length, topJson.sites.length); i++) {
        if (!check(dom.sites[i].samples === topJson.sites[i].alloc_samples, `${name}: site ${i} samples ${dom.sites[i].samples} != top ${topJson.sites[i].alloc_samples}`)) break;
        const cols = textLines[i] ? textLines[i].trim().split(/\s{2,}/) : [];
        if (!check(cols[0] === dom.sites[i].cells[0] && cols[4] === dom.sites[i].cells[4], `${name}: site ${i} shows '${dom.sites[i].cells[0]}'/'${dom.sites[i].cells[4]}', top prints '${cols[0]}'/'${cols[4]}'`)) break;
      }
      check(dom.flame.total === infoJson.samples_total, `${name}: flame graph total ${dom.flame.total} != ${infoJson.samples_total}`);
      if (infoJson.samples_total > 0 && dom.flame.rects > 1) {
        // Filters change what is drawn (once the records, decoded after the first frame, are in).
        await page.evaluate(() => window.ctsReport.mem.loadRecords());
        check(await page.evaluate(() => window.ctsReport.mem.recordsReady === true), `${name}: the allocation records were not decoded`);
        // 'live' over the whole trace selects every record: the records give the same total
        // and blocks as the precomputed first view.
        await page.selectOption('#f-mode', 'live');
        const everything = await page.evaluate(() => ({ flame: window.ctsReport.mem.drawn.flame, filtered: window.ctsReport.mem.filtered }));
        check(everything.flame.total === dom.flame.total && everything.flame.rects === dom.flame.rects && everything.filtered.blocks === infoJson.allocs_total,
          `${name}: the records give ${JSON.stringify(everything)}, the first view ${JSON.stringify(dom.flame)} (${infoJson.allocs_total} allocations)`);
        await page.selectOption('#f-mode', 'all');
        const half = await page.evaluate(() => {
          const m = window.ctsReport.data.mem;
          window.ctsReport.mem.setRange([0, m.end_us / 2]);
          return window.ctsReport.mem.drawn.flame;
        });
        check(half.total < dom.flame.total, `${name}: a half-range filter did not shrink the flame graph (${half.total})`);
        await page.selectOption('#f-mode', 'never');
        const never = await page.evaluate(() => window.ctsReport.mem.drawn.flame.total);
        check(never <= half.total + dom.flame.total, `${name}: never-collected filter`);
        await page.selectOption('#f-mode', 'all');
        await page.fill('#f-inside', 'zzz-no-such-function');
        const none = await page.evaluate(() => window.ctsReport.mem.drawn.flame.rects);
        check(none === 0, `${name}: 'inside a call to' a missing function still draws ${none} frames`);
        await page.fill('#f-inside', '');
        await page.selectOption('#f-orient', 'callers');
        const callers = await page.evaluate(() => window.ctsReport.mem.drawn.flame);
        check(callers.total === dom.flame.total, `${name}: callers view total ${callers.total}`);
      }
      noProblems(name);
      if (name === 'demo.ctf' || name === 'p2_leak.r1e-2.ctf' || name === 'hostile.mt.ctf')
        await page.screenshot({ path: path.join(outDir, name + '.png'), fullPage: true });
    }

    // --- task reports: zoom, search, double-click ----------------------------------------
    async function taskChecks(report, label, opts) {
      await open(report, label);
      await page.click('#tab-tasks');
      const s0 = await page.evaluate(() => ({ drawn: window.ctsReport.tasks.drawn, n: window.ctsReport.data.tasks.n, view: Object.assign({}, window.ctsReport.tasks.view) }));
      check(s0.drawn.tasks > 0, `${label}: no task drawn`);
      if (opts.layer) {
        // Zoomed out, the busy synthetic trace's vertical arrows are written
        // as pixels (an image layer) and its counters are dense: the arrows must reach the
        // canvas in their kind's colour.
        check(s0.drawn.layerArrows > 0 && s0.drawn.denseCounters > 0, `${label}: the pixel layer was not used at fit: ${JSON.stringify(s0.drawn)}`);
        const px = await page.evaluate(() => {
          const t = window.ctsReport.tasks; // without the (translucent) counters over them
          t.counters = false; t.view.mergeReads = false; t.draw(); t.counters = true; t.view.mergeReads = true;
          const c = document.getElementById('timeline'), d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          t.draw();
          let read = 0, tryRead = 0;
          for (let p = 0; p < d.length; p += 4) {
            if (d[p] === 0 && d[p + 1] === 0 && d[p + 2] === 255) read++;
            if (d[p] === 204 && d[p + 1] === 204 && d[p + 2] === 102) tryRead++;
          }
          return { read, tryRead };
        });
        check(px.read > 0 && px.tryRead > 0, `${label}: no pixel in the read/try_read arrow colours: ${JSON.stringify(px)}`);
      }
      // Zoom in with the wheel at the first task: the view narrows, what is drawn changes.
      const box = await page.locator('#timeline').boundingBox();
      await page.mouse.move(box.x + 60, box.y + 100);
      for (let i = 0; i < 12; i++) await page.mouse.wheel(0, -100);
      await page.waitForFunction((sc) => window.ctsReport.tasks.view.scale > sc * 5, s0.view.scale, { timeout: 5000 }).catch(() => {});
      await page.evaluate(() => window.ctsReport.tasks.draw());
      const s1 = await page.evaluate(() => ({ drawn: window.ctsReport.tasks.drawn, view: Object.assign({}, window.ctsReport.tasks.view) }));
      check(s1.view.scale > s0.view.scale * 5, `${label}: wheel zoom did not zoom (${s0.view.scale} -> ${s1.view.scale})`);
      check(JSON.stringify(s1.drawn) !== JSON.stringify(s0.drawn), `${label}: zooming changed nothing drawn`);
      await page.click('#tl-fit');
      const sFit = await page.evaluate(() => window.ctsReport.tasks.view.scale); // the first view may be narrower
      await page.click('#tl-in');
      await page.waitForTimeout(50);
      const s2 = await page.evaluate(() => window.ctsReport.tasks.view.scale);
      check(Math.abs(s2 / sFit - 1.2) < 0.05, `${label}: the + button zoomed by ${s2 / sFit}`);
      // Search highlights as you type, after '/'.
      await page.click('#tl-fit');
      await page.locator('#timeline').focus();
      await page.keyboard.press('/');
      check(await page.evaluate(() => document.activeElement.id === 'tl-search'), `${label}: '/' does not focus the search box`);
      await page.keyboard.type(opts.search);
      await page.waitForFunction(() => window.ctsReport.tasks.drawn.highlighted > 0, null, { timeout: 5000 }).catch(() => {});
      const s3 = await page.evaluate(() => ({ matches: window.ctsReport.tasks.matches, drawn: window.ctsReport.tasks.drawn }));
      check(s3.matches > 0 && s3.drawn.highlighted > 0, `${label}: searching '${opts.search}' highlighted ${s3.drawn.highlighted} (${s3.matches} matches)`);
      await page.keyboard.press('Escape');
      const cleared = await page.waitForFunction(() => window.ctsReport.tasks.drawn.highlighted === 0, null, { timeout: 5000 }).then(() => true, () => false);
      check(cleared, `${label}: Esc did not clear the highlight`);
      // Space toggles the counters.
      await page.locator('#timeline').focus();
      const c0 = await page.evaluate(() => window.ctsReport.tasks.counters);
      await page.keyboard.press(' ');
      check(await page.evaluate((c) => window.ctsReport.tasks.counters === !c, c0), `${label}: space did not toggle the counters`);
      await page.keyboard.press(' ');
      // Double-click a task: it and its `becomes` relatives are highlighted.
      if (opts.dblclickId !== undefined) {
        const xy = await page.evaluate((id) => {
          const t = window.ctsReport.tasks;
          t.fit();
          const i = t.findTask(id);
          return t.taskXY(i);
        }, opts.dblclickId);
        await page.mouse.dblclick(box.x + xy[0], box.y + xy[1]);
        await page.waitForTimeout(100);
        const sel = await page.evaluate(() => ({ sel: window.ctsReport.tasks.selected, hl: window.ctsReport.tasks.drawn.highlighted }));
        check(sel.sel && sel.sel.related >= opts.related && sel.hl >= 1, `${label}: double-click selected ${JSON.stringify(sel)}`);
      }
      await page.evaluate(() => window.ctsReport.tasks.fit());
      const svg = await page.evaluate(() => window.ctsReport.tasks.toSvg());
      const svgOk = await page.evaluate((s) => !new DOMParser().parseFromString(s, 'image/svg+xml').querySelector('parsererror'), svg);
      check(svgOk && svg.length > 1000, `${label}: SVG export is not well-formed`);
      noProblems(label);
      return svg;
    }
    async function frameTimes(label) {
      const r = await page.evaluate(() => {
        const t = window.ctsReport.tasks;
        // A frame is draw() plus the canvas's rasterization of it, forced by reading a pixel.
        const g = document.getElementById('timeline').getContext('2d');
        const timed = (f) => { const a = performance.now(); f(); g.getImageData(0, 0, 1, 1); times.push(performance.now() - a); };
        t.fit();
        const times = [];
        for (let i = 0; i < 20; i++) timed(() => t.zoom(1.2, 300));
        for (let i = 0; i < 40; i++) timed(() => t.pan(i % 2 ? 37 : -41, i % 3 ? 5 : -5));
        t.fit();
        for (let i = 0; i < 20; i++) timed(() => t.pan(53, 0));
        times.sort((a, b) => a - b);
        return { mean: times.reduce((a, b) => a + b, 0) / times.length, p95: times[Math.floor(times.length * 0.95)], max: times[times.length - 1] };
      });
      console.log(`${label}: pan/zoom frame time mean ${r.mean.toFixed(2)} ms, p95 ${r.p95.toFixed(2)} ms, max ${r.max.toFixed(2)} ms (measured, not asserted)`);
    }

    for (const trace of taskTraces) {
      const name = path.basename(trace);
      const report = path.join(work, name + '.html');
      if (!fs.existsSync(trace)) continue;
      run(['report', '-q', trace, '-o', report]);
      const hostile = name.startsWith('hostile');
      await taskChecks(report, name, hostile ? { search: 'rx-', dblclickId: 3, related: 3, layer: true } : { search: 'a' });
      if (name === 'net.ctf') {
        await frameTimes(name);
        await page.screenshot({ path: path.join(outDir, 'net.ctf.png') });
      }
    }

    // --- both traces of one run, with hostile strings -------------------------------------
    const both = path.join(work, 'both.html');
    run(['report', '-q', path.join(work, 'hostile.mt.ctf'), path.join(work, 'hostile.tasks.ctf'), '-o', both, '--title', '<script>alert("title")</script>']);
    const html = fs.readFileSync(both, 'utf8');
    const dataText = html.slice(html.indexOf('id="cts-data">'), html.indexOf('</script>', html.indexOf('id="cts-data">')));
    check(!/[<>]/.test(dataText.slice('id="cts-data">'.length)), 'both: the embedded JSON contains a raw < or >');
    check((html.match(/<script/g) || []).length === 2, 'both: the file has more than the two script elements');
    const svg = await taskChecks(both, 'both', { search: 'rx-', dblclickId: 3, related: 3 });
    check(svg.includes('&lt;/script&gt;&lt;script&gt;alert(3)&lt;/script&gt;') || !svg.includes('alert(3)'), 'both: SVG export does not escape a label');
    const inj = await page.evaluate(() => ({
      imgs: document.querySelectorAll('img').length, bolds: document.querySelectorAll('main b, main i').length,
      scripts: document.scripts.length, title: document.title,
      siteText: [...document.querySelectorAll('#sites td.site')].map((t) => t.textContent),
      program: document.querySelector('td[data-key="Program"]').textContent,
      memByTask: document.querySelectorAll('#task-mem tr').length,
      marks: window.ctsReport.tasks.drawn.marks,
    }));
    check(inj.imgs === 0 && inj.bolds === 0 && inj.scripts === 2, `both: markup from the trace became elements: ${JSON.stringify(inj)}`);
    check(inj.siteText.some((t) => t.includes('<img src=x onerror=alert(2)> (<i>file</i>.ml:20)')), 'both: the hostile function name is not shown as text: ' + JSON.stringify(inj.siteText));
    check(await page.evaluate(() => window.ctsReport.data.mem.frames.some((f) => f.startsWith('</script><script>alert(1)</script>'))), 'both: a hostile frame name did not reach the page intact');
    check(inj.program === '<b>hostile</b>.exe', `both: program shown as '${inj.program}'`);
    check(inj.title.startsWith('<script>alert("title")</script>'), `both: title '${inj.title}'`);
    check(inj.memByTask > 1, 'both: no memory attributed to tasks');
    check(inj.marks > 0, 'both: no allocation marks on the timeline');
    await page.evaluate(() => window.ctsReport.tasks.search('rx-'));
    await page.screenshot({ path: path.join(outDir, 'both-tasks.png') });
    await page.click('#tab-mem');
    await page.screenshot({ path: path.join(outDir, 'both-memory.png'), fullPage: true });
    noProblems('both');

    // --- both traces of one process, two threads: lanes and memory by task --------------
    // The table a person sees has `top --by task`'s figures and text, the running times are
    // `top`'s (a lane per thread), the title says how many events the tracer lost.
    {
      const pm = path.join(work, 'pair.mt.ctf'), pt = path.join(work, 'pair.tasks.ctf'), ph = path.join(work, 'pair.html');
      run(['report', '-q', pm, pt, '-o', ph]);
      const want = JSON.parse(run(['top', '--by', 'task', '--json', '-q', '-n', '0', pm, pt]));
      const wantText = run(['top', '--by', 'task', '-q', '-n', '0', pm, pt]).split('\n');
      const running = JSON.parse(run(['top', '--json', '-q', '-n', '0', pt]));
      await open(ph, 'pair');
      await page.click('#tab-tasks');
      const got = await page.evaluate(() => {
        const T = window.ctsReport.data.tasks, t = window.ctsReport.tasks, byLabel = {};
        for (let i = 0; i < T.n; i++) { const l = t.nameOf(i); byLabel[l] = (byLabel[l] || 0) + T.run[i]; }
        const title = document.getElementById('tasks-title');
        return {
          rows: [...document.querySelectorAll('#task-mem tr')].slice(1).map((tr) => ({
            kind: tr.dataset.kind, id: tr.dataset.id === undefined ? null : +tr.dataset.id, lane: tr.dataset.lane,
            alloc_bytes: +tr.dataset.allocBytes, alloc_count: +tr.dataset.allocCount, live_bytes: +tr.dataset.liveBytes,
            cells: [...tr.children].map((c) => c.textContent),
          })),
          note: document.getElementById('task-mem-note').textContent,
          title: title.textContent, lost: +title.dataset.lost, lanes: +title.dataset.lanes, byLabel,
        };
      });
      const taskRows = got.rows.filter((r) => r.kind === 'task');
      check(want.attribution === 'exact' && taskRows.length === want.tasks.length && taskRows.length === 2, `pair: ${taskRows.length} task rows, top --by task has ${want.tasks.length} (${want.attribution})`);
      const same = (r, w, lane) => r && w && r.alloc_bytes === w.alloc_bytes && r.alloc_count === w.alloc_count && r.live_bytes === w.live_bytes && r.lane === lane;
      for (const w of want.tasks) {
        const r = taskRows.find((x) => x.id === w.id);
        check(same(r, w, String(w.lane)), `pair: task ${w.id} shows ${JSON.stringify(r)}, top --by task ${JSON.stringify(w)}`);
      }
      const outside = got.rows.find((r) => r.kind === 'outside'), unattr = got.rows.find((r) => r.kind === 'unattributed');
      check(same(outside, want.outside_tasks, '-'), `pair: outside tasks ${JSON.stringify(outside)} != ${JSON.stringify(want.outside_tasks)}`);
      check(same(unattr, want.unattributed, '-'), `pair: unattributed ${JSON.stringify(unattr)} != ${JSON.stringify(want.unattributed)}`);
      // Each row as top's text prints it: allocated, allocations, freed, live, lane, task.
      for (const r of got.rows) {
        const line = r.cells[0].padEnd(28) + ' ' + r.cells[1].padStart(12) + ' ' + r.cells[2].padEnd(28) + ' ' + r.cells[3].padEnd(28) + ' ' + r.cells[4].padStart(5) + '  ' + r.cells[5];
        check(wantText.includes(line), `pair: the row '${line}' is not in top --by task's output:\n${wantText.join('\n')}`);
      }
      for (const g of running.rows)
        check(got.byLabel[g.label] === g.running_ns, `pair: '${g.label}' runs ${got.byLabel[g.label]} ns in the report, ${g.running_ns} in top`);
      check(got.lost === 5 && /5 events lost/.test(got.title), `pair: the title says '${got.title}' (lost ${got.lost})`);
      check(got.lanes === 2, `pair: ${got.lanes} lanes`);
      const lanesDrawn = await page.evaluate(() => { window.ctsReport.tasks.fit(); return window.ctsReport.tasks.drawn.lanes; });
      check(lanesDrawn >= 2, `pair: ${lanesDrawn} running periods drawn in the lane strips`);
      noProblems('pair');
      await page.screenshot({ path: path.join(outDir, 'pair-tasks.png'), fullPage: true });
      // A task trace of another process: the report says attribution is impossible.
      const ob = path.join(work, 'other.html');
      let code = 0;
      try { run(['report', '-q', path.join(work, 'demo.ctf'), pt, '-o', ob]); } catch (e) { code = e.status; }
      check(code === 1 && fs.existsSync(ob), `other process: report exit ${code}`);
      await open(ob, 'other process');
      await page.click('#tab-tasks');
      const other = await page.evaluate(() => ({ rows: document.querySelectorAll('#task-mem tr').length, note: document.getElementById('task-mem-note').textContent }));
      check(other.rows === 0 && /^No memory by task: .*(different processes|trace-info)/.test(other.note), `other process: ${JSON.stringify(other)}`);
      noProblems('other process');
    }

    // --- the timeline stays readable; the report's defects (issue 22) --------------------
    {
      const overlap = (a, b) => a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];
      const spans = (xs) => xs.map((b) => [b[0], 0, b[1], 1]); // x extents of one line of text
      function noOverlaps(boxes, what) {
        if (!check(Array.isArray(boxes) && boxes.length > 0, what + ': nothing drawn (' + JSON.stringify(boxes) + ')')) return;
        for (let i = 0; i < boxes.length; i++)
          for (let j = i + 1; j < boxes.length; j++)
            if (!check(!overlap(boxes[i], boxes[j]), `${what}: ${JSON.stringify(boxes[i])} and ${JSON.stringify(boxes[j])} overlap`)) return;
      }
      // Both traces: row 0 is under the allocation strip, where a person sees and points at it.
      await open(both, 'both (readability)');
      await page.click('#tab-tasks');
      const r0 = await page.evaluate(() => {
        const t = window.ctsReport.tasks, L = window.ctsViewer.layout;
        t.fit(); t.counters = false; t.draw();
        const xy = t.taskXY(0), c = document.getElementById('timeline'), T = window.ctsReport.data.tasks;
        // Row 0's first task: its 2-px line in the export of the view (the same painting as
        // the canvas, where labels and arrows cover parts of it), starting where the task does.
        const x0 = L.xOf(t.view, T.start[0]);
        const svg = new DOMParser().parseFromString(t.toSvg(), 'image/svg+xml');
        let dark = 0;
        for (const e of svg.querySelectorAll('path[fill="rgb(51,51,51)"]'))
          for (const m of e.getAttribute('d').matchAll(/M(-?[\d.]+) (-?[\d.]+)h(-?[\d.]+)v(-?[\d.]+)/g))
            if (Math.abs(+m[1] - x0) < 1 && Math.abs(+m[2] - (xy[1] - 1)) < 0.01 && +m[4] === 2) dark++;
        const rows = t.drawn.rows;
        t.counters = true; t.draw();
        return { xy: xy, dark: dark, rows: rows, allRows: T.rows, stripBottom: L.RULER + L.MARKS, id: T.id[0], h: c.clientHeight };
      });
      check(r0.xy[1] > r0.stripBottom + 2 && r0.xy[1] < r0.h, `both: row 0's line at y ${r0.xy[1]}, under the allocation strip (ends at ${r0.stripBottom})`);
      check(r0.dark > 0 && r0.rows === r0.allRows, `both: row 0 is not drawn (${r0.dark} lines where its first task is; ${r0.rows} of ${r0.allRows} rows drawn)`);
      const tbox = await page.locator('#timeline').boundingBox();
      await page.mouse.move(tbox.x + r0.xy[0], tbox.y + r0.xy[1]);
      const tip0 = await page.evaluate(() => { const e = document.getElementById('tip'); return e.classList.contains('hidden') ? null : e.textContent; });
      check(tip0 !== null && tip0.includes('task ' + r0.id + ' '), `both: pointing at row 0's task shows '${tip0}'`);
      // The tooltip goes away when the wheel zooms (the task moves from under the pointer).
      await page.mouse.wheel(0, -100);
      await page.waitForTimeout(50);
      check(await page.evaluate(() => document.getElementById('tip').classList.contains('hidden')), 'both: the tooltip stays up while wheel-zooming');
      // At µs zoom the ruler's relative and wall-clock labels do not overlap, inside the canvas.
      const ruler = await page.evaluate(() => {
        const t = window.ctsReport.tasks;
        t.view.scale = 0.1; t.view.start = 1000; t.draw(); // 100 px per µs
        return { labels: t.drawn.rulerLabels, w: document.getElementById('timeline').clientWidth };
      });
      noOverlaps(ruler.labels && spans(ruler.labels), 'both: ruler labels at µs zoom');
      check(ruler.labels && ruler.labels.every((b) => b[0] >= 0 && b[1] <= ruler.w), 'both: a ruler label leaves the canvas: ' + JSON.stringify(ruler.labels));
      // The status line signs the view's times: the view starts before the trace at Fit.
      const stat = await page.evaluate(() => { window.ctsReport.tasks.fit(); return { s: document.getElementById('tl-status').textContent, start: window.ctsReport.tasks.view.start }; });
      check(!stat.s.includes('+-') && (stat.start >= 0 || / view -\d/.test(stat.s)), `both: status '${stat.s}'`);
      // A try_read followed by the read of the same task is drawn as the read alone (toggle).
      const tryPx = await page.evaluate(() => {
        const t = window.ctsReport.tasks, c = document.getElementById('timeline');
        const count = () => {
          t.draw();
          const o = document.createElement('canvas'); // read back from a copy made for it
          o.width = c.width; o.height = c.height;
          const og = o.getContext('2d', { willReadFrequently: true });
          og.drawImage(c, 0, 0);
          const d = og.getImageData(0, 0, c.width, c.height).data;
          let k = 0;
          for (let p = 0; p < d.length; p += 4) if (d[p] === 204 && d[p + 1] === 204 && d[p + 2] === 102) k++;
          return k;
        };
        t.fit(); t.counters = false;
        const on = count();
        document.getElementById('tl-merge').click();
        const off = count();
        document.getElementById('tl-merge').click();
        t.counters = true; t.draw();
        return { on, off };
      });
      check(tryPx.on < tryPx.off, `both: merging try_read+read leaves ${tryPx.on} try_read pixels of ${tryPx.off}`);
      // The legend names every arrow colour, in that colour.
      const legend = await page.evaluate(() => [...document.querySelectorAll('#tl-legend .key')].map((k) => ({
        text: k.textContent, color: getComputedStyle(k.querySelector('.swatch')).backgroundColor, shown: k.offsetParent !== null,
      })));
      const wantLegend = [['try_read', 'rgb(204, 204, 102)'], ['read', 'rgb(0, 0, 255)'], ['failed read', 'rgb(255, 0, 0)'], ['resolve', 'rgb(0, 128, 0)'], ['signal', 'rgb(255, 153, 0)']];
      check(legend.length === 5 && wantLegend.every(([w, c], k) => legend[k].text.startsWith(w) && legend[k].color === c && legend[k].shown), 'both: arrow legend ' + JSON.stringify(legend));
      noProblems('both (readability)');

      // net.ctf (the tutorial's trace): every active task on screen at Fit and zoomed into the
      // busy region; counter names apart; Fit leaves them room.
      const netTrace = path.join(corpus, 'mprof/net/net.ctf');
      if (fs.existsSync(netTrace)) {
        const netReport = path.join(work, 'net.ctf.html');
        await open(netReport, 'net.ctf (readability)');
        await page.click('#tab-tasks');
        // The first view is where the activity is: the first ~0.1 s of 6.5 s.
        const first = await page.evaluate(() => {
          const t = window.ctsReport.tasks, w = document.getElementById('timeline').clientWidth;
          return { start: t.view.start, end: t.view.start + w / t.view.scale, tasks: t.drawn.tasks };
        });
        check(first.end - first.start < 0.5e9 && first.start <= 58e6 && first.end >= 99e6 && first.tasks > 500, 'net.ctf: the first view ' + JSON.stringify(first));
        const fitted = await page.evaluate(() => {
          const t = window.ctsReport.tasks, T = window.ctsReport.data.tasks;
          t.fit();
          return { drawn: t.drawn, endX: window.ctsViewer.layout.xOf(t.view, T.end), n: T.n };
        });
        check(fitted.drawn.tasks > 500, `net.ctf: at Fit ${fitted.drawn.tasks} of ${fitted.n} tasks are drawn`);
        noOverlaps(fitted.drawn.counterNames, 'net.ctf: counter names at Fit');
        check(fitted.drawn.counterNames && fitted.drawn.counterNames.every((b) => b[0] >= fitted.endX), `net.ctf: Fit puts the trace's end (x ${fitted.endX}) under the counter names ${JSON.stringify(fitted.drawn.counterNames)}`);
        const busy = await page.evaluate(() => {
          const t = window.ctsReport.tasks, w = document.getElementById('timeline').clientWidth;
          t.view.start = 58e6; t.view.scale = w / 54e6; t.view.y = 0; t.draw();
          return { drawn: t.drawn, status: document.getElementById('tl-status').textContent };
        });
        check(busy.drawn.tasks > 500 && busy.drawn.rows > 100, `net.ctf: zoomed into 58-112 ms: ${busy.status}`);
        // The fisheye's lens has readable rows (labels); shift+wheel moves it down.
        check(busy.drawn.lens && busy.drawn.labels > 0, 'net.ctf: no labels in the fisheye lens: ' + JSON.stringify(busy.drawn.lens) + ', ' + busy.drawn.labels + ' labels');
        const nbox = await page.locator('#timeline').boundingBox();
        await page.mouse.move(nbox.x + 300, nbox.y + 300);
        await page.keyboard.down('Shift');
        for (let i = 0; i < 5; i++) await page.mouse.wheel(0, 100);
        await page.keyboard.up('Shift');
        await page.waitForTimeout(50);
        const lens2 = await page.evaluate(() => { const t = window.ctsReport.tasks; t.draw(); return t.drawn.lens; });
        check(busy.drawn.lens && lens2 && lens2[0] > busy.drawn.lens[0], `net.ctf: shift+wheel did not move the lens (${JSON.stringify(busy.drawn.lens)} -> ${JSON.stringify(lens2)})`);
        noOverlaps(busy.drawn.counterNames, 'net.ctf: counter names zoomed in');
        await page.screenshot({ path: path.join(outDir, 'net.ctf-busy.png') });
        // Bind simplification (on by default): fewer creation links; the toggle brings them back.
        const binds = await page.evaluate(() => {
          const t = window.ctsReport.tasks, on = t.drawn.links, n = t.bindsSimplified;
          document.getElementById('tl-binds').click(); t.draw();
          const off = t.drawn.links;
          document.getElementById('tl-binds').click(); t.draw();
          return { n, on, off, again: t.drawn.links };
        });
        check(binds.n > 500 && binds.on < binds.off && binds.again === binds.on, 'net.ctf: bind simplification ' + JSON.stringify(binds));
        // One toggle per counter: unticking one removes its line and its name.
        const ctr = await page.evaluate(() => {
          const boxes = [...document.querySelectorAll('#tl-counter-list input')], t = window.ctsReport.tasks;
          const names = boxes.map((b) => b.dataset.counter), before = t.drawn.counterNames.length;
          boxes[0].click(); t.draw();
          const after = t.drawn.counterNames.length;
          boxes[0].click(); t.draw();
          return { names, before, after, again: t.drawn.counterNames.length, counters: window.ctsReport.data.tasks.counters.map((c) => c.name) };
        });
        check(JSON.stringify(ctr.names) === JSON.stringify(ctr.counters) && ctr.after === ctr.before - 1 && ctr.again === ctr.before, 'net.ctf: per-counter toggles ' + JSON.stringify(ctr));
        // Next/previous search match: the view pans to it, in time order; 'n' goes on.
        const nav = await page.evaluate(() => {
          const t = window.ctsReport.tasks, T = window.ctsReport.data.tasks, c = document.getElementById('timeline');
          t.fit(); t.zoom(40, 0); t.search('Gntshr');
          const a = t.next(), xyA = t.taskXY(a), b = t.next();
          return { a, b, xyA, startA: T.start[a], startB: T.start[b], back: t.prev(), w: c.clientWidth, h: c.clientHeight, matches: t.matches };
        });
        check(nav.matches > 2 && nav.a >= 0 && nav.xyA[0] >= 0 && nav.xyA[0] <= nav.w && nav.xyA[1] > 28 && nav.xyA[1] < nav.h, 'net.ctf: the next match is not in view: ' + JSON.stringify(nav));
        check(nav.startB >= nav.startA && nav.b !== nav.a && nav.back === nav.a, 'net.ctf: next/previous match order ' + JSON.stringify(nav));
        await page.locator('#timeline').focus();
        await page.keyboard.press('n');
        check(await page.evaluate((a) => { const t = window.ctsReport.tasks; t.draw(); return t.current !== a && t.current >= 0; }, nav.a), "net.ctf: 'n' does not go to the next match");
        noProblems('net.ctf (readability)');
      }

      // A native program's trace (recorded here; not in sanitizer builds, which have no
      // preload library): native words, the context of a v002 trace, histogram labels apart.
      const nativeTrace = path.join(work, 'native.ctf');
      let recorded = true;
      try { execFileSync(ctfscope, ['record', '--rate', '0.01', '-o', nativeTrace, '--', '/usr/bin/ls', '/'], { stdio: 'ignore' }); } catch (e) { recorded = false; }
      if (recorded && fs.existsSync(nativeTrace)) {
        const nativeReport = path.join(work, 'native.html');
        run(['report', '-q', nativeTrace, '-o', nativeReport]);
        await open(nativeReport, 'native');
        const nat = await page.evaluate(() => {
          const shown = (e) => e && e.offsetParent !== null;
          return {
            info: document.getElementById('mem-info').innerText,
            context: document.querySelector('td[data-key="Context"]').textContent,
            filters: [...document.querySelectorAll('#filters label')].filter(shown).map((l) => l.textContent).join(' | '),
            options: [...document.querySelectorAll('#f-mode option')].map((o) => o.textContent).join(' | '),
            hist: [window.ctsReport.mem.drawn['hist-size-labels'], window.ctsReport.mem.drawn['hist-life-labels']],
            version: window.ctsReport.data.mem.version,
          };
        });
        check(!/minor|promot|alloc_major/i.test(nat.info), 'native: the trace panel uses OCaml words: ' + nat.info);
        check(!/minor|major/i.test(nat.filters) && !/collected/.test(nat.options), `native: the filters say '${nat.filters}' / '${nat.options}'`);
        check(nat.version === 1 || nat.context === '(none)', `native: a v00${nat.version} trace without a context shows '${nat.context}'`);
        noOverlaps(nat.hist[0] && nat.hist[0].map((b) => [b[0], 0, b[1], 1]), 'native: block size histogram labels');
        noOverlaps(nat.hist[1] && nat.hist[1].map((b) => [b[0], 0, b[1], 1]), 'native: lifetime histogram labels');
        noProblems('native');
      } else {
        console.log('SKIP: native trace checks (ctfscope record is not available in this build)');
        skips++;
      }
      // Few buckets: the histograms of a trace with three allocations keep their labels apart.
      const few = path.join(work, 'hostile.mt.ctf.html');
      await open(few, 'hostile.mt.ctf (histograms)');
      const fh = await page.evaluate(() => [window.ctsReport.mem.drawn['hist-size-labels'], window.ctsReport.mem.drawn['hist-life-labels']]);
      for (const [k, b] of fh.entries()) noOverlaps(b && b.map((q) => [q[0], 0, q[1], 1]), 'hostile.mt.ctf: histogram ' + k + ' labels');
    }

    // --- ctfscope serve: the same viewer from a local server, and live mode -------------
    {
      const { spawn } = require('child_process');
      const net = require('net');
      // Starts `ctfscope serve ARGS`, resolves with its URL (and trace port in live mode).
      function startServe(args, live) {
        const proc = spawn(ctfscope, ['serve', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
        let err = '';
        return new Promise((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error('serve did not start: ' + err)), 20000);
          proc.stderr.on('data', (b) => {
            err += b;
            const url = /serving (http:\/\/127\.0\.0\.1:\d+)\//.exec(err);
            const tp = /waiting for a trace on 127\.0\.0\.1:(\d+)/.exec(err);
            if (url && (!live || tp)) { clearTimeout(timer); resolve({ proc, origin: url[1], tracePort: tp ? +tp[1] : 0, log: () => err }); }
          });
          proc.on('exit', (c) => reject(new Error('serve exited ' + c + ': ' + err)));
        });
      }
      function stopServe(srv) {
        return new Promise((resolve) => {
          if (srv.proc.exitCode !== null) { resolve(srv.proc.exitCode); return; }
          const timer = setTimeout(() => { srv.proc.kill('SIGKILL'); }, 10000);
          srv.proc.removeAllListeners('exit');
          srv.proc.on('exit', (code, sig) => { clearTimeout(timer); resolve(sig ? sig : code); });
          srv.proc.kill('SIGTERM');
        });
      }
      async function memFigures() {
        return page.evaluate(() => {
          const info = document.getElementById('mem-info');
          const s = document.getElementById('live-status');
          return {
            samples: info ? +info.dataset.samples : -1, allocs: info ? +info.dataset.allocs : -1,
            flame: window.ctsReport && window.ctsReport.mem ? window.ctsReport.mem.drawn.flame.total : -1,
            status: s ? s.textContent : null,
          };
        });
      }
      const demo = path.join(work, 'demo.ctf');
      const demoInfo = JSON.parse(run(['info', '--json', '-q', demo]));

      // A trace served from a file: the page shows the CLI's numbers.
      let srv = await startServe(['-q', demo], false);
      serveOrigin = srv.origin;
      problems = [];
      let t = Date.now();
      await page.goto(srv.origin + '/', { timeout: 60000 });
      await page.waitForFunction(() => window.ctsReport && window.ctsReport.ready, null, { timeout: 60000 });
      console.log(`serve demo.ctf: opened in ${Date.now() - t} ms`);
      let fig = await memFigures();
      check(fig.samples === demoInfo.samples_total, `serve: samples ${fig.samples} != info ${demoInfo.samples_total}`);
      check(fig.allocs === demoInfo.allocs_total, `serve: allocations ${fig.allocs} != info ${demoInfo.allocs_total}`);
      check(fig.flame === demoInfo.samples_total, `serve: flame graph total ${fig.flame} != ${demoInfo.samples_total}`);
      check(fig.status === '', `serve: a static trace shows a live status '${fig.status}'`);
      noProblems('serve');
      // Leave the page before its server goes: a live page polls it, and a poll refused
      // after the next test's problems were reset would be blamed on that test.
      await page.goto('about:blank');
      let code = await stopServe(srv);
      check(code === 0, 'serve: SIGTERM exit ' + code);

      // Live mode: a trace streamed in two parts; the drawn numbers follow.
      srv = await startServe(['--listen', '127.0.0.1:0', '--refresh', '0.3'], true);
      serveOrigin = srv.origin;
      problems = [];
      await page.goto(srv.origin + '/', { timeout: 60000 });
      await page.waitForFunction(() => window.ctsLive && window.ctsLive.state === 'waiting', null, { timeout: 10000 }).catch(() => {});
      fig = await memFigures();
      check(/^live: waiting for a trace on 127\.0\.0\.1:\d+$/.test(fig.status || ''), `live: status before the trace '${fig.status}'`);
      const bytes = fs.readFileSync(demo);
      const ends = [];
      for (let off = 0; off + 8 <= bytes.length;) { off += bytes.readUInt32LE(off + 4) / 8; ends.push(off); }
      const cut = ends[ends.length - 2] + 10; // all but the last packet, and 10 bytes of it
      const sock = net.connect(srv.tracePort, '127.0.0.1');
      await new Promise((res, rej) => { sock.once('connect', res); sock.once('error', rej); });
      for (let off = 0; off < cut; off += 4096) sock.write(bytes.subarray(off, Math.min(cut, off + 4096)));
      t = Date.now();
      await page.waitForFunction(() => { const i = document.getElementById('mem-info'); return i && +i.dataset.samples > 0; }, null, { timeout: 10000 }).catch(() => {});
      const part = await memFigures();
      console.log(`live: first part shown after ${Date.now() - t} ms: ${part.samples} samples, '${part.status}'`);
      check(part.samples > 0 && part.samples < demoInfo.samples_total, `live: after part of the trace the page shows ${part.samples} samples (of ${demoInfo.samples_total})`);
      check(/^live: [\d ]+ events, last update /.test(part.status || ''), `live: status while receiving '${part.status}'`);
      await new Promise((res) => sock.end(bytes.subarray(cut), res));
      await page.waitForFunction((n) => { const i = document.getElementById('mem-info'); return i && +i.dataset.samples === n && window.ctsLive.state === 'ended'; }, demoInfo.samples_total, { timeout: 10000 }).catch(() => {});
      const whole = await memFigures();
      check(whole.samples === demoInfo.samples_total, `live: at the end the page shows ${whole.samples} samples, info ${demoInfo.samples_total}`);
      check(whole.allocs === demoInfo.allocs_total, `live: at the end ${whole.allocs} allocations, info ${demoInfo.allocs_total}`);
      check(whole.flame === demoInfo.samples_total, `live: flame graph total ${whole.flame} != ${demoInfo.samples_total}`);
      const shownEvents = /([\d ]+) events/.exec(whole.status || '');
      check(shownEvents && +shownEvents[1].replace(/ /g, '') === demoInfo.events_total && whole.status.startsWith('live (ended): '), `live: final status '${whole.status}' (info: ${demoInfo.events_total} events)`);
      noProblems('live');
      await page.screenshot({ path: path.join(outDir, 'serve-live.png'), fullPage: true });
      await page.goto('about:blank');
      code = await stopServe(srv);
      check(code === 0, 'live: SIGTERM exit ' + code);
      serveOrigin = null;
    }

    // --- a good and a bad run compared (report GOOD BAD, the ARP-race demo): both runs'
    // timelines on the page, aligned at their starts, the first divergence `diff` finds
    // drawn in each at its own time (a red column of pixels where the time axis puts it) --
    if (process.env.CTS_ARP_RACE) {
      const dir = path.join(work, 'arp');
      fs.mkdirSync(dir);
      execFileSync(process.env.CTS_ARP_RACE, ['--both', dir], { stdio: 'ignore' });
      const good = path.join(dir, 'arp_good.ctf'), bad = path.join(dir, 'arp_bad.ctf');
      const report = path.join(work, 'compare.html');
      run(['report', '-q', good, bad, '-o', report]);
      const diff = JSON.parse(run(['diff', '--json', good, bad]));
      // What the page shows, checked against `diff --json` (label: the report or serve).
      async function checkCompare(label) {
        const seen = await page.evaluate(() => {
          const api = window.ctsReport, C = api.data.compare, out = { view: api.view, runs: [] };
          for (const [s, id] of [[0, 'cmp-good'], [1, 'cmp-bad']]) {
            const c = document.getElementById(id), r = c.getBoundingClientRect();
            const side = s ? C.bad : C.good;
            const want = api.compare.xOf(side.next.t, s);
            // The red marker's columns on a pixel row below the axis.
            const dpr = c.width / c.clientWidth, y = Math.round((r.height - 6) * dpr);
            const px = c.getContext('2d').getImageData(0, y, c.width, 1).data, red = [];
            for (let x = 0; x < c.width; x++) if (px[4 * x] === 208 && px[4 * x + 1] === 0 && px[4 * x + 2] === 0) red.push(x / dpr);
            out.runs.push({ visible: r.width > 100 && r.height > 40 && c.offsetParent !== null, want: want, red: red, text: side.next.text, t: side.next.t });
          }
          out.summary = document.getElementById('cmp-summary').textContent;
          out.paths = [...document.querySelectorAll('#cmp-paths tr')].slice(1).map((r) => r.children[0].textContent);
          out.tasksRows = [api.data.tasks.n, api.data.compare_tasks.n];
          return out;
        });
        // The pixel reads above are the test's, not the page's: Chromium's hint about them
        // is no problem of the report.
        problems = problems.filter((p) => !p.includes('willReadFrequently'));
        check(seen.view === 'compare', `${label}: opens on ${seen.view}`);
        for (const [s, name] of [[0, 'good'], [1, 'bad']]) {
          const r = seen.runs[s], want = diff.divergence[name].next;
          check(r.visible, `${label}: the ${name} run's timeline is not on the page`);
          check(r.text === want.text && r.t === want.time_ns, `${label}: ${name} marker at '${r.text}' +${r.t} ns, diff says '${want.text}' +${want.time_ns} ns`);
          check(r.red.length > 0 && Math.abs((r.red[0] + r.red[r.red.length - 1]) / 2 - r.want) <= 1.5,
            `${label}: ${name} marker drawn at x ${r.red.join(',')}, its time is at x ${r.want.toFixed(1)}`);
        }
        check(seen.runs[0].t !== seen.runs[1].t && seen.runs[0].red[0] !== seen.runs[1].red[0], `${label}: both markers at the same place: ` + JSON.stringify(seen.runs));
        check(seen.summary.includes('port-4 signalled ARP response'), `${label}: summary ` + seen.summary);
        check(seen.paths.length === diff.rows.length && seen.paths[0] === diff.rows[0].path, `${label}: paths ` + JSON.stringify(seen.paths));
        check(seen.tasksRows[0] === 10 && seen.tasksRows[1] === 10, `${label}: tasks ` + seen.tasksRows);
      }
      await open(report, 'compare');
      await checkCompare('compare');
      await page.screenshot({ path: path.join(outDir, 'compare.png'), fullPage: true });
      // Aligned at the last common event: that event at one x in both, the markers still
      // drawn where each run's (shifted) axis puts them.
      const lastX = await page.evaluate(() => {
        const a = window.ctsReport.compare, C = window.ctsReport.data.compare;
        a.setAlignLast(true);
        return [a.xOf(C.good.last.t, 0), a.xOf(C.bad.last.t, 1)];
      });
      check(Math.abs(lastX[0] - lastX[1]) < 0.5, 'compare aligned: the last common event at x ' + lastX.join(' and '));
      await checkCompare('compare aligned');
      await page.evaluate(() => window.ctsReport.compare.setAlignLast(false));
      noProblems('compare');
      // `serve GOOD BAD` shows the same page from its server.
      const proc = require('child_process').spawn(ctfscope, ['serve', '-q', good, bad], { stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      const origin = await new Promise((resolve) => {
        const timer = setTimeout(() => resolve(null), 20000);
        proc.stderr.on('data', (b) => { err += b; const m = /serving (http:\/\/127\.0\.0\.1:\d+)\//.exec(err); if (m) { clearTimeout(timer); resolve(m[1]); } });
      });
      if (check(origin !== null, 'serve compare: did not start: ' + err)) {
        serveOrigin = origin;
        problems = [];
        await page.goto(origin + '/', { timeout: 60000 });
        await page.waitForFunction(() => window.ctsReport && window.ctsReport.ready, null, { timeout: 60000 });
        await checkCompare('serve compare');
        noProblems('serve compare');
        await page.goto('about:blank');
        serveOrigin = null;
      }
      proc.kill('SIGTERM');
    } else if (ci) {
      check(false, 'CTS_ARP_RACE is not set: the comparison report is not tested');
    }

    if (process.env.BENCH_TASKS) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cts-bench-'));
      execFileSync(genTraces, [dir, process.env.BENCH_TASKS]);
      const trace = path.join(dir, 'hostile.tasks.ctf'), report = path.join(dir, 'bench.html');
      const t = Date.now();
      run(['report', '-q', trace, '-o', report]);
      console.log(`bench: ${process.env.BENCH_TASKS} tasks, trace ${(fs.statSync(trace).size / 1e6).toFixed(1)} MB, report written in ${Date.now() - t} ms`);
      await open(report, 'bench');
      await page.click('#tab-tasks');
      await frameTimes('bench');
      await page.screenshot({ path: path.join(outDir, 'bench.png') });
      fs.rmSync(dir, { recursive: true, force: true });
    }
  } finally {
    await ctx.close();
    fs.rmSync(userDir, { recursive: true, force: true });
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main().then(() => {
  console.log(`${passes} passed, ${failures} failed, ${skips} skipped`);
  process.exit(failures ? 1 : 0);
}, (e) => {
  console.log('FAIL: ' + (e && e.stack || e));
  console.log(`${passes} passed, ${failures + 1} failed, ${skips} skipped`);
  fs.rmSync(work, { recursive: true, force: true });
  process.exit(1);
});
