// SPDX-License-Identifier: MIT
// report_bench: open time and timeline frame time of `ctfscope report` files in headless
// Debian chromium, driven by playwright-core (installed for the browser tests: `npm ci
// --prefix tests/report`). Not a test: it only measures and prints.
//
// Usage: node bench/report_bench.cjs [--runs N] [--frames N] [--profile OUT.cpuprofile] [--frame-profile OUT] REPORT.html...
//
// For each report, RUNS times (default 5) in a fresh page: "open" is from navigation start
// to the viewer's first complete render (window.ctsReport.timing.ready, a performance.now()
// mark, so on the page's own clock from navigation start), with the viewer's own split
// (parse, decode, init). With a task timeline, after the last run: FRAMES (default 400)
// timed pan/zoom steps (mean, median, p95, max), each one synchronous draw() followed by a
// one-pixel getImageData(), which makes the canvas rasterize what draw() recorded: what the
// frame costs before it can be shown; the same as CPU time of the renderer's main thread
// (where the script runs and the canvas is rasterized; from /proc/PID/task/PID/schedstat,
// less an empty call's), which a loaded machine inflates far
// less than wall-clock time; and the script-only time (draw() alone). --profile
// writes a V8 CPU profile of the first open (chrome devtools "Load profile"), --frame-profile
// one of the frames of the last report with a timeline.
'use strict';
const fs = require('fs');
const path = require('path');
const os = require('os');

const modules = path.join(__dirname, '..', 'tests', 'report', 'node_modules');
const { chromium } = require(path.join(modules, 'playwright-core'));

const args = process.argv.slice(2);
let runs = 5, frames = 400, profile = null, frameProfile = null;
const reports = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--runs') runs = +args[++i];
  else if (args[i] === '--frames') frames = +args[++i];
  else if (args[i] === '--profile') profile = args[++i];
  else if (args[i] === '--frame-profile') frameProfile = args[++i];
  else reports.push(path.resolve(args[i]));
}
if (!reports.length) {
  console.error('usage: node bench/report_bench.cjs [--runs N] [--frames N] [--profile OUT] REPORT.html...');
  process.exit(2);
}
// CPU time (ns) of every thread of every process descending from this one (the browser), or
// of the main threads of its renderer processes only.
// Unlike wall-clock time it does not grow when other jobs share the machine (much).
let browserPids = null;
function browserCpuNs(mainOfRenderers) {
  if (!browserPids) {
    const kids = new Map();
    for (const d of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      try {
        const st = fs.readFileSync('/proc/' + d + '/stat', 'utf8');
        kids.set(+d, +st.slice(st.lastIndexOf(')') + 2).split(' ')[1]);
      } catch (e) { /* gone */ }
    }
    browserPids = [];
    const todo = [process.pid];
    while (todo.length) {
      const p = todo.pop();
      for (const [pid, pp] of kids) if (pp === p) { browserPids.push(pid); todo.push(pid); }
    }
  }
  let total = 0;
  for (const pid of browserPids) {
    try {
      if (mainOfRenderers) {
        if (fs.readFileSync('/proc/' + pid + '/cmdline', 'utf8').includes('--type=renderer'))
          total += +fs.readFileSync('/proc/' + pid + '/task/' + pid + '/schedstat', 'utf8').split(' ')[0];
        continue;
      }
      for (const tid of fs.readdirSync('/proc/' + pid + '/task'))
        total += +fs.readFileSync('/proc/' + pid + '/task/' + tid + '/schedstat', 'utf8').split(' ')[0];
    } catch (e) { /* gone */ }
  }
  return total;
}
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const fmt = (v) => v.toFixed(1);

