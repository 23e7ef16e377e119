// SPDX-License-Identifier: MIT
// ctfscope report viewer, part 5 of 5 (last, once every view is defined): reads the data
// embedded in the page, decodes its binary columns and starts the views (viewer_common.js
// says how the files fit together).
(function (cv) {
  'use strict';
  const $ = cv.$;
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
  cv.decodeColumns = decodeColumns;

  // Loading: the one entry point for data, used by the embedded report and by live mode
  // (`ctfscope serve`), which calls window.ctsLoadData(newData) to replace what is shown.
  // Binary columns (see decodeColumns) are decoded here; the views keep the current tab.
  async function ctsLoadData(obj) {
    const t0 = performance.now();
    await decodeColumns(obj);
    const t1 = performance.now();
    cv.listeners.abort();
    cv.listeners = new AbortController();
    const prevView = cv.api && cv.api.view;
    const data = (cv.data = obj);
    const api = (cv.api = window.ctsReport = { data: data, mem: null, tasks: null, ready: false, timing: { decode: t1 - t0 } });
    for (const id of ['tabs', 'mem-info', 'sites', 'task-mem']) $(id).replaceChildren();
    $('task-mem-panel').classList.remove('hidden');
    document.title = (data.title ? data.title + ' — ' : '') + 'ctfscope report';
    $('title').textContent = data.title || 'ctfscope report';
    $('generator').textContent = data.generator || '';
    const views = (cv.views = []);
    if (data.mem) views.push(['mem', 'Memory']);
    if (data.tasks) views.push(['tasks', 'Tasks']);
    if (data.compare && data.compare_tasks) views.unshift(['compare', 'Good vs bad']);
    for (const v of ['mem', 'tasks', 'compare']) $('view-' + v).classList.add('hidden');
    cv.redrawers = {};
    for (const [v, label] of views) {
      const b = cv.el('button', label);
      b.id = 'tab-' + v;
      cv.on(b, 'click', () => cv.show(v));
      $('tabs').appendChild(b);
    }
    try {
      if (data.mem) cv.initMem(data.mem);
      if (data.tasks) cv.initTasks(data.tasks);
      if (data.compare && data.compare_tasks) cv.initCompare(data);
    } finally {
      const keep = views.find((v) => v[0] === prevView);
      if (views.length) cv.show(keep ? keep[0] : views[0][0]);
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
    ctsLoadData(obj).then(() => { cv.api.timing.parse = parseMs; }, (e) => {
      $('title').textContent = 'ctfscope report: cannot read the embedded data (' + e.message + ')';
      throw e;
    });
  }
})(window.ctsViewer);
