// SPDX-License-Identifier: MIT
// ctfscope report viewer. Vanilla JS, no dependencies, nothing fetched. Strings from the
// trace reach the page only through textContent and canvas fillText (never innerHTML).
// Drawing is on <canvas> scaled by devicePixelRatio; per-frame work is bounded by what is
// visible (binary searches in per-row arrays, one rectangle per pixel column at most).
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  // Every listener the views add goes through on(): loading new data aborts the old ones.
  let listeners = new AbortController();
  function on(target, type, fn, opts) {
    target.addEventListener(type, fn, Object.assign({ signal: listeners.signal }, opts || {}));
  }
  let data = null, api = null, views = [], redrawers = {};
  function show(name) {
    for (const [v] of views) {
      $('view-' + v).classList.toggle('hidden', v !== name);
      $('tab-' + v).classList.toggle('on', v === name);
    }
    api.view = name;
    if (redrawers[name]) redrawers[name]();
  }

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function humanBytes(b) { // same as cli_human_bytes
    const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
    let u = 0;
    while (b >= 1000 && u + 1 < units.length) { b /= 1000; u++; }
    if (u === 0) return b.toFixed(0) + ' B';
    return b.toFixed(b < 10 ? 2 : b < 100 ? 1 : 0) + ' ' + units[u];
  }
  function grouped(n) { return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ' '); }
  function humanNs(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(a >= 1e10 ? 2 : 3) + ' s';
    if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e7 ? 2 : 3) + ' ms';
    if (a >= 1e3) return (ns / 1e3).toFixed(a >= 1e4 ? 2 : 3) + ' µs';
    return ns.toFixed(0) + ' ns';
  }
  // Compact columns written by report_col_write()/report_strs_write() (report.h):
  // {t: type, n, z: base64(deflate(little-endian values)), d: 1 when delta-encoded, b: first
  // value} becomes a typed array of that type (the inflated bytes as they are) or,
  // delta-encoded, a Float64Array of b plus the sums; {n, zs: base64(deflate(NUL-separated UTF-8))} an array of strings.
  const TYPED = { u8: Uint8Array, i8: Int8Array, u16: Uint16Array, i16: Int16Array, u32: Uint32Array, i32: Int32Array, f64: Float64Array };
  function isPacked(v) {
    return v !== null && typeof v === 'object' && !Array.isArray(v) && !ArrayBuffer.isView(v) &&
      typeof v.n === 'number' && (typeof v.z === 'string' || typeof v.zs === 'string');
  }
  function base64Bytes(s) {
    if (Uint8Array.fromBase64) return Uint8Array.fromBase64(s);
    const bin = atob(s), out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  async function inflate(bytes) {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }
  async function decodePacked(v) {
    const bytes = await inflate(base64Bytes(v.z !== undefined ? v.z : v.zs));
    if (v.zs !== undefined) return new TextDecoder().decode(bytes).split('\0').slice(0, v.n);
    const T = TYPED[v.t];
    if (!T || bytes.length !== v.n * T.BYTES_PER_ELEMENT) throw new Error('a data column has the wrong type or length');
    const a = new T(bytes.buffer, 0, v.n); // a fresh buffer: aligned
    if (v.d !== 1) return a;
    const out = new Float64Array(v.n);
    let acc = typeof v.b === 'number' ? v.b : 0;
    for (let i = 0; i < v.n; i++) { acc += a[i]; out[i] = acc; }
    return out;
  }
  // Replaces every packed column of the document (nested at most 4 deep) in place, except
  // inside objects marked lazy (decoded later by their view: decodeColumns(thatObject)).
  async function decodeColumns(doc) {
    const jobs = [];
    (function walk(o, depth) {
      if (depth > 4 || o === null || typeof o !== 'object' || ArrayBuffer.isView(o)) return;
      for (const k of Object.keys(o)) {
        const v = o[k];
        if (isPacked(v)) jobs.push(decodePacked(v).then((d) => { o[k] = d; }));
        else if (v !== null && typeof v === 'object' && v.lazy !== 1 && (!Array.isArray(v) || (v.length && typeof v[0] === 'object'))) walk(v, depth + 1);
      }
    })(doc, 0);
    await Promise.all(jobs);
  }
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
  function setupCanvas(c) {
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(50, c.clientWidth), h = Math.max(50, c.clientHeight);
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr); c.height = Math.round(h * dpr);
    }
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    return { g: g, w: w, h: h };
  }
  const tip = $('tip');
  function showTip(ev, text) {
    tip.textContent = text;
    tip.classList.remove('hidden');
    const x = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    const y = Math.min(ev.clientY + 14, window.innerHeight - tip.offsetHeight - 8);
    tip.style.left = x + 'px'; tip.style.top = y + 'px';
  }
  function hideTip() { tip.classList.add('hidden'); }
  function download(name, blob) {
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = name;
    document.body.appendChild(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  }

  // ------------------------------------------------------------------------------------
  // Memory
  function initMem(m) {
    const bps = m.bytes_per_sample;
    const state = (api.mem = { range: null, drawn: {} });
    // Header.
    const info = $('mem-info');
    const rows = [
      ['File', m.file + ' (' + humanBytes(m.file_size) + (m.version ? ', memtrace v' + String(m.version).padStart(3, '0') : '') + ')'],
      ['Program', m.executable],
      ['Host, pid', (m.host || '') + ', pid ' + m.pid],
      ['Started', m.started],
      ['Sample rate', m.sample_rate >= 1 ? '1 (every word sampled), word size ' + m.word_size + ' bits'
        : m.sample_rate + ' per word, word size ' + m.word_size + ' bits'],
      ['Context', m.context === null ? '(none: format v001)' : m.context || '(empty)'],
      ['Runtime params', m.runtime_params || ''],
      ['Allocated', m.text.allocated + ' in ' + m.text.samples + ' samples (' + m.text.allocs + ' sampled blocks, ~' + m.text.allocs_est + ' allocations)'],
      ['Peak live', m.text.peak + ' at +' + (m.peak_time_us / 1e6).toFixed(3) + ' s'],
      ['Live at end', m.text.live_end],
      ['Duration', m.duration_s.toFixed(6) + ' s'],
      ['Events', 'alloc ' + grouped(m.events.alloc) + ', alloc_major ' + grouped(m.events.alloc_major) + ', alloc_ext ' + grouped(m.events.alloc_ext) + ', promote ' + grouped(m.events.promote) + ', collect ' + grouped(m.events.collect)],
      ['Reader', m.result],
    ];
    for (const [k, v] of rows) {
      const tr = el('tr');
      tr.appendChild(el('th', k));
      const td = el('td', v);
      td.dataset.key = k;
      tr.appendChild(td);
      info.appendChild(tr);
    }
    info.dataset.samples = m.samples;
    info.dataset.allocs = m.allocs;
    info.dataset.peakSamples = m.peak_samples;

    // Heap curve: -1 means "no event in this bucket": the value carries over.
    const heap = new Float64Array(m.heap.length);
    let prev = 0;
    for (let i = 0; i < m.heap.length; i++) { prev = m.heap[i] >= 0 ? m.heap[i] : prev; heap[i] = prev; }
    const endUs = Math.max(m.end_us, 1);

    // Records and the tree. The records (what the filters work on) are decoded after the
    // first frame (they are "lazy" in the document); until then, and whenever no filter is
    // set, the view comes from the per-node figures the report precomputed (m.self,
    // m.heap_delta).
    const R = m.records, nnodes = m.parent.length;
    const parent = m.parent, frame = m.frame, frames = m.frames;
    const wordBytes = m.word_size / 8 || 8;
    const recW = m.rec_us;
    // Children lists as one array (kids[kidStart[n] .. kidStart[n + 1]) are n's).
    const kidStart = new Int32Array(nnodes + 1), kids = new Int32Array(Math.max(0, nnodes - 1));
    for (let i = 1; i < nnodes; i++) kidStart[parent[i] + 1]++;
    for (let i = 0; i < nnodes; i++) kidStart[i + 1] += kidStart[i];
    {
      const at = kidStart.slice(0, nnodes);
      for (let i = 1; i < nnodes; i++) kids[at[parent[i]]++] = i;
    }
    function frameName(node) { return node === 0 ? 'all' : frames[frame[node] - 1] || '?'; }

    const self = new Float64Array(nnodes), total = new Float64Array(nnodes);
    const filtHeap = new Float64Array(Math.ceil(endUs / recW) + 2);
    function numOr(id, dflt) { const v = parseFloat($(id).value); return isFinite(v) ? v : dflt; }
    function matcher(text) {
      const s = text.trim().toLowerCase();
      if (!s) return null;
      const flags = new Uint8Array(nnodes);
      for (let i = 1; i < nnodes; i++) flags[i] = flags[parent[i]] || frameName(i).toLowerCase().includes(s) ? 1 : 0;
      return flags;
    }
    let recordsReady = false, recordsLoading = null;
    function loadRecords() {
      if (!recordsLoading) {
        recordsLoading = decodeColumns(R).then(() => {
          recordsReady = state.recordsReady = true;
          if (state.wantRecords) compute();
        }, (e) => { $('filter-status').textContent = 'Cannot read the allocation records: ' + e.message; throw e; });
      }
      return recordsLoading;
    }
    state.loadRecords = loadRecords;
    function compute() {
      const mode = $('f-mode').value;
      let a = -Infinity, b = Infinity;
      if (state.range) { a = state.range[0]; b = state.range[1]; }
      if (mode === 'peak') { a = b = m.peak_time_us; }
      const smin = numOr('f-smin', 0), smax = numOr('f-smax', Infinity);
      const lmin = numOr('f-lmin', 0) * 1000, lmax = numOr('f-lmax', Infinity) * 1000;
      const src = [$('f-minor').checked, $('f-major').checked, $('f-ext').checked];
      const inside = matcher($('f-inside').value), outside = matcher($('f-outside').value);
      const unfiltered = mode === 'all' && smin <= 0 && smax === Infinity && lmin <= 0 && lmax === Infinity && src[0] && src[1] && src[2] && !inside && !outside;
      self.fill(0); total.fill(0); filtHeap.fill(0);
      let samples = 0, blocks = 0;
      state.wantRecords = false;
      if (unfiltered) {
        self.set(m.self);
        for (let i = 0; i < filtHeap.length && i < m.heap_delta.length; i++) filtHeap[i] = m.heap_delta[i];
        samples = m.samples; blocks = m.rec_blocks;
      } else if (!recordsReady) {
        state.wantRecords = true;
        loadRecords();
        $('filter-status').textContent = 'Reading the allocation records for the filters…';
        return;
      } else {
        const nrec = R.n, rTa = R.ta, rTf = R.tf, rSize = R.size, rSrc = R.src, rNode = R.node, rSamples = R.samples, rBlocks = R.blocks, sizeLow = R.size_low;
        for (let i = 0; i < nrec; i++) {
          const ta = rTa[i], tf = rTf[i];
          const a0 = ta * recW, a1 = a0 + recW;
          const f0 = tf < 0 ? Infinity : tf * recW, f1 = tf < 0 ? Infinity : f0 + recW;
          switch (mode) {
            case 'alloc': if (!(a0 <= b && a1 > a)) continue; break;
            case 'live': case 'peak': if (!(a0 <= b && f1 > a)) continue; break;
            case 'collect': if (!(tf >= 0 && f0 <= b && f1 > a)) continue; break;
            case 'never': if (tf >= 0) continue; break;
          }
          const size = sizeLow[rSize[i]] * wordBytes;
          if (size < smin || size > smax) continue;
          const life = tf < 0 ? endUs - a0 : (tf - ta) * recW;
          if (life < lmin || life > lmax) continue;
          if (!src[rSrc[i]]) continue;
          const node = rNode[i];
          if (inside && !inside[node]) continue;
          if (outside && outside[node]) continue;
          const sm = rSamples[i];
          self[node] += sm;
          samples += sm;
          blocks += rBlocks[i];
          filtHeap[ta] += sm;
          if (tf >= 0) filtHeap[tf] -= sm;
        }
      }
      for (let i = 1; i < filtHeap.length; i++) filtHeap[i] += filtHeap[i - 1];
      for (let i = 0; i < nnodes; i++) total[i] = self[i];
      for (let i = nnodes - 1; i > 0; i--) total[parent[i]] += total[i];
      state.filtered = { samples: samples, blocks: blocks };
      $('filter-status').textContent = 'Selected: ' + humanBytes(samples * bps) + ' in ' + grouped(samples) + ' samples, ' + grouped(blocks) + ' sampled blocks' + (samples === m.samples ? ' (everything)' : ' (' + (m.samples ? (100 * samples / m.samples).toFixed(1) : '0') + ' % of all)');
      $('filter-status').dataset.samples = samples;
      buildTree();
      drawHeap(); drawFlame();
    }
    // The displayed tree: callees (the call tree itself, children sorted by weight when first
    // drawn) or callers (inverted at allocation sites, built here). Nodes are numbers;
    // tree.name(n), tree.w(n), tree.parent(n), tree.kids(n) (null when none).
    let tree = null;
    const MAX_CALLER_DEPTH = 256;
    function buildTree() {
      const callers = $('f-orient').value === 'callers';
      if (!callers) {
        const sorted = new Map();
        tree = {
          name: frameName, w: (n) => total[n], parent: (n) => (n === 0 ? -1 : parent[n]),
          kids(n) {
            let l = sorted.get(n);
            if (l === undefined) {
              l = [];
              for (let k = kidStart[n]; k < kidStart[n + 1]; k++) if (total[kids[k]] > 0) l.push(kids[k]);
              l.sort((x, y) => total[y] - total[x]);
              if (!l.length) l = null;
              sorted.set(n, l);
            }
            return l;
          },
        };
      } else {
        const t = { name: [], w: [], kids: [], parent: [] };
        const add = (name, par) => { t.name.push(name); t.w.push(0); t.kids.push(null); t.parent.push(par); return t.name.length - 1; };
        add('all', -1);
        const maps = [new Map()];
        for (let n = 1; n < nnodes; n++) {
          const s = self[n];
          if (!s) continue;
          t.w[0] += s;
          let tn = 0, depth = 0;
          for (let k = n; k !== 0 && depth < MAX_CALLER_DEPTH; k = parent[k], depth++) {
            const key = frame[k];
            let c = maps[tn].get(key);
            if (c === undefined) { c = add(frameName(k), tn); maps.push(new Map()); maps[tn].set(key, c); }
            t.w[c] += s;
            tn = c;
          }
        }
        for (let i = 0; i < maps.length; i++) if (maps[i].size) t.kids[i] = Array.from(maps[i].values()).sort((x, y) => t.w[y] - t.w[x]);
        tree = { name: (n) => t.name[n], w: (n) => t.w[n], parent: (n) => t.parent[n], kids: (n) => t.kids[n] };
      }
      state.focus = 0;
      state.scroll = 0;
    }

    // Heap graph with brushing.
    const heapC = $('heap');
    let brush = null;
    function drawHeap() {
      const { g, w, h } = setupCanvas(heapC);
      const L = 64, Rm = 10, T = 10, B = 22, pw = w - L - Rm, ph = h - T - B;
      g.clearRect(0, 0, w, h);
      let maxv = 0;
      for (let i = 0; i < heap.length; i++) maxv = Math.max(maxv, heap[i]);
      maxv = Math.max(maxv, 1);
      const x = (us) => L + (us / endUs) * pw, y = (s) => T + ph - (s / maxv) * ph;
      g.fillStyle = '#f0f3f6'; g.fillRect(L, T, pw, ph);
      if (state.range || brush) {
        const r = brush || state.range;
        g.fillStyle = 'rgba(255, 200, 0, 0.25)';
        g.fillRect(x(Math.min(r[0], r[1])), T, Math.max(1, Math.abs(x(r[1]) - x(r[0]))), ph);
      }
      g.beginPath(); g.moveTo(L, y(0));
      for (let i = 0; i < heap.length; i++) { g.lineTo(x(i * m.heap_us), y(heap[i])); g.lineTo(x(Math.min((i + 1) * m.heap_us, endUs)), y(heap[i])); }
      g.lineTo(x(endUs), y(0)); g.closePath();
      g.fillStyle = '#cbd5e0'; g.fill();
      g.strokeStyle = '#4a5568'; g.lineWidth = 1; g.stroke();
      // Filtered subset, at the records' resolution.
      g.beginPath(); g.moveTo(L, y(0));
      for (let i = 0; i < filtHeap.length && i * recW <= endUs; i++) { g.lineTo(x(i * recW), y(filtHeap[i])); g.lineTo(x(Math.min((i + 1) * recW, endUs)), y(filtHeap[i])); }
      g.lineTo(x(Math.min(filtHeap.length * recW, endUs)), y(0)); g.closePath();
      g.fillStyle = 'rgba(43, 108, 176, 0.45)'; g.fill();
      // Peak.
      const px = x(m.peak_time_us), py = y(m.peak_samples);
      g.fillStyle = '#c53030'; g.beginPath(); g.arc(px, py, 4, 0, 7); g.fill();
      g.font = '12px sans-serif'; g.textBaseline = 'bottom';
      const ptxt = 'peak ' + humanBytes(m.peak_samples * bps);
      g.textAlign = px > w - 120 ? 'right' : 'left';
      g.fillText(ptxt, px + (px > w - 120 ? -6 : 6), Math.max(T + 12, py - 2));
      // Axes.
      g.fillStyle = '#5d6773'; g.textAlign = 'right'; g.textBaseline = 'middle';
      for (let k = 0; k <= 4; k++) g.fillText(humanBytes(maxv * bps * k / 4), L - 4, y(maxv * k / 4));
      g.textAlign = 'center'; g.textBaseline = 'top';
      for (let k = 0; k <= 5; k++) g.fillText('+' + (endUs * k / 5 / 1e6).toFixed(3) + ' s', Math.min(Math.max(x(endUs * k / 5), L + 20), w - 30), T + ph + 4);
      state.drawn.heap = { buckets: heap.length, peakX: px, peakY: py };
      heapC._geom = { L: L, pw: pw };
    }
    function heapTime(ev) {
      const r = heapC.getBoundingClientRect(), gm = heapC._geom;
      return Math.max(0, Math.min(endUs, ((ev.clientX - r.left - gm.L) / gm.pw) * endUs));
    }
    on(heapC, 'mousedown', (ev) => { brush = [heapTime(ev), heapTime(ev)]; drawHeap(); });
    on(window, 'mousemove', (ev) => { if (brush) { brush[1] = heapTime(ev); drawHeap(); } });
    on(window, 'mouseup', () => {
      if (!brush) return;
      const r = [Math.min(brush[0], brush[1]), Math.max(brush[0], brush[1])];
      brush = null;
      if (r[1] - r[0] > endUs / 2000) setRange(r); else drawHeap();
    });
    on(heapC, 'dblclick', () => setRange(null));
    on(heapC, 'mousemove', (ev) => {
      if (brush) return;
      const t = heapTime(ev), i = Math.min(heap.length - 1, Math.floor(t / m.heap_us));
      showTip(ev, '+' + (t / 1e6).toFixed(6) + ' s\nlive ' + humanBytes(heap[i] * bps) + ' (largest in this bucket)');
    });
    on(heapC, 'mouseleave', hideTip);
    function setRange(r) {
      state.range = r;
      $('f-range').value = r ? '+' + (r[0] / 1e6).toFixed(6) + ' s … +' + (r[1] / 1e6).toFixed(6) + ' s' : '';
      if (r && $('f-mode').value === 'all') $('f-mode').value = 'alloc';
      compute();
    }
    api.mem.setRange = setRange;

    // Flame graph.
    const flameC = $('flame');
    const ROW = 18;
    function color(name) {
      let hsh = 0;
      for (let i = 0; i < name.length; i++) hsh = (hsh * 31 + name.charCodeAt(i)) | 0;
      const hue = 10 + (Math.abs(hsh) % 40), light = 55 + (Math.abs(hsh >> 8) % 20);
      return 'hsl(' + hue + ',80%,' + light + '%)';
    }
    let rects = [];
    function drawFlame() {
      const { g, w, h } = setupCanvas(flameC);
      g.clearRect(0, 0, w, h);
      rects = [];
      if (!tree || !tree.w(0)) {
        g.fillStyle = '#5d6773'; g.font = '13px sans-serif'; g.fillText('No allocation matches the filters.', 10, 20);
        state.drawn.flame = { rects: 0, total: 0 };
        return;
      }
      const callers = $('f-orient').value === 'callers';
      // Ancestors of the focus take the full width.
      const chain = [];
      for (let n = state.focus; n >= 0; n = tree.parent(n)) chain.unshift(n);
      const levels = Math.floor(h / ROW);
      const yOf = (depth) => (callers ? (depth - state.scroll) * ROW : h - (depth - state.scroll + 1) * ROW);
      g.font = '11px sans-serif'; g.textBaseline = 'middle';
      let count = 0;
      function box(n, depth, x0, wd) {
        const d = depth - state.scroll;
        if (d < 0 || d >= levels) return;
        const y = yOf(depth);
        g.fillStyle = chain.includes(n) && n !== state.focus ? '#d9d2c5' : color(tree.name(n));
        g.fillRect(x0, y, Math.max(wd - 0.5, 0.5), ROW - 1);
        if (wd > 30) {
          g.fillStyle = '#1a202c';
          g.save(); g.beginPath(); g.rect(x0, y, wd - 2, ROW); g.clip();
          g.fillText(tree.name(n), x0 + 3, y + ROW / 2);
          g.restore();
        }
        rects.push([x0, y, wd, n]);
        count++;
      }
      for (let i = 0; i < chain.length; i++) box(chain[i], i, 0, w);
      // Descendants of the focus, proportional; explicit stack (stacks can be 10 000 deep).
      const scale = w / tree.w(state.focus);
      const stack = [[state.focus, chain.length - 1, 0]];
      while (stack.length) {
        const [n, depth, x0] = stack.pop();
        if (depth - state.scroll >= levels) continue;
        const ks = tree.kids(n);
        if (!ks) continue;
        let x = x0;
        for (const k of ks) {
          const wd = tree.w(k) * scale;
          if (wd < 0.5) break; // sorted by weight: the rest are smaller
          box(k, depth + 1, x, wd);
          stack.push([k, depth + 1, x]);
          x += wd;
        }
      }
      state.drawn.flame = { rects: count, total: tree.w(0), focus: tree.name(state.focus) };
      flameC.dataset.rects = count;
    }
    function flameHit(ev) {
      const r = flameC.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
      for (let i = rects.length - 1; i >= 0; i--) {
        const q = rects[i];
        if (x >= q[0] && x < q[0] + q[2] && y >= q[1] && y < q[1] + ROW) return q[3];
      }
      return -1;
    }
    on(flameC, 'click', (ev) => {
      const n = flameHit(ev);
      if (n < 0) return;
      state.focus = n === state.focus ? Math.max(0, tree.parent(n)) : n;
      drawFlame();
    });
    on(flameC, 'mousemove', (ev) => {
      const n = flameHit(ev);
      if (n < 0) { hideTip(); return; }
      const wgt = tree.w(n);
      showTip(ev, tree.name(n) + '\n' + humanBytes(wgt * bps) + ' (' + grouped(wgt) + ' samples, ' + (100 * wgt / tree.w(0)).toFixed(1) + ' % of the selection)');
    });
    on(flameC, 'mouseleave', hideTip);
    on(flameC, 'wheel', (ev) => {
      ev.preventDefault();
      state.scroll = Math.max(0, state.scroll + (ev.deltaY > 0 ? 3 : -3));
      drawFlame();
    }, { passive: false });
    for (const id of ['f-mode', 'f-smin', 'f-smax', 'f-lmin', 'f-lmax', 'f-inside', 'f-outside', 'f-minor', 'f-major', 'f-ext', 'f-orient'])
      on($(id), id === 'f-inside' || id === 'f-outside' || id.startsWith('f-s') || id.startsWith('f-l') ? 'input' : 'change', compute);

    // Top sites (figures formatted by the CLI's own code).
    const st = $('sites');
    const head = el('tr');
    for (const c of ['allocated', '%', 'allocs', 'peak live', 'live at end']) head.appendChild(el('th', c));
    head.appendChild(el('th', 'site', 'site'));
    st.appendChild(head);
    for (const s of m.sites) {
      const tr = el('tr');
      tr.dataset.samples = s[1];
      tr.dataset.peakSamples = s[3];
      tr.dataset.liveSamples = s[4];
      for (const v of [s[5], s[6], s[7], s[8], s[9]]) tr.appendChild(el('td', v));
      tr.appendChild(el('td', s[0], 'site'));
      st.appendChild(tr);
    }
    $('sites-note').textContent = (m.sites.length < m.sites_total ? 'Top ' + m.sites.length + ' of ' : 'All ') + m.sites_total + ' sites by allocated bytes, grouped by function, file and line (as `ctfscope top`).';

    // Histograms: [low, blocks, samples] triples.
    function drawHist(c, triples, unit, fmt) {
      const { g, w, h } = setupCanvas(c);
      g.clearRect(0, 0, w, h);
      const n = triples.length / 3;
      g.font = '11px sans-serif'; g.fillStyle = '#5d6773';
      if (!n) { g.fillText('no data', 10, 20); return 0; }
      const lows = [], vals = [];
      for (let i = 0; i < n; i++) { lows.push(triples[3 * i] * unit); vals.push(triples[3 * i + 2] * bps); }
      const lo = Math.log2(Math.max(1, lows[0])), hi = Math.log2(Math.max(2, lows[n - 1] * 1.07));
      const L = 58, B = 20, pw = w - L - 8, ph = h - B - 8;
      const maxv = Math.max(...vals, 1);
      const x = (v) => L + ((Math.log2(Math.max(1, v)) - lo) / Math.max(hi - lo, 1)) * pw;
      g.fillStyle = '#2b6cb0';
      for (let i = 0; i < n; i++) {
        const x0 = x(lows[i]), x1 = Math.max(x0 + 2, x(lows[i] * 1.0625));
        const bh = (vals[i] / maxv) * ph;
        g.fillRect(x0, 8 + ph - bh, x1 - x0, bh);
      }
      g.fillStyle = '#5d6773'; g.textAlign = 'right'; g.textBaseline = 'middle';
      g.fillText(humanBytes(maxv), L - 4, 8); g.fillText('0', L - 4, 8 + ph);
      g.textAlign = 'center'; g.textBaseline = 'top';
      for (let k = 0; k <= 4; k++) { const v = Math.pow(2, lo + (hi - lo) * k / 4); g.fillText(fmt(v), Math.min(Math.max(x(v), L + 20), w - 24), 8 + ph + 3); }
      return n;
    }
    function drawHists() {
      state.drawn.sizeBars = drawHist($('hist-size'), m.size_hist, wordBytes, humanBytes);
      state.drawn.lifeBars = drawHist($('hist-life'), m.life_hist, 1000, humanNs);
    }
    redrawers.mem = () => { drawHeap(); drawFlame(); drawHists(); };
    compute();
    state.compute = compute;
  }

  // ------------------------------------------------------------------------------------
  // Tasks: the timeline.
  const TYPES = ['wait', 'task', 'bind', 'try', 'choose', 'pick', 'join', 'map', 'condition', 'on_success', 'on_failure', 'on_termination', 'on_any', 'ignore_result', 'async', 'promise', 'semaphore', 'switch'];
  const F_RESOLVED = 1, F_FAILED = 2, F_NEVER = 32;
  const ARROW_COLORS = ['rgb(204,204,102)', 'rgb(0,0,255)', 'rgb(255,0,0)', 'rgb(0,128,0)', 'rgb(255,153,0)'];
  const ARROW_NAMES = ['try_read', 'read', 'failed read', 'resolve', 'signal'];
  const ARROW_BUDGET = 6000; // arrows considered per frame; above it, a regular sample

  // Painters: the timeline is drawn into batches, flushed to a canvas or to SVG elements.
  let stripCanvas = null, layerCanvas = null, layerImg = null, layer32 = null;
  const LITTLE = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
  // rgb(r,g,b) as one opaque pixel of a Uint32Array over RGBA bytes.
  function pixelOf(css) {
    const m = /(\d+),\s*(\d+),\s*(\d+)/.exec(css), r = +m[1], gr = +m[2], b = +m[3];
    return (LITTLE ? (255 << 24) | (b << 16) | (gr << 8) | r : (r << 24) | (gr << 16) | (b << 8) | 255) >>> 0;
  }
  // The outline of rectangles side by side (see columns()): along the tops left to right,
  // back along the bottoms, a new polygon after each gap.
  function outline(r, move, line) {
    for (let a = 0; a < r.length;) {
      let b = a + 4;
      while (b < r.length && r[b] <= r[b - 4] + r[b - 2] + 1e-6) b += 4;
      move(r[a], r[a + 1]);
      for (let q = a; q < b; q += 4) { line(r[q], r[q + 1]); line(r[q] + r[q + 2], r[q + 1]); }
      for (let q = b - 4; q >= a; q -= 4) { line(r[q] + r[q + 2], r[q + 1] + r[q + 3]); line(r[q], r[q + 1] + r[q + 3]); }
      a = b;
    }
  }
  function canvasPainter(g) {
    return {
      // Pixels written by the script, for geometry a software canvas is slow to rasterize
      // (thousands of 1-px lines and small triangles, each anti-aliased): the layer is one
      // ImageData over the canvas's rows [top, bottom) (CSS px), composited in one drawImage
      // by done(). fill(x, y, w, h, pixel) fills a rectangle, edges rounded to device pixels,
      // clipped to the layer.
      layer(top, bottom) {
        const dpr = g.getTransform().a || 1, W = g.canvas.width;
        const Y0 = Math.max(0, Math.floor(top * dpr)), H = Math.min(g.canvas.height, Math.ceil(bottom * dpr)) - Y0;
        if (W <= 0 || H <= 0) return null;
        if (!layerImg || layerImg.width !== W || layerImg.height !== H) {
          layerImg = new ImageData(W, H); layer32 = new Uint32Array(layerImg.data.buffer);
          layerCanvas = document.createElement('canvas'); layerCanvas.width = W; layerCanvas.height = H;
        }
        const px = layer32;
        let minY = H, maxY = -1;
        return {
          fill(x, y, w, h, c) {
            const xa = Math.max(0, Math.round(x * dpr)), xb = Math.min(W, Math.round((x + w) * dpr));
            const ya = Math.max(0, Math.round(y * dpr) - Y0), yb = Math.min(H, Math.round((y + h) * dpr) - Y0);
            if (xa >= xb || ya >= yb) return;
            if (ya < minY) minY = ya;
            if (yb - 1 > maxY) maxY = yb - 1;
            if (xb - xa > 8) for (let r = ya; r < yb; r++) px.fill(c, r * W + xa, r * W + xb);
            else for (let xx = xa; xx < xb; xx++) for (let p = ya * W + xx, e = yb * W; p < e; p += W) px[p] = c;
          },
          // An arrow head pointing at (x + 0.5, y), 6 px long towards dir (+1 down, -1 up):
          // rows 1, 1, 3, 3, 5, 5 px wide from its tip.
          head(x, y, dir, c) {
            if (dpr !== 1) {
              for (let k = 0; k < 6; k++) { const hw = (k >> 1) + 0.5; this.fill(x + 0.5 - hw, dir > 0 ? y + k : y - 1 - k, 2 * hw, 1, c); }
              return;
            }
            if (x < 2 || x + 2 >= W) return;
            for (let k = 0; k < 6; k++) {
              const r = (dir > 0 ? y + k : y - 1 - k) - Y0, hw = k >> 1;
              if (r < 0 || r >= H) continue;
              if (r < minY) minY = r;
              if (r > maxY) maxY = r;
              for (let p = r * W + x - hw, e = r * W + x + hw; p <= e; p++) px[p] = c;
            }
          },
          done() {
            if (maxY < minY) return;
            const lg = layerCanvas.getContext('2d');
            lg.putImageData(layerImg, 0, 0, 0, minY, W, maxY - minY + 1);
            px.fill(0, minY * W, (maxY + 1) * W); // clean for the next frame
            g.save(); g.setTransform(1, 0, 0, 1, 0, 0);
            g.drawImage(layerCanvas, 0, minY, W, maxY - minY + 1, 0, Y0 + minY, W, maxY - minY + 1);
            g.restore();
          },
        };
      },
      rect(color, x, y, w, h) { g.fillStyle = color; g.fillRect(x, y, w, h); },
      // Rectangles side by side (x, y, w, h quadruples in x order, not overlapping) filled as
      // the outline of their union, one polygon per stretch without a gap: one fill instead
      // of a fillRect per pixel column (a dense counter's columns of varying extent).
      columns(color, r) {
        if (!r.length) return;
        g.fillStyle = color;
        g.beginPath();
        outline(r, (x, y) => g.moveTo(x, y), (x, y) => g.lineTo(x, y));
        g.fill();
      },
      strip(rgb, y, h) { // one colour per pixel column (r, g, b bytes), from y down h pixels
        const n = rgb.length / 3;
        if (!stripCanvas || stripCanvas.width !== n) { stripCanvas = document.createElement('canvas'); stripCanvas.width = n; stripCanvas.height = 1; }
        const sg = stripCanvas.getContext('2d'), img = sg.createImageData(n, 1);
        for (let x = 0; x < n; x++) { img.data[4 * x] = rgb[3 * x]; img.data[4 * x + 1] = rgb[3 * x + 1]; img.data[4 * x + 2] = rgb[3 * x + 2]; img.data[4 * x + 3] = 255; }
        sg.putImageData(img, 0, 0);
        g.imageSmoothingEnabled = false;
        g.drawImage(stripCanvas, 0, 0, n, 1, 0, y, n, h);
      },
      rects(color, r) { // x, y, w, h quadruples
        if (!r.length) return;
        // What is cheap to rasterize on a software canvas: a small thin rectangle (at most
        // 3 px across, 40 long) as that many 1-px lines in one path (hairlines have their own
        // fast rasterizer), any other by fillRect. A path of thousands of rectangles goes
        // through anti-aliased path filling, 10-100x slower; thousands of fillRect calls cost
        // about 1 µs each.
        const hair = (w, h) => (w <= 3 && h <= 40) || (h <= 3 && w <= 40);
        let thin = 0;
        g.fillStyle = color;
        for (let i = 0; i < r.length; i += 4) {
          if (!hair(r[i + 2], r[i + 3])) g.fillRect(r[i], r[i + 1], r[i + 2], r[i + 3]);
          else thin++;
        }
        if (!thin) return;
        g.strokeStyle = color; g.lineWidth = 1;
        g.beginPath();
        for (let i = 0; i < r.length; i += 4) {
          const x = r[i], y = r[i + 1], w = r[i + 2], h = r[i + 3];
          if (!hair(w, h)) continue;
          if (h <= w) for (let k = 0.5; k < h; k++) { g.moveTo(x, y + k); g.lineTo(x + w, y + k); }
          else for (let k = 0.5; k < w; k++) { g.moveTo(x + k, y); g.lineTo(x + k, y + h); }
        }
        g.stroke();
      },
      lines(color, width, segs, alpha) {
        if (!segs.length) return;
        g.strokeStyle = color; g.lineWidth = width; g.globalAlpha = alpha === undefined ? 1 : alpha;
        g.beginPath();
        for (let i = 0; i < segs.length; i += 4) { g.moveTo(segs[i], segs[i + 1]); g.lineTo(segs[i + 2], segs[i + 3]); }
        g.stroke(); g.globalAlpha = 1;
      },
      triangles(color, pts) { // one path, one fill: colour changes are what is slow
        if (!pts.length) return;
        g.fillStyle = color;
        g.beginPath();
        // No closePath: fill() closes every subpath, and closePath makes long paths slow.
        for (let i = 0; i < pts.length; i += 6) { g.moveTo(pts[i], pts[i + 1]); g.lineTo(pts[i + 2], pts[i + 3]); g.lineTo(pts[i + 4], pts[i + 5]); }
        g.fill();
      },
      text(color, s, x, y, align, maxw) {
        g.fillStyle = color; g.textAlign = align || 'left';
        if (maxw !== undefined) {
          g.save(); g.beginPath(); g.rect(align === 'right' ? x - maxw : x, y - 14, maxw, 18); g.clip();
          g.fillText(s, x, y); g.restore();
        } else g.fillText(s, x, y);
      },
    };
  }
  function svgPainter(svg) {
    const NS = 'http://www.w3.org/2000/svg';
    function add(tag, attrs) { const e = document.createElementNS(NS, tag); for (const k in attrs) e.setAttribute(k, attrs[k]); svg.appendChild(e); return e; }
    let clipN = 0;
    return {
      rect(color, x, y, w, h) { add('rect', { x: x, y: y, width: w, height: h, fill: color }); },
      strip(rgb, y, h) { // runs of one colour as rectangles
        for (let x = 0; x < rgb.length / 3;) {
          let e = x + 1;
          while (e < rgb.length / 3 && rgb[3 * e] === rgb[3 * x] && rgb[3 * e + 1] === rgb[3 * x + 1] && rgb[3 * e + 2] === rgb[3 * x + 2]) e++;
          if (rgb[3 * x] !== 230 || rgb[3 * x + 1] !== 230 || rgb[3 * x + 2] !== 230)
            add('rect', { x: x, y: y, width: e - x, height: h, fill: 'rgb(' + rgb[3 * x] + ',' + rgb[3 * x + 1] + ',' + rgb[3 * x + 2] + ')' });
          x = e;
        }
      },
      columns(color, r) {
        if (!r.length) return;
        let d = '';
        outline(r, (x, y) => { d += 'M' + x.toFixed(1) + ' ' + y.toFixed(1); }, (x, y) => { d += 'L' + x.toFixed(1) + ' ' + y.toFixed(1); });
        add('path', { d: d, fill: color });
      },
      rects(color, r) {
        if (!r.length) return;
        let d = '';
        for (let i = 0; i < r.length; i += 4) d += 'M' + r[i].toFixed(1) + ' ' + r[i + 1].toFixed(1) + 'h' + r[i + 2].toFixed(1) + 'v' + r[i + 3].toFixed(1) + 'h' + (-r[i + 2]).toFixed(1) + 'Z';
        add('path', { d: d, fill: color });
      },
      lines(color, width, segs, alpha) {
        if (!segs.length) return;
        let d = '';
        for (let i = 0; i < segs.length; i += 4) d += 'M' + segs[i].toFixed(1) + ' ' + segs[i + 1].toFixed(1) + 'L' + segs[i + 2].toFixed(1) + ' ' + segs[i + 3].toFixed(1);
        add('path', { d: d, stroke: color, 'stroke-width': width, fill: 'none', opacity: alpha === undefined ? 1 : alpha });
      },
      triangles(color, pts) {
        if (!pts.length) return;
        let d = '';
        for (let i = 0; i < pts.length; i += 6) d += 'M' + pts[i].toFixed(1) + ' ' + pts[i + 1].toFixed(1) + 'L' + pts[i + 2].toFixed(1) + ' ' + pts[i + 3].toFixed(1) + 'L' + pts[i + 4].toFixed(1) + ' ' + pts[i + 5].toFixed(1) + 'Z';
        add('path', { d: d, fill: color });
      },
      text(color, s, x, y, align, maxw) {
        const attrs = { x: x, y: y, fill: color, 'font-size': 12, 'font-family': 'sans-serif', 'text-anchor': align === 'right' ? 'end' : align === 'center' ? 'middle' : 'start' };
        if (maxw !== undefined) {
          const id = 'c' + clipN++;
          const cp = add('clipPath', { id: id });
          const r = document.createElementNS(NS, 'rect');
          r.setAttribute('x', align === 'right' ? x - maxw : x); r.setAttribute('y', y - 14); r.setAttribute('width', maxw); r.setAttribute('height', 18);
          cp.appendChild(r);
          attrs['clip-path'] = 'url(#' + id + ')';
        }
        add('text', attrs).textContent = s; // textContent: the serializer escapes it
      },
    };
  }

  function initTasks(T) {
    const n = T.n;
    const start = T.start, dur = T.dur;
    const end = new Float64Array(n);
    for (let i = 0; i < n; i++) end[i] = start[i] + dur[i];
    const ids = T.id, parentIdx = T.parent;
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
    const marks = T.marks ? { t: T.marks.t, s: T.marks.s, sum: new Float64Array(T.marks.s.length + 1) } : null;
    if (marks) for (let i = 0; i < marks.s.length; i++) marks.sum[i + 1] = marks.sum[i] + marks.s[i];
    const memBy = new Map();
    if (T.mem) for (let i = 0; i < T.mem.task.length; i++) memBy.set(T.mem.task[i], T.mem.samples[i]);

    const t0 = Math.min(T.first, 0), t1 = Math.max(T.end, t0 + 1);
    const RULER = 28, ROWH = 16, MARKS = marks ? 26 : 0;
    const canvas = $('timeline');
    const st = (api.tasks = {
      view: { start: t0, scale: 1, y: 0 }, // scale: px per ns; y: px scrolled down
      highlight: null, matches: 0, counters: counters.length > 0, drawn: {}, frameMs: [],
    });
    function labelOf(i) { const k = labelStart[i]; return k < labelStart[i + 1] ? T.strings[L.s[k]] : null; }
    function nameOf(i) { const l = labelOf(i); return l !== null ? l : String(ids[i]); }
    let W_ = 800, H_ = 560;
    function fit() {
      st.view.start = t0 - (t1 - t0) * 0.01;
      st.view.scale = (W_ - 20) / ((t1 - t0) * 1.02);
      st.view.y = 0;
    }
    function clampView() {
      const minScale = (W_ - 20) / ((t1 - t0) * 1.05);
      if (st.view.scale < minScale) st.view.scale = minScale;
      if (st.view.scale > 100) st.view.scale = 100; // 100 px per ns
      const span = W_ / st.view.scale;
      const lo = t0 - span * 0.5, hi = t1 - span * 0.5;
      st.view.start = Math.min(Math.max(st.view.start, lo), Math.max(lo, hi));
      const maxY = Math.max(0, T.rows * ROWH + 40 - (H_ - RULER - MARKS));
      st.view.y = Math.min(Math.max(st.view.y, 0), maxY);
    }
    const X = (t) => { const x = (t - st.view.start) * st.view.scale; return x < -1e6 ? -1e6 : x > 1e6 ? 1e6 : x; };
    const rowY = (r) => RULER + 14 + r * ROWH - st.view.y;

    // Bands (idle, GC): [start, end] pairs sorted by end, with prefix sums of their lengths,
    // so the share of any time range they cover is two binary searches (bandsDensity).
    function bandIndex(pairs) {
      const n = pairs.length / 2, S = new Float64Array(n), E = new Float64Array(n), C = new Float64Array(n + 1);
      for (let i = 0; i < n; i++) {
        S[i] = pairs[2 * i]; E[i] = Math.max(pairs[2 * i], pairs[2 * i + 1]);
        C[i + 1] = C[i] + (E[i] - S[i]);
      }
      return { n: n, S: S, E: E, C: C };
    }
    const idleIdx = bandIndex(T.idle), gcIdx = bandIndex(T.gc);
    // Axis-aligned runs as x, y, w, h quadruples: a run that starts where the previous one
    // (same y and height) ends is merged into it, so a dense row is a few rectangles.
    function addRun(q, x0, x1, y, hgt) {
      const n = q.length;
      if (n && q[n - 3] === y && q[n - 1] === hgt && x0 <= q[n - 4] + q[n - 2] + 0.5) {
        const e = Math.max(q[n - 4] + q[n - 2], x1);
        q[n - 2] = e - q[n - 4];
      } else q.push(x0, y, x1 - x0, hgt);
    }

    // One frame into a painter. Returns counts of what was drawn. Every part is bounded by
    // the pixels it covers, not by the trace: tasks, activations, bands, counters and marks are
    // aggregated per pixel column (binary searches over sorted arrays jump from one column to
    // the next), arrows are capped; axis-aligned things are rectangles (the canvas fills them
    // without path rasterization, which is what made dense frames slow to display).
    function paint(P, w, h) {
      const vs = st.view.start, ve = vs + w / st.view.scale;
      const drawn = { tasks: 0, arrows: 0, labels: 0, acts: 0, highlighted: 0, rows: 0, marks: 0, arrowStride: 1, bandCols: 0, layerArrows: 0, denseCounters: 0 };
      const pxNs = 1 / st.view.scale;
      P.rect('rgb(230,230,230)', 0, 0, w, h);
      // Bands: per pixel column, the share of its time they cover, blended into the
      // background; drawn as one image strip (one drawImage, whatever the zoom). A band wide
      // enough for its name gets it.
      const texts = [];
      function bands(B, cov, text) {
        const { n, S, E, C } = B;
        if (!n) return;
        const covered = (t) => { const k = lowerBound(E, t, 0, n); return C[k] + (k < n && S[k] < t ? t - S[k] : 0); };
        let k0 = lowerBound(E, vs, 0, n), kPrev = k0; // E[kPrev - 1] < the next column's end
        if (k0 >= n) return;
        let x = Math.max(0, Math.floor((S[k0] - vs) * st.view.scale)), lastText = -1;
        let cA = covered(vs + x * pxNs);
        while (x < w) {
          const tb = vs + (x + 1) * pxNs, kb = (kPrev = gallop(E, tb, kPrev, n));
          const cB = C[kb] + (kb < n && S[kb] < tb ? tb - S[kb] : 0);
          const f = Math.min(1, Math.max(0, (cB - cA) / pxNs));
          cov[x] = f;
          if (f > 0) drawn.bandCols++;
          if (kb < n && S[kb] < tb && kb !== lastText && (E[kb] - S[kb]) * st.view.scale > 40) {
            lastText = kb;
            texts.push(X((S[kb] + E[kb]) / 2), text);
          }
          x++;
          cA = cB;
          if (f === 0 && !(kb < n && S[kb] < tb)) { // nothing here: jump to the next band's column
            if (kb >= n) break;
            const nx = Math.floor((S[kb] - vs) * st.view.scale);
            if (nx > x) { x = nx; cA = covered(vs + x * pxNs); }
          }
        }
      }
      const wCols = Math.ceil(w), idleCov = new Float32Array(wCols), gcCov = new Float32Array(wCols);
      bands(idleIdx, idleCov, 'sleeping');
      bands(gcIdx, gcCov, 'GC');
      if (drawn.bandCols) {
        const rgb = new Uint8ClampedArray(3 * wCols);
        for (let x = 0; x < wCols; x++) {
          const fi = idleCov[x], fg = gcCov[x];
          rgb[3 * x] = 230 + (204 - 230) * fi + (179 - 230) * fg;
          rgb[3 * x + 1] = 230 + (204 - 230) * fi + (153 - 230) * fg;
          rgb[3 * x + 2] = 230 + (204 - 230) * fi + (153 - 230) * fg;
        }
        P.strip(rgb, RULER, h - RULER);
      }
      for (let q = 0; q < texts.length; q += 2) P.text('rgb(255,255,255)', texts[q + 1], texts[q], RULER + 14, 'center');
      // Grid and ruler with absolute times.
      const step = Math.pow(10, Math.ceil(Math.log10(90 / st.view.scale)));
      const grid = [];
      P.rect('rgb(248,248,248)', 0, 0, w, RULER);
      for (let t = Math.ceil(vs / step) * step, k = 0; t <= ve && k < 200; t += step, k++) {
        const x = X(t);
        grid.push(Math.round(x), RULER, 1, h - RULER);
        P.text('rgb(60,60,60)', absTime(t, step), x + 3, 17, 'left');
      }
      P.rects('rgb(190,190,190)', grid);
      P.rect('rgb(150,150,150)', 0, RULER - 1, w, 1);
      // Visible rows.
      const top = RULER + MARKS, r0 = Math.max(0, Math.floor((st.view.y - 14) / ROWH) - 1);
      const r1 = Math.min(T.rows - 1, Math.ceil((st.view.y + h - top) / ROWH) + 1);
      const lineRuns = [], failRuns = [], links = [], actRuns = [], heads = [];
      const labelJobs = [];
      for (let r = r0; r <= r1; r++) {
        const y = rowY(r);
        if (y < top - 4 || y > h + 4) continue;
        drawn.rows++;
        const a = rowStart[r], b = rowStart[r + 1];
        // Tasks in a row do not overlap and are sorted by start, so ends are sorted too.
        let i = lowerBound(end, vs, a, b);
        while (i < b && start[i] <= ve) {
          const x0 = X(start[i]), x1 = Math.max(X(end[i]), x0 + 1);
          const failed = (T.flags[i] & F_FAILED) !== 0;
          addRun(failed ? failRuns : lineRuns, x0, x1, y - 1, 2);
          drawn.tasks++;
          if (x1 - x0 >= 2) {
            const p = parentIdx[i];
            if (p >= 0) { const py = rowY(taskRow[p]); if (py !== y) links.push(x0 - 0.5, Math.min(py, y), 1, Math.abs(py - y)); }
            const bcm = becomes[i];
            if (bcm >= 0) { const by = rowY(taskRow[bcm]); if (by !== y) links.push(x1 - 0.5, Math.min(by, y), 1, Math.abs(by - y)); }
            else if (!(T.flags[i] & F_RESOLVED) && x1 - x0 > 4 && !failed) heads.push(x1, y - 3, x1 + 4, y, x1, y + 3);
            if (failed) failRuns.push(x1 - 1, y - 8, 2, 16);
            if (x1 - x0 > 16 && labelStart[i] < labelStart[i + 1]) labelJobs.push(i, y);
          }
          // Tiny tasks: jump to the first task that starts in the next pixel column.
          if (X(end[i]) - x0 < 1) {
            const nextT = start[i] + pxNs;
            const j = gallop(start, nextT, i + 1, b);
            i = j > i + 1 ? j : i + 1;
          } else i++;
        }
        // Activations in this row.
        const aa = actRowStart[r], ab = actRowStart[r + 1];
        let k = lowerBound(actT1, vs, aa, ab);
        while (k < ab && actT0[k] <= ve) {
          const x0 = X(actT0[k]), x1 = Math.max(X(actT1[k]), x0 + 1);
          addRun(actRuns, x0, x1, y - 1.5, 3);
          drawn.acts++;
          if (X(actT1[k]) - x0 < 1) { const j = gallop(actT0, actT0[k] + pxNs, k + 1, ab); k = j > k + 1 ? j : k + 1; } else k++;
        }
      }
      // Highlights behind the lines: every highlighted task in view, even those the
      // one-per-pixel-column thinning skipped (the list is bounded when it is built).
      // The list is in task order, i.e. by row then start (so by end too inside a row).
      if (st.hlList) {
        const hl = st.hlList, boxes = [];
        for (let r = r0; r <= r1; r++) {
          const y = rowY(r);
          if (y < top - 4 || y > h + 4) continue;
          let k = lowerBound(hl, rowStart[r], 0, hl.length);
          const kEnd = lowerBound(hl, rowStart[r + 1], k, hl.length);
          let lo = k, hi = kEnd; // first highlighted task of the row ending at or after vs
          while (lo < hi) { const m = (lo + hi) >>> 1; if (end[hl[m]] < vs) lo = m + 1; else hi = m; }
          for (k = lo; k < kEnd && start[hl[k]] <= ve;) {
            const i = hl[k];
            const x0 = X(start[i]), x1 = Math.max(X(end[i]), x0 + 2);
            boxes.push(x0 - 3, y - 4, x1 - x0 + 6, 8);
            drawn.highlighted++;
            if (x1 - x0 < 3) { // skip the others starting in the same pixel column
              const tNext = start[i] + pxNs;
              let a = k + 1, b = kEnd;
              while (a < b) { const m = (a + b) >>> 1; if (start[hl[m]] < tNext) a = m + 1; else b = m; }
              k = a;
            } else k++;
          }
        }
        P.rects('rgb(255,220,0)', boxes);
      }
      P.rects('rgb(51,51,51)', links);
      P.rects('rgb(51,51,51)', lineRuns);
      P.rects('rgb(204,0,0)', failRuns);
      P.triangles('rgb(51,51,51)', heads);
      P.rects('rgb(255,255,255)', actRuns);
      // Arrows: those whose earlier end is in view widened by the fade-out length.
      const fade = 6000 / st.view.scale;
      const byKind = [[], [], [], [], []], headsByKind = [[], [], [], [], []];
      const aFirst = lowerBound(arMin, vs - fade, 0, nw), aLast = lowerBound(arMin, ve + pxNs, aFirst, nw);
      // Above the budget, every k-th arrow (k a power of two, indexes multiple of k: stable
      // while panning); the status line says so.
      let stride = 1;
      while ((aLast - aFirst) / stride > ARROW_BUDGET) stride *= 2;
      drawn.arrowStride = stride;
      const yTop = top - 10, yBot = h + 10;
      // Arrows are drawn on whole pixels, and one that would look exactly like one already
      // drawn (same kind, same ends) is not drawn again: zoomed out, thousands of arrows
      // between the same rows fall on the same few pixel columns.
      const seen = new Set();
      const vLines = [[], [], [], [], []], vHeads = [[], [], [], [], []]; // vertical: x, ya, yb / x, yb, dir
      let nVert = 0;
      for (let ai = Math.ceil(aFirst / stride) * stride; ai < aLast; ai += stride) {
        const xa0 = X(arT0[ai]), xb0 = X(arT1[ai]);
        if (Math.abs(xb0 - xa0) > 5940) continue; // faded out
        if (Math.max(xa0, xb0) < 0 || Math.min(xa0, xb0) > w) continue;
        const ya = Math.round(rowY(arRowA[ai])), yb = Math.round(rowY(arRowB[ai]));
        if ((ya < yTop && yb < yTop) || (ya > yBot && yb > yBot)) continue;
        const kd = W.kind[ai];
        const xr = Math.round(xa0), xs = Math.round(xb0), xa = xr + 0.5, xb = xs + 0.5;
        if (xr >= -2048 && xr < 6144 && xs >= -2048 && xs < 6144 && ya >= -1024 && ya < 3072 && yb >= -1024 && yb < 3072) {
          const key = ((((xr + 2048) * 8192 + xs + 2048) * 4096 + ya + 1024) * 4096 + yb + 1024) * 8 + kd; // < 2^53
          if (seen.has(key)) continue;
          seen.add(key);
        }
        drawn.arrows++;
        if (xr === xs && Math.abs(yb - ya) > 10) {
          // Vertical (the common case zoomed out): its head is drawn once per place, however
          // many arrows of the kind end there.
          vLines[kd].push(xr, ya, yb);
          nVert++;
          const dir = yb > ya ? -1 : 1, hk = ((xr + 2048) * 8192 + yb + 4096) * 16 + (dir + 1) * 4 + kd;
          if (!(xr >= -2048 && xr < 6144 && yb >= -4096 && yb < 4096) || !seen.has(-hk - 1)) {
            seen.add(-hk - 1);
            vHeads[kd].push(xr, yb, dir);
          }
          continue;
        }
        byKind[kd].push(xa, ya, xb, yb);
        if (Math.abs(yb - ya) > 10) { const dir = yb > ya ? -1 : 1; headsByKind[kd].push(xb - 3, yb + dir * 6, xb + 3, yb + dir * 6, xb, yb); }
        else { const dir = xb >= xa ? -1 : 1; headsByKind[kd].push(xb + dir * 6, yb - 3, xb + dir * 6, yb + 3, xb, yb); }
      }
      // Many vertical arrows (a busy stretch zoomed out): a 1-px column each and a head of
      // rows 1, 1, 3, 3, 5, 5 px wide, written as pixels into an image layer (see layer()),
      // composited over the other arrows: cheaper than thousands of anti-aliased lines and
      // triangles. Kinds in the same order as on the canvas.
      const layer = nVert >= 256 && P.layer ? P.layer(RULER, h) : null;
      if (layer) {
        drawn.layerArrows = nVert;
        for (let kd = 0; kd < 5; kd++) {
          const c32 = pixelOf(ARROW_COLORS[kd]), V = vLines[kd], Hd = vHeads[kd];
          // Overlapping lines of one column (in time order, so next to each other) as one.
          let cx = NaN, c0 = 0, c1 = 0;
          for (let q = 0; q <= V.length; q += 3) {
            const y0 = q < V.length ? Math.min(V[q + 1], V[q + 2]) : 0, y1 = q < V.length ? Math.max(V[q + 1], V[q + 2]) : 0;
            if (q < V.length && V[q] === cx && y0 <= c1 && y1 >= c0) { c0 = Math.min(c0, y0); c1 = Math.max(c1, y1); continue; }
            if (!Number.isNaN(cx)) layer.fill(cx, c0, 1, c1 - c0, c32);
            if (q < V.length) { cx = V[q]; c0 = y0; c1 = y1; }
          }
          for (let q = 0; q < Hd.length; q += 3) layer.head(Hd[q], Hd[q + 1], Hd[q + 2], c32);
        }
      } else {
        for (let kd = 0; kd < 5; kd++) {
          const V = vLines[kd], Hd = vHeads[kd];
          for (let q = 0; q < V.length; q += 3) byKind[kd].push(V[q] + 0.5, V[q + 1], V[q] + 0.5, V[q + 2]);
          for (let q = 0; q < Hd.length; q += 3) { const xb = Hd[q] + 0.5, yb = Hd[q + 1], dir = Hd[q + 2]; headsByKind[kd].push(xb - 3, yb + dir * 6, xb + 3, yb + dir * 6, xb, yb); }
        }
      }
      for (let kd = 0; kd < 5; kd++) {
        P.lines(ARROW_COLORS[kd], 1, byKind[kd]);
        P.triangles(ARROW_COLORS[kd], headsByKind[kd]);
      }
      if (layer) layer.done();
      // Counters as step lines, each on its own scale (names drawn after the labels).
      const names = [];
      if (st.counters) {
        const colors = ['rgb(255,102,102)', 'rgb(255,170,0)', 'rgb(0,153,153)', 'rgb(153,51,204)'];
        const plotTop = top + 10, plotH = h - plotTop - 10;
        counters.forEach((c, ci) => {
          const sc = scales[c.group];
          const yv = (v) => Math.round(plotTop + plotH - ((v - sc.min) / (sc.max - sc.min)) * plotH);
          // Per pixel column: one vertical extent (min/max over the samples in it, from the
          // pyramid) and one horizontal run; columns with no sample are jumped over. geo holds
          // [0, x0, x1, y] runs and [1, x, top, bottom] columns, in x order.
          const geo = [], nt = c.t.length;
          let k = lowerBound(c.t, vs, 0, nt);
          let runX = 0, runY = k > 0 ? yv(c.v[k - 1]) : null;
          while (k < nt && c.t[k] <= ve) {
            const x = Math.max(0, Math.floor(X(c.t[k])));
            const kb = Math.max(k + 1, gallop(c.t, vs + (x + 1) * pxNs, k, nt));
            const mm = rangeMinMax(c.mm, k, kb);
            let lo = yv(mm[1]), hi = yv(mm[0]);
            if (runY !== null) { geo.push(0, runX, x, runY); lo = Math.min(lo, runY); hi = Math.max(hi, runY); }
            geo.push(1, x, lo, hi);
            runX = x; runY = yv(c.v[kb - 1]);
            k = kb;
          }
          const lastY = runY;
          if (runY !== null) geo.push(0, runX, w, runY);
          // A line of width sw as rectangles that do not overlap (the shadow is translucent).
          // With `snap`, edges on whole pixels: no anti-aliased edge to blend, and more
          // neighbours of the same extent merge.
          function stepRects(sw, snap) {
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
          // The dark outline keeps a sparse line readable over the tasks; zoomed out, where
          // most columns have samples, the counter is a solid band and goes without it (it
          // would double the counter's cost).
          let dense = false;
          if (geo.length < 4 * 2 * 256) {
            P.rects('rgba(0,0,0,0.35)', stepRects(5));
            P.rects(colors[ci % 4], stepRects(3));
          } else {
            // Dense: hundreds of columns of varying extent, on whole pixels (cheap to fill) and
            // translucent, so the rows stay visible through the band.
            // One polygon when the columns' ends move little from one to the next (its cost
            // grows with the length of its vertical edges), else a fillRect per column.
            const r = stepRects(3, true), col = colors[ci % 4].replace('rgb(', 'rgba(').replace(')', ',0.67)');
            let edges = 0;
            for (let q = 4; q < r.length; q += 4) edges += Math.abs(r[q + 1] - r[q - 3]) + Math.abs(r[q + 1] + r[q + 3] - r[q - 3] - r[q - 1]);
            if (edges < 40 * r.length / 4) P.columns(col, r); else P.rects(col, r);
            dense = true;
            drawn.denseCounters++;
          }
          if (lastY !== null) names.push(dense ? 'rgb(40,40,40)' : colors[ci % 4], c.name, Math.max(plotTop + 12, Math.min(h - 4, lastY - 6 - 16 * (ci % 3))));
        });
      }
      // Labels: packed left to right per task, pinned to the left edge when it starts off-screen.
      for (let q = 0; q < labelJobs.length; q += 2) {
        const i = labelJobs[q], y = labelJobs[q + 1];
        const xEnd = Math.min(X(end[i]), w);
        let xMin = Math.max(X(start[i]), 0);
        for (let k = labelStart[i]; k < labelStart[i + 1] && drawn.labels < 4000; k++) {
          const lx = Math.max(X(L.t[k]), xMin);
          if (lx >= xEnd - 8) break;
          const s = T.strings[L.s[k]];
          const maxw = xEnd - lx;
          P.text(st.highlight && st.highlight[i] ? 'rgb(0,0,0)' : 'rgb(20,20,20)', s, lx + 2, y - 3, 'left', maxw);
          xMin = lx + Math.min(maxw, 7 * s.length + 6);
          drawn.labels++;
        }
      }
      for (let q = 0; q < names.length; q += 3) P.text(names[q], names[q + 1], w - 6, names[q + 2], 'right');
      // Allocation marks (both traces): samples per pixel column in a strip under the ruler.
      if (marks) {
        P.rect('rgb(244,244,250)', 0, RULER, w, MARKS);
        const cols = [];
        let mx = 0;
        const nm = marks.t.length;
        for (let k = lowerBound(marks.t, vs, 0, nm); k < nm && marks.t[k] <= ve;) {
          const x = Math.floor(X(marks.t[k]));
          const kb = Math.max(k + 1, gallop(marks.t, vs + (x + 1) * pxNs, k, nm));
          const sum = marks.sum[kb] - marks.sum[k];
          cols.push(x, sum);
          if (sum > mx) mx = sum;
          drawn.marks += kb - k;
          k = kb;
        }
        const bars = [];
        for (let q = 0; q < cols.length; q += 2) {
          if (cols[q + 1] <= 0) continue;
          const hgt = Math.max(2, (cols[q + 1] / mx) * (MARKS - 6));
          bars.push(cols[q], RULER + MARKS - 1 - hgt, 1, hgt);
        }
        P.rects('rgb(128,0,128)', bars);
        P.text('rgb(90,90,90)', 'allocations', 4, RULER + 12, 'left');
      }
      P.text('rgb(90,90,90)', 'grid: ' + humanNs(step), w - 6, h - 6, 'right');
      return drawn;
    }
    function absTime(t, step) {
      // The ruler shows time since the start and, with a memory trace, the wall clock.
      const digits = Math.max(0, Math.min(9, -Math.floor(Math.log10(step / 1e9))));
      const rel = (t / 1e9).toFixed(digits) + ' s';
      if (data.mem && data.mem.start_us) {
        const ms = data.mem.start_us / 1000 + t / 1e6;
        const d = new Date(ms);
        const frac = digits > 3 ? String(((t / 1e9) % 1).toFixed(digits)).slice(5, 5 + digits - 3) : '';
        return rel + '  ' + d.toISOString().slice(11, 23) + frac;
      }
      return rel;
    }
    let pending = false;
    // The canvas size is read (which forces a layout) only after a resize or a tab switch,
    // not on every frame.
    let sized = null;
    function draw() {
      const t = performance.now();
      const c = sized || (sized = setupCanvas(canvas));
      W_ = c.w; H_ = c.h;
      clampView();
      c.g.font = '12px sans-serif'; c.g.textBaseline = 'alphabetic';
      st.drawn = paint(canvasPainter(c.g), c.w, c.h);
      const ms = performance.now() - t;
      st.frameMs.push(ms);
      if (st.frameMs.length > 500) st.frameMs.shift();
      canvas.dataset.tasks = st.drawn.tasks;
      canvas.dataset.highlighted = st.drawn.highlighted;
      status();
      return ms;
    }
    function request() { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; draw(); }); } }
    function status() {
      const v = st.view, span = W_ / v.scale;
      let s = n + ' tasks in ' + T.rows + ' rows, ' + nw + ' interactions · view +' + humanNs(v.start) + ' … +' + humanNs(v.start + span) + ' (' + humanNs(span) + ') · drawn: ' + st.drawn.tasks + ' tasks, ' + st.drawn.arrows + ' arrows';
      if (st.query) s += ' · "' + st.query + '": ' + st.matches + ' matching tasks';
      if (st.drawn.arrowStride > 1) s += ' · 1 in ' + st.drawn.arrowStride + ' interactions drawn at this zoom';
      if (T.arrows_total > nw || T.acts_total > na) s += ' · level of detail: the report keeps ' + nw + ' of ' + T.arrows_total + ' interactions and ' + na + ' of ' + T.acts_total + ' running periods (evenly spaced)';
      $('tl-status').textContent = s;
    }
    function zoomAt(factor, px) {
      const tAt = st.view.start + px / st.view.scale;
      st.view.scale *= factor;
      clampView();
      st.view.start = tAt - px / st.view.scale;
      clampView();
      request();
    }
    on(canvas, 'wheel', (ev) => {
      ev.preventDefault();
      const r = canvas.getBoundingClientRect();
      if (ev.shiftKey) { st.view.y += ev.deltaY; clampView(); request(); return; }
      zoomAt(ev.deltaY < 0 ? 1.2 : 1 / 1.2, ev.clientX - r.left);
    }, { passive: false });
    let drag = null;
    on(canvas, 'pointerdown', (ev) => {
      drag = { x: ev.clientX, y: ev.clientY, start: st.view.start, vy: st.view.y };
      canvas.setPointerCapture(ev.pointerId);
      canvas.classList.add('dragging');
      canvas.focus();
    });
    on(canvas, 'pointermove', (ev) => {
      if (drag) {
        st.view.start = drag.start - (ev.clientX - drag.x) / st.view.scale;
        st.view.y = drag.vy - (ev.clientY - drag.y);
        clampView(); request(); hideTip();
        return;
      }
      const i = hit(ev);
      if (i < 0) { hideTip(); return; }
      let text = (labelOf(i) !== null ? nameOf(i) + '\n' : '') + 'task ' + ids[i] + ' (' + (TYPES[T.type[i]] || 'unknown') + ')\n+' + humanNs(start[i]) + ' … +' + humanNs(end[i]) + ', ' + humanNs(end[i] - start[i]);
      if (T.flags[i] & F_NEVER) text += '\nshould-resolve task never resolved';
      else if (T.flags[i] & F_FAILED) text += '\nfailed';
      if (memBy.has(i)) text += '\nallocated while running: ' + humanBytes(memBy.get(i) * T.mem.bytes_per_sample);
      const nlab = labelStart[i + 1] - labelStart[i];
      if (nlab > 1) text += '\n' + nlab + ' labels';
      showTip(ev, text);
    });
    on(canvas, 'pointerup', () => { drag = null; canvas.classList.remove('dragging'); });
    on(canvas, 'mouseleave', hideTip);
    // The task under the pointer (within 16 px of its line).
    function hit(ev) {
      const r = canvas.getBoundingClientRect();
      const x = ev.clientX - r.left, y = ev.clientY - r.top;
      const row = Math.round((y - RULER - 14 + st.view.y) / ROWH);
      if (row < 0 || row >= T.rows || Math.abs(rowY(row) - y) > 8) return -1;
      const t = st.view.start + x / st.view.scale, tol = 16 / st.view.scale;
      const a = rowStart[row], b = rowStart[row + 1];
      let i = lowerBound(end, t - tol, a, b);
      let best = -1, bestD = Infinity;
      for (; i < b && start[i] <= t + tol; i++) {
        const d = t < start[i] ? start[i] - t : t > end[i] ? t - end[i] : 0;
        if (d < bestD) { bestD = d; best = i; }
      }
      return best;
    }
    // Double-click: the task and everything linked to it by `becomes`, both ways.
    let becameFrom = null;
    on(canvas, 'dblclick', (ev) => {
      const i = hit(ev);
      if (i < 0) { setHighlight(null); return; }
      if (!becameFrom) {
        becameFrom = new Map();
        for (let k = 0; k < n; k++) if (becomes[k] >= 0) { const l = becameFrom.get(becomes[k]); if (l) l.push(k); else becameFrom.set(becomes[k], [k]); }
      }
      const set = new Uint8Array(n), todo = [i];
      let count = 0;
      while (todo.length) {
        const k = todo.pop();
        if (set[k]) continue;
        set[k] = 1; count++;
        if (becomes[k] >= 0) todo.push(becomes[k]);
        for (const f of becameFrom.get(k) || []) todo.push(f);
      }
      st.query = '';
      $('tl-search').value = '';
      st.selected = { task: i, id: ids[i], related: count };
      setHighlight(set, 0);
      console.log('?t_min=' + (st.view.start / 1e9) + '&t_max=' + ((st.view.start + W_ / st.view.scale) / 1e9));
    });
    const MAX_HIGHLIGHTS = 200000;
    function setHighlight(set, matches) {
      st.highlight = set;
      st.hlList = null;
      if (set) {
        const list = [];
        for (let i = 0; i < n && list.length < MAX_HIGHLIGHTS; i++) if (set[i]) list.push(i);
        st.hlList = list;
      }
      st.matches = matches || 0;
      request();
    }
    // Search: case-insensitive substring of any label; highlights as you type.
    function search(q) {
      st.query = q;
      st.selected = null;
      if (!q) { setHighlight(null); return; }
      const needle = q.toLowerCase();
      const hitStr = new Uint8Array(T.strings.length);
      for (let s = 0; s < T.strings.length; s++) hitStr[s] = T.strings[s].toLowerCase().includes(needle) ? 1 : 0;
      const set = new Uint8Array(n);
      let count = 0;
      for (let k = 0; k < nl; k++) if (hitStr[L.s[k]] && !set[L.task[k]]) { set[L.task[k]] = 1; count++; }
      setHighlight(set, count);
    }
    on($('tl-search'), 'input', (ev) => search(ev.target.value));
    on($('tl-search'), 'keydown', (ev) => { if (ev.key === 'Enter' || ev.key === 'Escape') { if (ev.key === 'Escape') { ev.target.value = ''; search(''); } ev.target.blur(); canvas.focus(); } });
    $('tl-counters').checked = st.counters;
    on($('tl-counters'), 'change', (ev) => { st.counters = ev.target.checked; request(); });
    // Zoom buttons repeat while held (after 500 ms, every 50 ms), as in the original viewer.
    function repeatButton(id, fn) {
      let timer = null;
      const b = $(id);
      const stop = () => { clearTimeout(timer); clearInterval(timer); timer = null; };
      on(b, 'pointerdown', () => { fn(); timer = setTimeout(() => { timer = setInterval(fn, 50); }, 500); });
      on(b, 'pointerup', stop); on(b, 'pointerleave', stop);
      on(b, 'keydown', (ev) => { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); fn(); } });
    }
    repeatButton('tl-in', () => zoomAt(1.2, W_ / 2));
    repeatButton('tl-out', () => zoomAt(1 / 1.2, W_ / 2));
    on($('tl-fit'), 'click', () => { fit(); request(); });
    on(document, 'keydown', (ev) => {
      if (api.view !== 'tasks') return;
      const inInput = ev.target && (ev.target.tagName === 'INPUT' || ev.target.tagName === 'SELECT');
      if (ev.key === 'Escape') { $('tl-search').value = ''; search(''); if (inInput) ev.target.blur(); return; }
      if (inInput) return;
      if (ev.key === '/') { ev.preventDefault(); $('tl-search').focus(); }
      else if (ev.key === ' ') { ev.preventDefault(); st.counters = !st.counters; $('tl-counters').checked = st.counters; request(); }
      else if (ev.key === '+' || ev.key === '=') zoomAt(1.2, W_ / 2);
      else if (ev.key === '-') zoomAt(1 / 1.2, W_ / 2);
      else if (ev.key === '0') { fit(); request(); }
      else if (ev.key === 'ArrowLeft') { st.view.start -= 100 / st.view.scale; request(); }
      else if (ev.key === 'ArrowRight') { st.view.start += 100 / st.view.scale; request(); }
      else if (ev.key === 'ArrowUp') { st.view.y -= 48; clampView(); request(); }
      else if (ev.key === 'ArrowDown') { st.view.y += 48; clampView(); request(); }
    });
    // Export the current view.
    function toSvg() {
      const NS = 'http://www.w3.org/2000/svg';
      const svg = document.createElementNS(NS, 'svg');
      svg.setAttribute('xmlns', NS);
      svg.setAttribute('width', W_); svg.setAttribute('height', H_);
      svg.setAttribute('viewBox', '0 0 ' + W_ + ' ' + H_);
      paint(svgPainter(svg), W_, H_);
      return new XMLSerializer().serializeToString(svg);
    }
    on($('tl-svg'), 'click', () => download('timeline.svg', new Blob([toSvg()], { type: 'image/svg+xml' })));
    on($('tl-png'), 'click', () => canvas.toBlob((b) => download('timeline.png', b), 'image/png'));
    on(window, 'resize', () => { sized = null; request(); });
    // Memory by task.
    if (T.mem && T.mem.task.length) {
      const tbl = $('task-mem');
      const head = el('tr');
      for (const c of ['allocated', 'samples', 'task', 'label']) head.appendChild(el('th', c, c === 'label' ? 'site' : ''));
      tbl.appendChild(head);
      const order = Array.from(T.mem.task, (t, k) => k).sort((a, b) => T.mem.samples[b] - T.mem.samples[a]).slice(0, 50);
      for (const k of order) {
        const i = T.mem.task[k], tr = el('tr');
        tr.appendChild(el('td', humanBytes(T.mem.samples[k] * T.mem.bytes_per_sample)));
        tr.appendChild(el('td', grouped(T.mem.samples[k])));
        tr.appendChild(el('td', ids[i]));
        tr.appendChild(el('td', labelOf(i) === null ? '' : labelOf(i), 'site'));
        tbl.appendChild(tr);
      }
      $('task-mem-note').textContent = 'Allocations attributed to the task running when they were made (top 50); ' + humanBytes(T.mem.outside * T.mem.bytes_per_sample) + ' were allocated while no task ran.';
    } else if (T.mem) {
      $('task-mem-note').textContent = 'No allocation happened while a task was running (' + humanBytes(T.mem.outside * T.mem.bytes_per_sample) + ' allocated outside). Use --task-offset if the two clocks differ.';
    } else $('task-mem-panel').classList.add('hidden');
    $('tasks-title').textContent = 'Tasks: ' + T.file + ' (' + grouped(T.events) + ' events' + (T.wrapped ? ', wrapped ring' : '') + ')';

    // Hooks for tests and measurements.
    st.draw = draw;
    st.fit = () => { fit(); draw(); };
    st.search = (q) => { $('tl-search').value = q; search(q); draw(); };
    st.zoom = (f, px) => { zoomAt(f, px === undefined ? W_ / 2 : px); draw(); };
    st.pan = (dx, dy) => { st.view.start -= dx / st.view.scale; st.view.y -= dy || 0; clampView(); draw(); };
    st.toSvg = toSvg;
    st.taskXY = (i) => [X(start[i]) + Math.min(20, (X(end[i]) - X(start[i])) / 2), rowY(taskRow[i])];
    st.findTask = (id) => { for (let i = 0; i < n; i++) if (ids[i] === id) return i; return -1; };
    st.nameOf = nameOf;
    redrawers.tasks = () => { sized = null; if (!st.fitted) { const c = setupCanvas(canvas); W_ = c.w; H_ = c.h; fit(); st.fitted = true; } draw(); };
  }

  // ------------------------------------------------------------------------------------
  // Loading: the one entry point for data, used by the embedded report and by live mode
  // (`ctfscope serve`), which calls window.ctsLoadData(newData) to replace what is shown.
  // Binary columns (see decodeColumns) are decoded here; the views keep the current tab.
  async function ctsLoadData(obj) {
    const t0 = performance.now();
    await decodeColumns(obj);
    const t1 = performance.now();
    listeners.abort();
    listeners = new AbortController();
    const prevView = api && api.view;
    data = obj;
    api = window.ctsReport = { data: data, mem: null, tasks: null, ready: false, timing: { decode: t1 - t0 } };
    for (const id of ['tabs', 'mem-info', 'sites', 'task-mem']) $(id).replaceChildren();
    $('task-mem-panel').classList.remove('hidden');
    document.title = (data.title ? data.title + ' — ' : '') + 'ctfscope report';
    $('title').textContent = data.title || 'ctfscope report';
    $('generator').textContent = data.generator || '';
    views = [];
    if (data.mem) views.push(['mem', 'Memory']);
    if (data.tasks) views.push(['tasks', 'Tasks']);
    for (const v of ['mem', 'tasks']) $('view-' + v).classList.add('hidden');
    redrawers = {};
    for (const [v, label] of views) {
      const b = el('button', label);
      b.id = 'tab-' + v;
      on(b, 'click', () => show(v));
      $('tabs').appendChild(b);
    }
    try {
      if (data.mem) initMem(data.mem);
      if (data.tasks) initTasks(data.tasks);
    } finally {
      const keep = views.find((v) => v[0] === prevView);
      if (views.length) show(keep ? keep[0] : views[0][0]);
      api.timing.init = performance.now() - t1;
      api.timing.ready = performance.now();
      api.ready = true;
    }
    // What the first view did not need is decoded once it is on the screen.
    const mem = api.mem;
    if (mem && mem.loadRecords) requestAnimationFrame(() => setTimeout(() => mem.loadRecords().then(() => { api.timing.records = performance.now(); }, () => {}), 0));
  }
  window.ctsLoadData = ctsLoadData;
  const embedded = document.getElementById('cts-data');
  if (embedded && embedded.textContent.trim() && embedded.textContent.trim() !== '@DATA@') {
    const t = performance.now();
    const obj = JSON.parse(embedded.textContent);
    const parseMs = performance.now() - t;
    ctsLoadData(obj).then(() => { api.timing.parse = parseMs; }, (e) => {
      $('title').textContent = 'ctfscope report: cannot read the embedded data (' + e.message + ')';
      throw e;
    });
  }
})();