async function main() {
  const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cts-bench-chromium-'));
  const ctx = await chromium.launchPersistentContext(userDir, {
    executablePath: '/usr/bin/chromium', headless: true, viewport: { width: 1400, height: 1000 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    for (const report of reports) {
      const size = fs.statSync(report).size;
      const opens = [], parts = [];
      let page = null;
      for (let r = 0; r < runs; r++) {
        if (page) await page.close();
        page = await ctx.newPage();
        const errors = [];
        page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
        page.on('pageerror', (e) => errors.push(e.message));
        let cdp = null;
        if (profile && r === 0 && report === reports[0]) {
          cdp = await ctx.newCDPSession(page);
          await cdp.send('Profiler.enable');
          await cdp.send('Profiler.setSamplingInterval', { interval: 200 });
          await cdp.send('Profiler.start');
        }
        await page.goto('file://' + report, { timeout: 300000 });
        await page.waitForFunction(() => window.ctsReport && window.ctsReport.ready, null, { timeout: 300000, polling: 20 });
        const t = await page.evaluate(() => window.ctsReport.timing);
        if (cdp) {
          const { profile: p } = await cdp.send('Profiler.stop');
          fs.writeFileSync(profile, JSON.stringify(p));
          await cdp.detach();
        }
        if (errors.length) console.log('  errors: ' + errors.join('; '));
        opens.push(t.ready);
        parts.push(t);
      }
      const split = Object.keys(parts[0]).filter((k) => k !== 'ready' && typeof parts[0][k] === 'number')
        .map((k) => k + ' ' + fmt(median(parts.map((p) => p[k] || 0)))).join(', ');
      console.log(`${path.basename(report)}: ${(size / 1e6).toFixed(2)} MB, open median ${fmt(median(opens))} ms ` +
        `(min ${fmt(Math.min(...opens))}, max ${fmt(Math.max(...opens))}, ${runs} runs; split: ${split})`);
      const hasTasks = await page.evaluate(() => !!(window.ctsReport.data && window.ctsReport.data.tasks));
      if (hasTasks && frames > 0) {
        if (await page.$('#tab-tasks')) await page.click('#tab-tasks');
        browserPids = null; // a new page may have a new renderer
        let fcdp = null;
        if (frameProfile) {
          fcdp = await ctx.newCDPSession(page);
          await fcdp.send('Profiler.enable');
          await fcdp.send('Profiler.setSamplingInterval', { interval: 100 });
          await fcdp.send('Profiler.start');
        }
        // The walk, one step per call of window.benchStep(i): zoom in 20 steps at varying
        // points, pan around (with vertical scroll), zoom back out, pan at fit; again.
        await page.evaluate(() => {
          const t = window.ctsReport.tasks;
          // The canvas records drawing commands and rasterizes them when the frame is shown;
          // reading one pixel back forces that here, so a frame's time includes it.
          const g = document.getElementById('timeline').getContext('2d');
          window.benchStep = (i) => {
            const k = i % 100, lap = Math.floor(i / 100);
            if (k === 0) t.fit();
            const a = performance.now();
            if (k < 20) t.zoom(1.3, 200 + ((k * 97) % 1000));
            else if (k < 60) t.pan(k % 2 ? 37 + lap : -41, k % 3 ? 25 : -25);
            else if (k < 80) t.zoom(1 / 1.3, 700);
            else t.pan(53, k % 2 ? 40 : -40);
            const b = performance.now();
            g.getImageData(0, 0, 1, 1);
            return [performance.now() - a, b - a];
          };
        });
        // CPU time per frame: the browser's threads' run time (schedstat, ns) around each
        // step, less what an empty call costs (the DevTools protocol round trip).
        const empty = [];
        for (let i = 0; i < 50; i++) {
          const c0 = browserCpuNs(true);
          await page.evaluate(() => 0);
          empty.push(browserCpuNs(true) - c0);
        }
        const base = median(empty) / 1e6;
        const wall = [], js = [], cpu = [];
        for (let i = 0; i < frames; i++) {
          const c0 = browserCpuNs(true);
          const [w, j] = await page.evaluate((k) => window.benchStep(k), i);
          cpu.push(Math.max(0, (browserCpuNs(true) - c0) / 1e6 - base));
          wall.push(w);
          js.push(j);
        }
        const stats = (v) => {
          const s = [...v].sort((a, b) => a - b);
          return { n: s.length, mean: s.reduce((a, b) => a + b, 0) / s.length, med: s[s.length >> 1], p95: s[Math.floor(s.length * 0.95)], max: s[s.length - 1] };
        };
        const r = { all: stats(wall), js: stats(js), cpu: stats(cpu) };
        if (fcdp) {
          const { profile: p } = await fcdp.send('Profiler.stop');
          fs.writeFileSync(frameProfile, JSON.stringify(p));
          await fcdp.detach();
        }
        const line = (q) => `mean ${q.mean.toFixed(2)} ms, median ${q.med.toFixed(2)} ms, p95 ${q.p95.toFixed(2)} ms, max ${q.max.toFixed(2)} ms`;
        console.log(`  timeline: ${r.all.n} pan/zoom frames, drawn and rasterized, wall: ${line(r.all)}`);
        console.log(`            the same, CPU time of the renderer's main thread: ${line(r.cpu)} (empty call ${base.toFixed(2)} ms, subtracted)`);
        console.log(`            script only (draw() without the raster), wall: ${line(r.js)}`);
      }
      await page.close();
    }
  } finally {
    await ctx.close();
    fs.rmSync(userDir, { recursive: true, force: true });
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
