// SPDX-License-Identifier: MIT
// Real consumers of `ctfscope export`, run by CTest: speedscope's own importers (from its
// released bundle) load the folded, Chrome trace-event and pprof exports, and pprof-format's
// decoder reads the pprof export; every total must equal what `ctfscope top --json` says.
//
// Usage: node check_exports.cjs CTFSCOPE [--tasks TASK_TRACE]... TRACE...
// Exit status: 0 = all good, 1 = a check failed, 77 = skipped (node_modules missing; run
// `npm ci` in tests/js), unless CI=true, where a missing dependency is a failure.
'use strict';
const fs = require('fs');
const path = require('path');
const vm = require('vm');
const zlib = require('zlib');
const os = require('os');
const { execFileSync } = require('child_process');

const SKIP = 77;
const ci = process.env.CI === 'true';
const modules = path.join(__dirname, 'node_modules');

function missing(what) {
  console.log(`${what} is not installed: run 'npm ci' in tests/js (see tests/js/package.json)`);
  process.exit(ci ? 1 : SKIP);
}

if (!fs.existsSync(path.join(modules, 'speedscope')) || !fs.existsSync(path.join(modules, 'pprof-format')))
  missing('speedscope or pprof-format');

// speedscope ships a browser bundle, not a library. Its import functions sit in one module
// namespace object; the bundle is evaluated in a sandbox with that object made reachable,
// and with just enough of a browser for its top level to get that far.
function loadSpeedscope() {
  const dir = path.join(modules, 'speedscope/dist/release');
  const file = fs.readdirSync(dir).find(f => /^speedscope-.*\.js$/.test(f));
  let src = fs.readFileSync(path.join(dir, file), 'utf8');
  const re = /var ([\w$]+)=\{\};([\w$]+)\(\1,\{importFromFileSystemDirectoryEntry:/;
  if (!re.test(src)) throw new Error(`cannot find speedscope's importers in ${file}`);
  src = src.replace(re, (all, ns, exp) =>
    `var ${ns}=globalThis.__importers={};${exp}(${ns},{importFromFileSystemDirectoryEntry:`);
  const inert = new Proxy(function () {}, {
    get: (t, k) => (k === Symbol.toPrimitive ? () => '' : k === 'then' ? undefined : inert),
    apply: () => inert,
    construct: () => inert,
  });
  const sandbox = {
    console: { log() {}, warn() {}, error() {}, info() {}, debug() {}, time() {}, timeEnd() {} },
    setTimeout, clearTimeout, setInterval, clearInterval, queueMicrotask, performance,
    TextDecoder, TextEncoder, URL, atob, btoa, Blob: inert,
    document: inert, navigator: { userAgent: 'node', platform: 'linux' },
    location: { href: 'http://localhost/', hash: '', search: '', protocol: 'http:' },
    addEventListener() {}, removeEventListener() {}, requestAnimationFrame: () => 0,
    localStorage: { getItem: () => null, setItem() {} },
    matchMedia: () => ({ matches: false, addEventListener() {}, addListener() {} }),
  };
  sandbox.window = sandbox.self = sandbox.globalThis = sandbox;
  vm.createContext(sandbox);
  try {
    vm.runInContext(src, sandbox, { filename: file });
  } catch (e) {
    // The user interface cannot start without a DOM; the importers are defined before it.
  }
  if (!sandbox.__importers || !sandbox.__importers.importProfileGroupFromText)
    throw new Error('speedscope importers not reachable');
  return sandbox.__importers;
}

let failures = 0;
function check(cond, what) {
  if (!cond) {
    failures++;
    console.log(`  FAIL: ${what}`);
  }
}
function close(a, b, tol, what) {
  check(Math.abs(a - b) <= tol, `${what}: ${a} != ${b} (tolerance ${tol})`);
}

// Task traces (mirage-profile): speedscope loads the Chrome export; each thread's running
// periods must add up to what `ctfscope stats --json` says, and each task's lifetime lane
// is one profile of one slice.
async function checkTasks(ss, ctfscope, trace) {
  console.log(`${path.basename(trace)} (task trace)`);
  const run = args => execFileSync(ctfscope, args, { maxBuffer: 1 << 30 });
  const stats = JSON.parse(run(['stats', '--json', '-q', trace]).toString());
  const chrome = run(['export', '-f', 'chrome', '-q', trace]).toString();
  const doc = JSON.parse(chrome);
  const flows = doc.traceEvents.filter(e => e.ph === 's').length;
  check(flows === doc.traceEvents.filter(e => e.ph === 'f').length, 'every flow starts and ends');
  const g = await ss.importProfileGroupFromText('x.json', chrome);
  check(g && g.profiles.length >= 1, 'speedscope imports the task Chrome trace');
  if (!g) return;
  const lanes = g.profiles.filter(p => /thread \d+ \(running tasks\)/.test(p.getName()));
  if (process.env.CTS_DEBUG) console.log(g.profiles.slice(0, 4).map(p => p.getName()));
  check(lanes.length === stats.lanes, `speedscope finds ${lanes.length} thread lanes, stats says ${stats.lanes}`);
  const running = lanes.reduce((s, p) => s + p.getTotalNonIdleWeight(), 0); // µs
  close(running, stats.time.running_ns / 1000, 1e-6 * running + 0.01 * lanes.length, 'speedscope running time vs stats');
  const tasks = g.profiles.filter(p => /\(#-?\d+\)/.test(p.getName()));
  check(tasks.length === stats.tasks.total, `speedscope finds ${tasks.length} task lanes, stats says ${stats.tasks.total}`);
  console.log(`  ${lanes.length} thread lanes, ${running.toFixed(3)} us running, ${tasks.length} task lanes, ${flows} flows`);
}

async function main() {
  let args = process.argv.slice(2);
  const taskTraces = [];
  while (args.includes('--tasks')) {
    const i = args.indexOf('--tasks');
    taskTraces.push(args[i + 1]);
    args.splice(i, 2);
  }
  // --record PROGRAM: also a trace of PROGRAM recorded here (its frames name real modules)
  const recorded = [];
  while (args.includes('--record')) {
    const i = args.indexOf('--record');
    recorded.push(args[i + 1]);
    args.splice(i, 2);
  }
  const [ctfscope, ...traces] = args;
  if (!ctfscope || traces.length + taskTraces.length === 0) {
    console.log('usage: node check_exports.cjs CTFSCOPE TRACE...');
    process.exit(2);
  }
  const absent = traces.concat(taskTraces).filter(t => !fs.existsSync(t));
  if (absent.length) {
    console.log(`trace not found: ${absent.join(', ')} (is the golden corpus present?)`);
    process.exit(ci ? 1 : SKIP);
  }
  const { Profile } = await import('pprof-format');
  const ss = loadSpeedscope();
  await new Promise(r => setTimeout(r, 10)); // the importer module initialises on a promise
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ctfscope-exports-'));
  recorded.forEach((program, i) => {
    const out = path.join(tmp, `recorded${i}.ctf`);
    execFileSync(ctfscope, ['record', '-r', '1', '-o', out, '--', program], { stdio: 'ignore' });
    traces.push(out);
  });
  for (const trace of traces) {
    console.log(`${path.basename(trace)}`);
    const run = args => execFileSync(ctfscope, args, { maxBuffer: 1 << 30 });
    const top = JSON.parse(run(['top', '--json', '-n', '0', '-q', trace]).toString());
    const total = top.total.alloc_bytes, live = top.total.live_end_bytes;
    const nsites = top.sites.length;

    // folded: our sum, then speedscope's collapsed-stack importer
    const folded = run(['export', '-f', 'folded', '-q', trace]).toString();
    const lines = folded.split('\n').filter(l => l);
    const sum = lines.reduce((s, l) => s + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    close(sum, total, lines.length, 'folded total vs top');
    const g1 = await ss.importProfileGroupFromText('x.folded', folded);
    check(g1 && g1.profiles.length === 1, 'speedscope imports the folded stacks as one profile');
    if (g1) close(g1.profiles[0].getTotalWeight(), total, lines.length, 'speedscope folded weight');

    // chrome: speedscope's trace-event importer; the flame chart's span is the bytes allocated
    const chrome = run(['export', '-f', 'chrome', '-q', trace]).toString();
    JSON.parse(chrome);
    const g2 = await ss.importProfileGroupFromText('x.json', chrome);
    check(g2 && g2.profiles.length >= 1, 'speedscope imports the Chrome trace');
    if (g2) {
      const flame = g2.profiles.find(p => /allocations/.test(p.getName()));
      check(flame, 'speedscope finds the allocation flame chart');
      if (flame) close(flame.getTotalWeight(), total, 1e-6 * total + 1, 'speedscope chrome weight');
    }

    // pprof: pprof-format's decoder, then speedscope's pprof importer
    const pbfile = path.join(tmp, 'x.pb.gz');
    run(['export', '-f', 'pprof', '-o', pbfile, '-q', trace]);
    const gz = fs.readFileSync(pbfile);
    const prof = Profile.decode(zlib.gunzipSync(gz));
    const str = i => prof.stringTable.strings[Number(i)];
    const types = prof.sampleType.map(t => `${str(t.type)}/${str(t.unit)}`);
    check(types.join(',') === 'alloc_objects/count,alloc_space/bytes,inuse_objects/count,inuse_space/bytes',
      `pprof sample types ${types}`);
    const sums = [0, 0, 0, 0];
    for (const s of prof.sample) s.value.forEach((v, i) => (sums[i] += Number(v)));
    close(sums[1], total, prof.sample.length, 'pprof alloc_space vs top');
    close(sums[3], live, prof.sample.length, 'pprof inuse_space vs top');
    close(sums[0], top.total.allocs_est, prof.sample.length, 'pprof alloc_objects vs top');
    // Mappings: the main binary first (go tool pprof warns "Main binary filename not
    // available" otherwise), every location in one, its address within it.
    const exe = JSON.parse(run(['info', '--json', trace]).toString()).info.executable_name;
    check(prof.mapping.length >= 1 && str(prof.mapping[0].filename) === exe,
      `pprof mapping 1 is the main binary ${exe}`);
    const maps = new Map(prof.mapping.map(m => [Number(m.id), m]));
    check(prof.location.every(l => maps.has(Number(l.mappingId))),
      'every pprof location has a mapping');
    check(prof.location.every(l => {
      const m = maps.get(Number(l.mappingId));
      return m && BigInt(l.address) >= BigInt(m.memoryStart) && BigInt(l.address) < BigInt(m.memoryLimit);
    }), 'every pprof location lies in its mapping');
    const locIds = new Set(prof.location.map(l => Number(l.id)));
    check(prof.sample.every(s => s.locationId.every(id => locIds.has(Number(id)))),
      'every pprof sample location is defined');
    const g3 = await ss.importProfilesFromArrayBuffer('x.pb.gz', gz.buffer.slice(gz.byteOffset, gz.byteOffset + gz.length));
    check(g3 && g3.profiles.length >= 1, 'speedscope imports the pprof profile');
    if (g3) close(g3.profiles[0].getTotalWeight(), total, prof.sample.length, 'speedscope pprof weight');
    console.log(`  ${lines.length} folded stacks, ${prof.sample.length} pprof samples, ${nsites} sites, ` +
      `${total} bytes allocated, ${live} live at the end`);
  }
  for (const trace of taskTraces) await checkTasks(ss, ctfscope, trace);
  fs.rmSync(tmp, { recursive: true, force: true });
  console.log(failures ? `${failures} checks failed` : 'all checks passed');
  process.exit(failures ? 1 : 0);
}

main().catch(e => {
  console.log(`error: ${e.stack || e}`);
  process.exit(1);
});
