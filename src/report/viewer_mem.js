// SPDX-License-Identifier: MIT
// ctfscope report viewer, part 3 of 5: the memory view (trace summary, live heap graph with
// a time-range brush, filters, flame graph, top sites, histograms). viewer_common.js says
// how the files fit together.
(function (cv) {
  'use strict';
  const { $, on, el, humanBytes, grouped, humanNs, setupCanvas, showTip, hideTip } = cv;

  // A C++ or Rust name with its template arguments elided, for the "short names" toggle:
  // "std::vector<int, std::allocator<int> >::push_back(int const&)" reads
  // "std::vector<…>::push_back(int const&)". The '<' of operator<, operator<<, operator<=
  // and of "->" are not brackets; a name whose brackets do not balance is left whole.
  cv.shortName = function shortName(name) {
    let out = '', depth = 0;
    for (let i = 0; i < name.length; i++) {
      const c = name[i];
      if (c === '<' && /operator<*$/.test(name.slice(Math.max(0, i - 10), i))) {
        if (!depth) out += c;
      } else if (c === '<') {
        if (!depth) out += '<…';
        depth++;
      } else if (c === '>' && depth && name[i - 1] !== '-') {
        depth--;
        if (!depth) out += '>';
      } else if (!depth) {
        out += c;
      }
    }
    return depth ? name : out;
  };

  cv.initMem = function initMem(m) {
    const bps = m.bytes_per_sample;
    const state = (cv.api.mem = { range: null, drawn: {} });
    // A trace with no minor allocation and no promotion is of a program with one heap (a
    // native program, traced by the preload library): it is described in those words, not
    // OCaml's (minor, major, promoted, collected).
    const native = m.events.alloc === 0 && m.events.promote === 0;
    state.native = native;
    if (native) {
      $('f-minor').parentElement.classList.add('hidden');
      $('f-major').parentElement.lastChild.textContent = ' heap';
      $('f-ext').parentElement.classList.toggle('hidden', m.events.alloc_ext === 0);
      for (const o of $('f-mode').options) o.textContent = o.textContent.replace('never collected', 'never freed').replace('collected', 'freed');
      $('hist-life-title').textContent = 'Lifetimes of freed blocks (estimated bytes)';
    }
    // Header.
    const info = $('mem-info');
    const rows = [
      ['File', m.file + ' (' + humanBytes(m.file_size) + (m.version ? ', memtrace v' + String(m.version).padStart(3, '0') : '') + ')'],
      ['Program', m.executable],
      ['Host, pid', (m.host || '') + ', pid ' + m.pid],
      ['Started', m.started],
      ['Sample rate', m.sample_rate >= 1 ? '1 (every word sampled), word size ' + m.word_size + ' bits'
        : m.sample_rate + ' per word, word size ' + m.word_size + ' bits'],
      // Format v001 has no context field; a later trace may just not have one.
      ['Context', m.context === null ? (m.version === 1 ? '(none: format v001 has no context)' : '(none)') : m.context || '(empty)'],
      ['Runtime params', m.runtime_params || ''],
      ['Allocated', m.text.allocated + ' in ' + m.text.samples + ' samples (' + m.text.allocs + ' sampled blocks, ~' + m.text.allocs_est + ' allocations)'],
      ['Peak live', m.text.peak + ' at +' + (m.peak_time_us / 1e6).toFixed(3) + ' s'],
      ['Live at end', m.text.live_end],
      ['Duration', m.duration_s.toFixed(6) + ' s'],
      native ? ['Events', 'allocations ' + grouped(m.events.alloc_major + m.events.alloc_ext) + ', frees ' + grouped(m.events.collect) + ' (a program with one heap)']
        : ['Events', 'alloc ' + grouped(m.events.alloc) + ', alloc_major ' + grouped(m.events.alloc_major) + ', alloc_ext ' + grouped(m.events.alloc_ext) + ', promote ' + grouped(m.events.promote) + ', collect ' + grouped(m.events.collect)],
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
        recordsLoading = cv.decodeColumns(R).then(() => {
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
      // Milliseconds (3 decimals) unless the ticks are closer than that: a 3 ms trace's
      // read +0.001 s, +0.001 s, +0.002 s, +0.002 s; to the microsecond at most.
      const tickS = endUs / 5 / 1e6, decimals = tickS > 0 ? Math.min(6, Math.max(3, Math.ceil(-Math.log10(tickS)))) : 3;
      const ticks = [];
      for (let k = 0; k <= 5; k++) {
        ticks.push('+' + (endUs * k / 5 / 1e6).toFixed(decimals) + ' s');
        g.fillText(ticks[k], Math.min(Math.max(x(endUs * k / 5), L + 20), w - 30), T + ph + 4);
      }
      state.drawn.heap = { buckets: heap.length, peakX: px, peakY: py, ticks: ticks };
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
    state.setRange = setRange;

    // Names as drawn: template arguments elided when asked (the full name on hover).
    const shown = (name) => ($('f-short').checked ? cv.shortName(name) : name);

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
          g.fillText(shown(tree.name(n)), x0 + 3, y + ROW / 2);
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
      const site = el('td', s[0], 'site');
      site.title = s[0];
      site.dataset.full = s[0];
      tr.appendChild(site);
      st.appendChild(tr);
    }
    on($('f-short'), 'change', () => {
      for (const td of st.querySelectorAll('td.site')) td.textContent = shown(td.dataset.full);
      drawFlame();
    });
    // Where the page is coarser than the analysis (report_mem.c's budgets), in words.
    const coarse = [];
    if (m.tree_pruned) coarse.push(grouped(m.tree_pruned) + ' of ' + grouped(m.tree_nodes) + ' call-tree nodes, which allocated fewer than ' + grouped(m.tree_min) + ' samples (' + humanBytes(m.tree_min * bps) + ') with all they called, are drawn as part of their caller.');
    if (m.rec_min_samples > m.samples) coarse.push('The filters count every allocation as the root\'s (the record budget holds no stack).');
    else if (m.rec_min_samples) coarse.push('The filters count stacks of fewer than ' + grouped(m.rec_min_samples) + ' samples as their caller\'s.');
    if (m.rec_size_octaves) coarse.push('The size filter sees sizes by powers of two.');
    let coarseNote = $('flame-coarse');
    if (!coarseNote) {
      coarseNote = el('div', '', 'note');
      coarseNote.id = 'flame-coarse';
      $('flame').insertAdjacentElement('afterend', coarseNote);
    }
    coarseNote.textContent = coarse.join(' ');
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
      // x labels at five points of the range, centred on them but kept inside the canvas; one
      // that would overlap the previous one (few buckets: a narrow range) or repeat its text is
      // left out.
      g.textAlign = 'left'; g.textBaseline = 'top';
      const boxes = [];
      let right = -Infinity, prevText = null;
      for (let k = 0; k <= 4; k++) {
        const v = Math.pow(2, lo + (hi - lo) * k / 4), s = fmt(v), tw = g.measureText(s).width;
        const x0 = Math.min(Math.max(x(v) - tw / 2, L), w - 2 - tw);
        if (s === prevText || x0 < right + 8) continue;
        g.fillText(s, x0, 8 + ph + 3);
        boxes.push([x0, x0 + tw, s]);
        right = x0 + tw; prevText = s;
      }
      state.drawn[c.id + '-labels'] = boxes;
      return n;
    }
    function drawHists() {
      state.drawn.sizeBars = drawHist($('hist-size'), m.size_hist, wordBytes, humanBytes);
      state.drawn.lifeBars = drawHist($('hist-life'), m.life_hist, 1000, humanNs);
    }
    cv.redrawers.mem = () => { drawHeap(); drawFlame(); drawHists(); };
    compute();
    state.compute = compute;
  };
})(window.ctsViewer);
