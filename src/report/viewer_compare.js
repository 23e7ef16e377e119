// SPDX-License-Identifier: MIT
// ctfscope report viewer, the comparison of two runs (`ctfscope report GOOD BAD`): both
// runs' task timelines one above the other on one time axis, each from its own first event
// (aligned at their starts), with the first divergence (analysis/task_align.h) marked in
// both: a red line at each run's next event in the history that diverges, a dashed
// line at that last common event. Embedded after the other views (viewer_common.js says how
// the files fit together); the loader calls cv.initCompare(data) when the document has a
// "compare" member and "compare_tasks" (the bad run; "tasks" is the good one).
(function (cv) {
  'use strict';
  const $ = cv.$;
  const ROW = 14, AXIS = 22, PAD = 4;
  const F_RESOLVED = 1, F_FAILED = 2, F_BECAME = 16;

  // Per task (in the data's row order): its row, from the per-row counts.
  function rowsOf(T) {
    const rows = new Uint32Array(T.n);
    let i = 0;
    for (let r = 0; r < T.row_n.length; r++) for (let k = 0; k < T.row_n[r] && i < T.n; k++) rows[i++] = r;
    return rows;
  }
  function colour(flags) {
    if (flags & F_FAILED) return '#d9534f';
    if (flags & F_RESOLVED) return '#8cc68c';
    if (flags & F_BECAME) return '#b9c7d9';
    return '#c8c8c8'; // pending at the end
  }

  cv.initCompare = function initCompare(data) {
    const C = data.compare, runs = [data.tasks, data.compare_tasks];
    const root = $('view-compare');
    root.replaceChildren();
    const head = cv.el('section', null, 'panel');
    head.appendChild(cv.el('h2', 'Good and bad run compared'));
    const summary = cv.el('div', null, 'note');
    summary.id = 'cmp-summary';
    if (!C.matched) {
      summary.textContent = 'No order to compare: no task of ' + C.runs[0] + ' matches a task of ' + C.runs[1] + ' by creation path (runs of different programs?).';
    } else if (!C.diverged) {
      summary.textContent = 'No divergence: every matched task’s history has the same events in the same order in both runs.';
    } else {
      const last = C.good.last ? ', after ' + C.common + ' event' + (C.common === 1 ? '' : 's') + ' in the same order (last: ' + C.good.last.text + ')' : '';
      summary.textContent = 'First divergence, in the history of ' + C.bad.task + last + ': the good run then did “' +
        C.good.next.text + '” at +' + cv.humanNs(C.good.next.t) + ', the bad run “' + C.bad.next.text + '” at +' + cv.humanNs(C.bad.next.t) + '.';
    }
    head.appendChild(summary);
    const bar = cv.el('div', null, 'toolbar');
    const fit = cv.el('button', 'Fit');
    const go = cv.el('button', 'Go to the divergence');
    go.disabled = !C.diverged;
    // Runs of one program can differ in speed: aligning them at the last event they agree on
    // puts the divergence side by side.
    const alignLast = cv.el('label');
    const alignBox = cv.el('input');
    alignBox.type = 'checkbox';
    alignBox.id = 'cmp-align-last';
    alignBox.disabled = !(C.diverged && C.good.last);
    alignLast.appendChild(alignBox);
    alignLast.appendChild(document.createTextNode(' align at the last common event'));
    bar.appendChild(fit); bar.appendChild(go); bar.appendChild(alignLast);
    bar.appendChild(cv.el('span', 'wheel: zoom both · drag: pan both · red: first divergence · dashed: last event in common', 'keys'));
    head.appendChild(bar);
    root.appendChild(head);

    const views = runs.map((T, s) => {
      const sec = cv.el('section', null, 'panel');
      sec.appendChild(cv.el('h2', (s ? 'Bad run: ' : 'Good run: ') + C.runs[s]));
      const c = cv.el('canvas', null, 'compare');
      c.id = 'cmp-' + (s ? 'bad' : 'good');
      const nrows = Math.max(1, T.rows);
      c.style.height = Math.min(420, AXIS + PAD * 2 + nrows * ROW) + 'px';
      sec.appendChild(c);
      root.appendChild(sec);
      const side = s ? C.bad : C.good;
      // shift: ns added to this run's times on the shared axis (0: aligned at the starts).
      return { T: T, c: c, rows: rowsOf(T), side: side, scroll: 0, shift: 0 };
    });

    if (C.paths && C.paths.length) {
      const sec = cv.el('section', null, 'panel');
      sec.appendChild(cv.el('h2', 'Tasks that ended differently (by creation path)'));
      const table = cv.el('table', null, 'grid');
      table.id = 'cmp-paths';
      const tr = cv.el('tr');
      // Text columns, read from the left (the grid's default alignment is for numbers).
      const cell = (tag, text) => { const e = cv.el(tag, text); e.style.textAlign = 'left'; return e; };
      for (const h of ['creation path', 'good run', 'bad run']) tr.appendChild(cell('th', h));
      table.appendChild(tr);
      for (const p of C.paths) {
        const r = cv.el('tr');
        for (const v of [p.path, p.good, p.bad]) r.appendChild(cell('td', v));
        table.appendChild(r);
      }
      sec.appendChild(table);
      root.appendChild(sec);
    }

    // One time range for both: ns from each run's first event.
    const span = Math.max(1, runs[0].end - runs[0].first, runs[1].end - runs[1].first);
    const st = { t0: 0, t1: span * 1.02 };
    const labelW = 0;
    const xOf = (t, w) => labelW + ((t - st.t0) / (st.t1 - st.t0)) * (w - labelW);

    function draw(v) {
      const { g, w, h } = cv.setupCanvas(v.c);
      const T = v.T, X = (t) => xOf(t + v.shift, w);
      g.fillStyle = '#f2f2f2'; g.fillRect(0, 0, w, h);
      // The axis.
      g.fillStyle = '#5d6773'; g.font = '11px sans-serif'; g.textAlign = 'left';
      // A 1-2-5 step leaving about 90 px per label, so that labels never overlap.
      const raw = (st.t1 - st.t0) / Math.max(1, Math.floor(w / 90));
      const p10 = Math.pow(10, Math.floor(Math.log10(raw)));
      const step = [1, 2, 5, 10].map((k) => k * p10).find((k) => k >= raw);
      // Ticks in this run's own time (from its first event).
      for (let t = Math.ceil((st.t0 - v.shift) / step) * step; t <= st.t1 - v.shift; t += step) {
        const x = X(t);
        g.fillRect(x, 0, 1, 6);
        g.fillText((t < 0 ? '−' : '+') + cv.humanNs(Math.abs(t)), x + 2, 14);
      }
      const first = T.first;
      for (let i = 0; i < T.n; i++) {
        const y = AXIS + PAD + (v.rows[i] - v.scroll) * ROW;
        if (y < AXIS || y > h) continue;
        const a = T.start[i] - first, b = a + Math.max(T.dur[i], 0);
        if (b + v.shift < st.t0 || a + v.shift > st.t1) continue;
        const x0 = X(a), x1 = Math.max(x0 + 1, X(b));
        g.fillStyle = colour(T.flags[i]);
        g.fillRect(x0, y + 2, x1 - x0, ROW - 4);
        const lab = T.label[i] >= 0 ? T.strings[T.label[i]] : '';
        if (lab && x1 - x0 > 30) {
          g.fillStyle = '#1d232b';
          g.save(); g.beginPath(); g.rect(x0, y, x1 - x0, ROW); g.clip();
          g.fillText(lab, Math.max(x0, 0) + 2, y + ROW - 3);
          g.restore();
        }
      }
      // Running periods, darker over the tasks.
      const A = T.acts;
      if (A && A.n) {
        g.fillStyle = 'rgba(40, 90, 40, 0.8)';
        for (let k = 0; k < A.n; k++) {
          const a = A.t0[k] - first, b = a + A.dur[k];
          if (b + v.shift < st.t0 || a + v.shift > st.t1) continue;
          const y = AXIS + PAD + (v.rows[A.task[k]] - v.scroll) * ROW;
          if (y < AXIS || y > h) continue;
          const x0 = X(a);
          g.fillRect(x0, y + 4, Math.max(1, X(b) - x0), ROW - 8);
        }
      }
      // The divergence: dashed at the last common event, red at this run's next event.
      v.markerX = null;
      if (C.diverged) {
        if (v.side.last) {
          const x = X(v.side.last.t);
          g.strokeStyle = '#5d6773'; g.setLineDash([4, 3]); g.lineWidth = 1;
          g.beginPath(); g.moveTo(x + 0.5, AXIS); g.lineTo(x + 0.5, h); g.stroke(); g.setLineDash([]);
        }
        const x = X(v.side.next.t);
        v.markerX = x;
        g.fillStyle = '#d00000'; g.fillRect(x - 1, AXIS - 4, 2, h - AXIS + 4);
        g.font = 'bold 11px sans-serif';
        const text = 'first divergence: ' + v.side.next.text + ' (+' + cv.humanNs(v.side.next.t) + ')';
        const tw = g.measureText(text).width;
        g.textAlign = x + 4 + tw > w ? 'right' : 'left';
        g.fillText(text, x + (g.textAlign === 'right' ? -4 : 4), AXIS - 8 + 12);
        g.textAlign = 'left';
      }
    }
    function redraw() { for (const v of views) draw(v); }

    function zoomAround(t, f) {
      const a = t - (t - st.t0) * f, b = t + (st.t1 - t) * f;
      if (b - a < 10) return;
      st.t0 = a; st.t1 = b;
      redraw();
    }
    for (const v of views) {
      cv.on(v.c, 'wheel', (ev) => {
        ev.preventDefault();
        if (ev.shiftKey) {
          v.scroll = Math.max(0, Math.min(v.T.rows - 1, v.scroll + Math.sign(ev.deltaY) * 3));
          draw(v);
          return;
        }
        const r = v.c.getBoundingClientRect();
        const t = st.t0 + ((ev.clientX - r.left) / r.width) * (st.t1 - st.t0);
        zoomAround(t, ev.deltaY > 0 ? 1.25 : 0.8);
      }, { passive: false });
      let drag = null;
      cv.on(v.c, 'pointerdown', (ev) => { drag = { x: ev.clientX, t0: st.t0, t1: st.t1 }; v.c.setPointerCapture(ev.pointerId); });
      cv.on(v.c, 'pointermove', (ev) => {
        if (!drag) return;
        const dt = ((ev.clientX - drag.x) / v.c.getBoundingClientRect().width) * (drag.t1 - drag.t0);
        st.t0 = drag.t0 - dt; st.t1 = drag.t1 - dt;
        redraw();
      });
      cv.on(v.c, 'pointerup', () => { drag = null; });
    }
    cv.on(fit, 'click', () => {
      const sh = views[1].shift;
      st.t0 = Math.min(0, sh);
      st.t1 = Math.max(runs[0].end - runs[0].first, runs[1].end - runs[1].first + sh) * 1.02;
      redraw();
    });
    // Both divergence points in view, with room around them.
    function goToDivergence() {
      const sh = [views[0].shift, views[1].shift];
      const ts = [C.good.next.t + sh[0], C.bad.next.t + sh[1]];
      if (C.good.last) ts.push(C.good.last.t + sh[0], C.bad.last.t + sh[1]);
      const a = Math.min(...ts), b = Math.max(...ts), pad = Math.max((b - a) * 0.5, 1000);
      st.t0 = Math.max(Math.min(0, sh[1]), a - pad); st.t1 = b + pad;
      redraw();
    }
    cv.on(go, 'click', goToDivergence);
    function applyAlign() {
      const on = alignBox.checked && !alignBox.disabled;
      views[0].shift = 0;
      views[1].shift = on ? C.good.last.t - C.bad.last.t : 0;
      goToDivergence();
    }
    cv.on(alignBox, 'change', applyAlign);
    // On a long trace the divergence would be a pixel wide: open on it.
    if (C.diverged && Math.abs(C.bad.next.t - (C.bad.last ? C.bad.last.t : 0)) < span / 20) goToDivergence();
    cv.on(window, 'resize', redraw);
    cv.redrawers.compare = redraw;
    // Test hooks: where the markers are drawn, in CSS pixels from each canvas's left edge.
    cv.api.compare = {
      range: () => [st.t0, st.t1],
      markers: () => views.map((v) => v.markerX),
      xOf: (t, s) => xOf(t + views[s].shift, views[s].c.clientWidth),
      setAlignLast: (on) => { alignBox.checked = on; applyAlign(); },
      goToDivergence: goToDivergence,
    };
  };
})(window.ctsViewer);
