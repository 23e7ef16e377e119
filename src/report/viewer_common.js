// SPDX-License-Identifier: MIT
// ctfscope report viewer, part 1 of 5: the state the views share and the helpers they all
// use (DOM, number formatting, canvas, tooltip). Vanilla JS, no dependencies, nothing
// fetched. Strings from the trace reach the page only through textContent and canvas
// fillText (never innerHTML).
//
// The viewer is five files, embedded in this order as the report's one script element
// (src/report/CMakeLists.txt): viewer_common.js, viewer_layout.js (the timeline's geometry,
// pure), viewer_mem.js (the memory view), viewer_timeline.js (the task timeline),
// viewer_loader.js (decodes the data and starts the views). They share one object,
// window.ctsViewer (`cv` in each file), and nothing else.
(function (cv) {
  'use strict';
  const $ = (cv.$ = (id) => document.getElementById(id));
  // Shared state, replaced by each load (viewer_loader.js): the document, the test hooks
  // (window.ctsReport), the tabs and each view's redraw function.
  cv.data = null;
  cv.api = null;
  cv.views = [];
  cv.redrawers = {};
  // Every listener the views add goes through on(): loading new data aborts the old ones.
  cv.listeners = new AbortController();
  cv.on = function on(target, type, fn, opts) {
    target.addEventListener(type, fn, Object.assign({ signal: cv.listeners.signal }, opts || {}));
  };
  cv.show = function show(name) {
    for (const [v] of cv.views) {
      $('view-' + v).classList.toggle('hidden', v !== name);
      $('tab-' + v).classList.toggle('on', v === name);
    }
    cv.api.view = name;
    if (cv.redrawers[name]) cv.redrawers[name]();
  };

  cv.el = function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  };
  cv.humanBytes = function humanBytes(b) { // same as cli_human_bytes
    const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
    let u = 0;
    while (b >= 1000 && u + 1 < units.length) { b /= 1000; u++; }
    if (u === 0) return b.toFixed(0) + ' B';
    return b.toFixed(b < 10 ? 2 : b < 100 ? 1 : 0) + ' ' + units[u];
  };
  cv.grouped = function grouped(n) { return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ' '); };
  cv.humanNs = function humanNs(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(a >= 1e10 ? 2 : 3) + ' s';
    if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e7 ? 2 : 3) + ' ms';
    if (a >= 1e3) return (ns / 1e3).toFixed(a >= 1e4 ? 2 : 3) + ' µs';
    return ns.toFixed(0) + ' ns';
  };
  // A time relative to the trace's start, with its sign (the view may start before it).
  cv.signedNs = function signedNs(ns) { return (ns < 0 ? '-' : '+') + cv.humanNs(Math.abs(ns)); };
  // Drawing is on <canvas> scaled by devicePixelRatio: the canvas's backing store is resized
  // to its CSS size times the ratio, and the context draws in CSS pixels.
  cv.setupCanvas = function setupCanvas(c) {
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(50, c.clientWidth), h = Math.max(50, c.clientHeight);
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr); c.height = Math.round(h * dpr);
    }
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    return { g: g, w: w, h: h };
  };
  const tip = $('tip');
  cv.showTip = function showTip(ev, text) {
    tip.textContent = text;
    tip.classList.remove('hidden');
    const x = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    const y = Math.min(ev.clientY + 14, window.innerHeight - tip.offsetHeight - 8);
    tip.style.left = x + 'px'; tip.style.top = y + 'px';
  };
  cv.hideTip = function hideTip() { tip.classList.add('hidden'); };
  cv.download = function download(name, blob) {
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = name;
    document.body.appendChild(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  };
})((window.ctsViewer = {}));
