// SPDX-License-Identifier: MIT
// ctfscope report viewer, part 4 of 5: the task timeline (task lanes, arrows, counters,
// ruler, allocation marks), its interaction (zoom, pan, search, selection, export) and the
// memory-by-task table. Where things go is computed by viewer_layout.js; this file paints it
// (on a canvas or into SVG) and handles the events. viewer_common.js says how the files fit
// together.
(function (cv) {
  'use strict';
  const { $, on, el, humanBytes, grouped, humanNs, signedNs, setupCanvas, showTip, hideTip, download, layout } = cv;
  const TYPES = ['wait', 'task', 'bind', 'try', 'choose', 'pick', 'join', 'map', 'condition', 'on_success', 'on_failure', 'on_termination', 'on_any', 'ignore_result', 'async', 'promise', 'semaphore', 'switch'];
  const F_FAILED = layout.F_FAILED, F_NEVER = layout.F_NEVER;
  // Arrow kinds: try_read, read, failed read, resolve, signal.
  const ARROW_COLORS = ['rgb(204,204,102)', 'rgb(0,0,255)', 'rgb(255,0,0)', 'rgb(0,128,0)', 'rgb(255,153,0)'];
  const COUNTER_COLORS = ['rgb(255,102,102)', 'rgb(255,170,0)', 'rgb(0,153,153)', 'rgb(153,51,204)'];

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
      measure(s) { return g.measureText(s).width; },
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
      measure(s) { return 7 * s.length; }, // 12 px sans-serif: at most about 7 px a character
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

  cv.initTasks = function initTasks(T) {
    const ix = layout.index(T);
    const n = ix.n, start = ix.start, end = ix.end, ids = T.id, L = ix.L, labelStart = ix.labelStart;
    const RULER = layout.RULER, MARKS = ix.marksH;
    // Memory by task (report_tasks.c, from analysis/task_memory.h: the figures of
    // `ctfscope top --by task`), by task position.
    const memBy = new Map();
    if (T.mem && T.mem.rows) for (const r of T.mem.rows) memBy.set(r.task, r);
    const canvas = $('timeline');
    const st = (cv.api.tasks = {
      // scale: px per ns; y: px scrolled down; compact: only the rows active in view, all on
      // screen (layout.rowMap)
      // mergeReads: a try_read followed by its read shows as the read (layout.tryReadsRead)
      // fisheye, focus: squeezed rows get a lens of full-height rows around active slot
      // `focus` (layout.rowMap), moved by vertical scrolling
      view: { start: ix.t0, scale: 1, y: 0, compact: true, mergeReads: true, fisheye: true, focus: 0 },
      highlight: null, matches: 0, counters: ix.counters.length > 0, drawn: {}, frameMs: [],
      current: -1, // the search match last gone to (next/previous)
    });
    // Bind simplification (layout.simplifiedBinds), on by default as in mirage-trace-viewer.
    st.bindsSimplified = layout.setSimplified(ix, true);
    function labelOf(i) { const k = labelStart[i]; return k < labelStart[i + 1] ? T.strings[L.s[k]] : null; }
    function nameOf(i) { const l = labelOf(i); return l !== null ? l : String(ids[i]); }
    let W_ = 800, H_ = 560;
    // Fit leaves room on the right for the counters' names (drawn over the right edge), so
    // they do not cover the trace's last events.
    let nameW = 0;
    {
      const g = canvas.getContext('2d');
      g.font = '12px sans-serif';
      for (const c of ix.counters) nameW = Math.max(nameW, g.measureText(c.name).width);
    }
    const fit = () => { st.view.marginR = st.counters && nameW ? nameW + 12 : 0; layout.fit(ix, st.view, W_); };
    const clampView = () => layout.clampView(ix, st.view, W_, H_);

    // One frame into a painter, from the geometry of viewer_layout.js. Returns counts of what
    // was drawn. Axis-aligned things are rectangles (the canvas fills them without path
    // rasterization, which is what made dense frames slow to display).
    function paint(P, w, h) {
      const f = layout.frame(ix, st.view, w, h), X = f.X;
      const drawn = { tasks: 0, arrows: 0, labels: 0, acts: 0, highlighted: 0, rows: 0, marks: 0, lanes: 0, arrowStride: 1, bandCols: 0, layerArrows: 0, denseCounters: 0 };
      P.rect('rgb(230,230,230)', 0, 0, w, h);
      // Bands: per pixel column, the share of its time they cover, blended into the
      // background; drawn as one image strip (one drawImage, whatever the zoom).
      const texts = [];
      const wCols = Math.ceil(w), idleCov = new Float32Array(wCols), gcCov = new Float32Array(wCols);
      drawn.bandCols += layout.bandColumns(ix.idle, f, idleCov, 'sleeping', texts);
      drawn.bandCols += layout.bandColumns(ix.gc, f, gcCov, 'GC', texts);
      if (drawn.bandCols) P.strip(layout.bandStrip(idleCov, gcCov), RULER, h - RULER);
      for (let q = 0; q < texts.length; q += 2) P.text('rgb(255,255,255)', texts[q + 1], texts[q], RULER + 14, 'center');
      // Grid and ruler with absolute times.
      const grid = layout.gridLines(f), startUs = cv.data.mem && cv.data.mem.start_us;
      P.rect('rgb(248,248,248)', 0, 0, w, RULER);
      const rl = grid.ticks.map((t) => layout.rulerLabel(t, grid.step, startUs));
      const rulerBoxes = layout.rulerPlacements(f, grid, rl.map((s) => P.measure(s)));
      drawn.rulerLabels = [];
      for (let q = 0; q < rulerBoxes.length; q += 3) {
        P.text('rgb(60,60,60)', rl[rulerBoxes[q]], rulerBoxes[q + 1], 17, 'left');
        drawn.rulerLabels.push([rulerBoxes[q + 1], rulerBoxes[q + 1] + rulerBoxes[q + 2]]);
      }
      P.rects('rgb(190,190,190)', grid.grid);
      P.rect('rgb(150,150,150)', 0, RULER - 1, w, 1);
      // Visible rows; highlights behind the lines.
      const rows = layout.taskRows(ix, f);
      drawn.rows = rows.rows; drawn.tasks = rows.tasks; drawn.acts = rows.acts;
      drawn.links = rows.links.length / 4;
      drawn.activeRows = st.view.compact ? f.shownRows : -1;
      drawn.rowH = f.rowh;
      drawn.lens = f.lens ? f.lens.slice() : null;
      if (f.lens) P.rect('rgb(99,179,237)', 0, f.lensTop, 3, f.lens[1] * layout.ROWH); // the lens's extent
      if (st.current >= 0 && st.hlList) { // the match gone to: a wider orange box
        const i = st.current, y = f.rowY(ix.taskRow[i]), x0 = X(ix.start[i]), x1 = Math.max(X(end[i]), x0 + 2);
        if (y >= f.top - 4 && y <= h + 4) P.rects('rgb(255,140,0)', [x0 - 6, y - 6, x1 - x0 + 12, 12]);
      }
      if (st.hlList) {
        const hl = layout.highlightBoxes(ix, f, st.hlList);
        drawn.highlighted = hl.count;
        P.rects('rgb(255,220,0)', hl.boxes);
      }
      P.rects('rgb(51,51,51)', rows.links);
      P.rects('rgb(51,51,51)', rows.lineRuns);
      P.rects('rgb(204,0,0)', rows.failRuns);
      P.triangles('rgb(51,51,51)', rows.heads);
      P.rects('rgb(255,255,255)', rows.actRuns);
      // Arrows; the status line says when only 1 in `stride` is drawn.
      const ar = layout.arrows(ix, f);
      drawn.arrowStride = ar.stride;
      drawn.arrows = ar.count;
      drawn.mergedReads = ar.merged;
      // Many vertical arrows (a busy stretch zoomed out): a 1-px column each and a head of
      // rows 1, 1, 3, 3, 5, 5 px wide, written as pixels into an image layer (see layer()),
      // composited over the other arrows: cheaper than thousands of anti-aliased lines and
      // triangles. Kinds in the same order as on the canvas.
      const pixels = ar.nVert >= 256 && P.layer ? P.layer(RULER, h) : null;
      if (pixels) {
        drawn.layerArrows = ar.nVert;
        for (let kd = 0; kd < layout.ARROW_KINDS; kd++) {
          const c32 = pixelOf(ARROW_COLORS[kd]), V = layout.mergedVerticals(ar.vLines[kd]), Hd = ar.vHeads[kd];
          for (let q = 0; q < V.length; q += 3) pixels.fill(V[q], V[q + 1], 1, V[q + 2], c32);
          for (let q = 0; q < Hd.length; q += 3) pixels.head(Hd[q], Hd[q + 1], Hd[q + 2], c32);
        }
      } else layout.verticalsAsSegments(ar);
      for (let kd = 0; kd < layout.ARROW_KINDS; kd++) {
        P.lines(ARROW_COLORS[kd], 1, ar.byKind[kd]);
        P.triangles(ARROW_COLORS[kd], ar.headsByKind[kd]);
      }
      if (pixels) pixels.done();
      // Counters as step lines, each on its own scale (names drawn after the labels).
      const names = [];
      if (st.counters) {
        const colors = COUNTER_COLORS;
        const plotTop = f.top + 10, plotH = h - plotTop - 10;
        ix.counters.forEach((c, ci) => {
          if (c.hidden) return; // unticked in the counter list
          const { geo, lastY } = layout.counterGeometry(c, ix.scales[c.group], f, plotTop, plotH);
          // The dark outline keeps a sparse line readable over the tasks; zoomed out, where
          // most columns have samples, the counter is a solid band and goes without it (it
          // would double the counter's cost).
          const dense = layout.counterIsDense(geo);
          if (!dense) {
            P.rects('rgba(0,0,0,0.35)', layout.stepRects(geo, w, 5));
            P.rects(colors[ci % 4], layout.stepRects(geo, w, 3));
          } else {
            // Hundreds of columns of varying extent, on whole pixels (cheap to fill) and
            // translucent, so the rows stay visible through the band; one polygon when that
            // is cheap, else a fillRect per column.
            const r = layout.stepRects(geo, w, 3, true), col = colors[ci % 4].replace('rgb(', 'rgba(').replace(')', ',0.67)');
            if (layout.smoothColumns(r)) P.columns(col, r); else P.rects(col, r);
            drawn.denseCounters++;
          }
          if (lastY !== null) names.push(dense ? 'rgb(40,40,40)' : colors[ci % 4], c.name, layout.counterNameY(f, plotTop, lastY, ci));
        });
      }
      // Rows under 12 px (squeezed, outside the fisheye's lens: layout.rowMap) have no room
      // for labels.
      const jobs = [];
      for (let q = 0; q < rows.labelJobs.length; q += 2) if (f.rowHeight(ix.taskRow[rows.labelJobs[q]]) >= 12) jobs.push(rows.labelJobs[q], rows.labelJobs[q + 1]);
      const labels = layout.labelPlacements(ix, f, jobs, 4000);
      for (let q = 0; q < labels.length; q += 5) {
        const i = labels[q];
        P.text(st.highlight && st.highlight[i] ? 'rgb(0,0,0)' : 'rgb(20,20,20)', T.strings[labels[q + 1]], labels[q + 2], labels[q + 3], 'left', labels[q + 4]);
      }
      drawn.labels = labels.length / 5;
      // Counter names at the right edge, moved apart where they would overlap.
      const nameYs = [];
      for (let q = 0; q < names.length; q += 3) nameYs.push(names[q + 2]);
      const spread = layout.spreadLabels(nameYs, 14, f.top + 12, h - 4);
      drawn.counterNames = [];
      for (let q = 0; q < names.length; q += 3) {
        const y = spread[q / 3], nw = P.measure(names[q + 1]);
        P.text(names[q], names[q + 1], w - 6, y, 'right');
        drawn.counterNames.push([w - 6 - nw, y - 11, w - 6, y + 3]);
      }
      // Allocation marks (both traces): samples per pixel column in a strip under the ruler.
      if (ix.marks) {
        P.rect('rgb(244,244,250)', 0, RULER, w, MARKS);
        const mk = layout.markBars(ix, f);
        drawn.marks = mk.count;
        P.rects('rgb(128,0,128)', mk.bars);
        P.text('rgb(90,90,90)', 'allocations', 4, RULER + 12, 'left');
      }
      // A lane per thread (more than one: record --tasks): when each ran a task.
      if (ix.lanes) {
        P.rect('rgb(236,238,244)', 0, RULER + MARKS, w, ix.lanesH);
        const lb = layout.laneBars(ix, f);
        drawn.lanes = lb.count;
        P.rects('rgb(70,90,150)', lb.bars);
      }
      P.text('rgb(90,90,90)', 'grid: ' + humanNs(grid.step), w - 6, h - 6, 'right');
      return drawn;
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
      let s = n + ' tasks in ' + T.rows + ' rows, ' + ix.nw + ' interactions · view ' + signedNs(v.start) + ' … ' + signedNs(v.start + span) + ' (' + humanNs(span) + ') · drawn: ' + st.drawn.tasks + ' tasks, ' + st.drawn.arrows + ' arrows';
      if (st.drawn.activeRows >= 0) s += ' · ' + st.drawn.activeRows + ' rows active in view' + (st.drawn.rowH < layout.ROWH ? ', squeezed to ' + st.drawn.rowH.toFixed(1) + ' px' : '') + (st.drawn.lens ? ', full height around the focus (shift+wheel, ↑ ↓ move it)' : '');
      if (st.query) s += ' · "' + st.query + '": ' + st.matches + ' matching tasks';
      if (st.drawn.arrowStride > 1) s += ' · 1 in ' + st.drawn.arrowStride + ' interactions drawn at this zoom';
      if (T.arrows_total > ix.nw || T.acts_total > ix.na) s += ' · level of detail: the report keeps ' + ix.nw + ' of ' + T.arrows_total + ' interactions and ' + ix.na + ' of ' + T.acts_total + ' running periods (evenly spaced)';
      $('tl-status').textContent = s;
    }
    // Vertical scrolling by dy px: with the fisheye on (the rows fit), it moves the lens.
    function scrollRows(dy) {
      if (st.drawn.lens) {
        const m = layout.rowMap(ix, st.view, W_, H_);
        st.view.focus = Math.min(Math.max(0, Math.round(st.view.focus + dy / layout.ROWH)), m.active.length - 1);
      } else st.view.y += dy;
      clampView(); request();
    }
    function zoomAt(factor, px) {
      hideTip();
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
      hideTip(); // what it describes moves away under the pointer
      if (ev.shiftKey) { scrollRows(ev.deltaY); return; }
      zoomAt(ev.deltaY < 0 ? 1.2 : 1 / 1.2, ev.clientX - r.left);
    }, { passive: false });
    let drag = null;
    on(canvas, 'pointerdown', (ev) => {
      drag = { x: ev.clientX, y: ev.clientY, start: st.view.start, vy: st.view.y, focus: st.view.focus };
      canvas.setPointerCapture(ev.pointerId);
      canvas.classList.add('dragging');
      canvas.focus();
    });
    on(canvas, 'pointermove', (ev) => {
      if (drag) {
        st.view.start = drag.start - (ev.clientX - drag.x) / st.view.scale;
        if (st.drawn.lens) st.view.focus = Math.max(0, drag.focus - (ev.clientY - drag.y) / layout.ROWH);
        else st.view.y = drag.vy - (ev.clientY - drag.y);
        clampView(); request(); hideTip();
        return;
      }
      const r = canvas.getBoundingClientRect(), ly = ev.clientY - r.top - (RULER + MARKS + 2);
      if (ix.lanes && ly >= 0 && ly < ix.lanes.length * layout.LANEH) {
        const l = Math.floor(ly / layout.LANEH);
        showTip(ev, (l === layout.MAX_LANES - 1 && T.lanes > layout.MAX_LANES ? 'lanes ' + l + '-' + (T.lanes - 1) : 'lane ' + l) + ' (a thread): its running periods' + (T.lane_run && l < T.lane_run.length ? ', running ' + humanNs(T.lane_run[l]) + ' in all' : ''));
        return;
      }
      const i = hit(ev);
      if (i < 0) { hideTip(); return; }
      let text = (labelOf(i) !== null ? nameOf(i) + '\n' : '') + 'task ' + ids[i] + ' (' + (TYPES[T.type[i]] || 'unknown') + ')\n' + signedNs(start[i]) + ' … ' + signedNs(end[i]) + ', ' + humanNs(end[i] - start[i]);
      if (T.flags[i] & F_NEVER) text += '\nshould-resolve task never resolved';
      else if (T.flags[i] & F_FAILED) text += '\nfailed';
      if (T.run && T.runs[i]) text += '\nrunning ' + humanNs(T.run[i]) + ' in ' + grouped(T.runs[i]) + (T.runs[i] === 1 ? ' period' : ' periods');
      if (memBy.has(i)) { const r = memBy.get(i); text += '\nallocated ' + r.text[0] + ' (' + r.text[1] + ' allocations), live at end ' + r.text[3] + ', lane ' + r.lane; }
      const nlab = labelStart[i + 1] - labelStart[i];
      if (nlab > 1) text += '\n' + nlab + ' labels';
      showTip(ev, text);
    });
    on(canvas, 'pointerup', () => { drag = null; canvas.classList.remove('dragging'); });
    on(canvas, 'mouseleave', hideTip);
    // The task under the pointer (within 16 px of its line).
    function hit(ev) {
      const r = canvas.getBoundingClientRect();
      return layout.hitTask(ix, st.view, ev.clientX - r.left, ev.clientY - r.top, W_, H_);
    }
    // Double-click: the task and everything linked to it by `becomes`, both ways.
    on(canvas, 'dblclick', (ev) => {
      const i = hit(ev);
      if (i < 0) { setHighlight(null); return; }
      const { set, count } = layout.becomesClosure(ix, i);
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
      st.current = -1;
      st.matchList = null;
      request();
    }
    // Search: case-insensitive substring of any label; highlights as you type.
    function search(q) {
      st.query = q;
      st.selected = null;
      if (!q) { setHighlight(null); return; }
      const { set, count } = layout.searchLabels(ix, q);
      setHighlight(set, count);
    }
    // Next/previous match in time order: the view pans to it (same zoom, the match a third
    // in from the left) and scrolls its row into view.
    function gotoMatch(dir) {
      if (!st.hlList || !st.query || !st.hlList.length) return;
      if (!st.matchList) st.matchList = Int32Array.from(st.hlList).sort((a, b) => ix.start[a] - ix.start[b] || a - b);
      const list = st.matchList, k = st.current < 0 ? (dir > 0 ? 0 : list.length - 1) : (list.indexOf(st.current) + dir + list.length) % list.length;
      const i = list[k];
      st.current = i;
      hideTip();
      st.view.start = ix.start[i] - W_ / st.view.scale / 3;
      clampView();
      const act = layout.rowMap(ix, st.view, W_, H_).active, slot = act ? act.indexOf(ix.taskRow[i]) : -1;
      if (slot >= 0) st.view.focus = slot; // the lens on the match's row
      const top = layout.RULER + ix.hdr, y = layout.taskPoint(ix, st.view, i, W_, H_)[1];
      if (y < top + 8 || y > H_ - 8) { st.view.y += y - (top + H_) / 2; clampView(); }
      request();
    }
    on($('tl-next'), 'click', () => gotoMatch(1));
    on($('tl-prev'), 'click', () => gotoMatch(-1));
    on($('tl-search'), 'input', (ev) => search(ev.target.value));
    on($('tl-search'), 'keydown', (ev) => {
      if (ev.key === 'Enter') gotoMatch(ev.shiftKey ? -1 : 1);
      if (ev.key === 'Enter' || ev.key === 'Escape') { if (ev.key === 'Escape') { ev.target.value = ''; search(''); } ev.target.blur(); canvas.focus(); }
    });
    $('tl-counters').checked = st.counters;
    on($('tl-counters'), 'change', (ev) => { st.counters = ev.target.checked; request(); });
    $('tl-binds').checked = st.bindsSimplified >= 0;
    on($('tl-binds'), 'change', (ev) => { st.bindsSimplified = layout.setSimplified(ix, ev.target.checked); request(); });
    $('tl-merge').checked = st.view.mergeReads;
    on($('tl-merge'), 'change', (ev) => { st.view.mergeReads = ev.target.checked; request(); });
    // The arrows' colours, and one toggle per counter (in its colour).
    const legend = $('tl-legend');
    legend.textContent = '';
    ['try_read: waits for', 'read: reads the result of', 'failed read', 'resolve', 'signal'].forEach((name, kd) => {
      const item = el('span', null, 'key'), sw = el('span', null, 'swatch');
      sw.style.background = ARROW_COLORS[kd];
      item.appendChild(sw); item.appendChild(document.createTextNode(name));
      item.dataset.kind = kd;
      legend.appendChild(item);
    });
    const clist = $('tl-counter-list');
    clist.textContent = '';
    ix.counters.forEach((c, ci) => {
      const lab = el('label'), box = el('input');
      box.type = 'checkbox'; box.checked = true; box.dataset.counter = c.name;
      const name = el('span', c.name);
      name.style.color = COUNTER_COLORS[ci % 4];
      lab.appendChild(box); lab.appendChild(name);
      on(box, 'change', () => { c.hidden = !box.checked; request(); });
      clist.appendChild(lab);
    });
    $('tl-fisheye').checked = st.view.fisheye;
    on($('tl-fisheye'), 'change', (ev) => { st.view.fisheye = ev.target.checked; request(); });
    $('tl-compact').checked = st.view.compact;
    on($('tl-compact'), 'change', (ev) => { st.view.compact = ev.target.checked; st.view.y = 0; request(); });
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
      if (cv.api.view !== 'tasks') return;
      const inInput = ev.target && (ev.target.tagName === 'INPUT' || ev.target.tagName === 'SELECT');
      if (ev.key === 'Escape') { $('tl-search').value = ''; search(''); if (inInput) ev.target.blur(); return; }
      if (inInput) return;
      if (ev.key === '/') { ev.preventDefault(); $('tl-search').focus(); }
      else if (ev.key === 'n' || ev.key === 'N') gotoMatch(ev.key === 'N' ? -1 : 1);
      else if (ev.key === ' ') { ev.preventDefault(); st.counters = !st.counters; $('tl-counters').checked = st.counters; request(); }
      else if (ev.key === '+' || ev.key === '=') zoomAt(1.2, W_ / 2);
      else if (ev.key === '-') zoomAt(1 / 1.2, W_ / 2);
      else if (ev.key === '0') { fit(); request(); }
      else if (ev.key === 'ArrowLeft') { st.view.start -= 100 / st.view.scale; request(); }
      else if (ev.key === 'ArrowRight') { st.view.start += 100 / st.view.scale; request(); }
      else if (ev.key === 'ArrowUp') scrollRows(-48);
      else if (ev.key === 'ArrowDown') scrollRows(48);
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
    // Memory by task: one row per task that allocated, then the allocations made while no
    // task ran on their thread and those the task trace does not name; the figures and
    // their text are `ctfscope top --by task`'s.
    const M = T.mem;
    if (M && M.attribution === 'exact') {
      const tbl = $('task-mem');
      const head = el('tr');
      for (const c of ['allocated', 'allocations', 'freed', 'live at end', 'lane', 'task']) head.appendChild(el('th', c, c === 'task' ? 'site' : ''));
      tbl.appendChild(head);
      const addRow = (r, lane, name, kind) => {
        const tr = el('tr');
        tr.dataset.kind = kind;
        tr.dataset.allocBytes = r.alloc_bytes; tr.dataset.allocCount = r.alloc_count;
        tr.dataset.liveBytes = r.live_bytes; tr.dataset.lane = lane;
        for (const v of [r.text[0], r.text[1], r.text[2], r.text[3], lane]) tr.appendChild(el('td', v));
        tr.appendChild(el('td', name, 'site'));
        tbl.appendChild(tr);
        return tr;
      };
      for (const r of M.rows) addRow(r, String(r.lane), nameOf(r.task) + ' (#' + r.id + ')', 'task').dataset.id = r.id;
      addRow(M.outside, '-', '(outside tasks)', 'outside');
      if (M.unattributed.alloc_samples) addRow(M.unattributed, '-', '(unattributed: not named by the task trace)', 'unattributed');
      $('task-mem-note').textContent = (M.rows.length < M.rows_total ? 'The ' + M.rows.length + ' of ' + M.rows_total + ' tasks that allocated most. ' : '') +
        'Each sampled allocation counts for the task that was running on the thread that made it, as `ctfscope top --by task` says; ' +
        'the clocks are aligned by the task trace\'s anchor (error ' + humanNs(M.error_ns) + ', median over ' + grouped(M.pairs) + ' allocations).' +
        (T.lost ? ' The task tracer lost ' + grouped(T.lost) + ' events: allocations it did not name are unattributed.' : '');
    } else if (M) {
      $('task-mem-note').textContent = 'No memory by task: ' + M.reason + '.';
    } else $('task-mem-panel').classList.add('hidden');
    const title = $('tasks-title');
    title.textContent = 'Tasks: ' + T.file + ' (' + grouped(T.events) + ' events' + (T.wrapped ? ', wrapped ring' : '') +
      (T.lanes > 1 ? ', ' + T.lanes + ' lanes (threads)' : '') + (T.lost ? ', ' + grouped(T.lost) + ' events lost by the tracer' : '') + ')';
    title.dataset.lost = T.lost || 0;
    title.dataset.lanes = T.lanes || 0;

    // Hooks for tests and measurements.
    st.draw = draw;
    st.fit = () => { fit(); draw(); };
    st.search = (q) => { $('tl-search').value = q; search(q); draw(); };
    st.next = () => { gotoMatch(1); draw(); return st.current; };
    st.prev = () => { gotoMatch(-1); draw(); return st.current; };
    st.zoom = (f, px) => { zoomAt(f, px === undefined ? W_ / 2 : px); draw(); };
    st.pan = (dx, dy) => { st.view.start -= dx / st.view.scale; st.view.y -= dy || 0; clampView(); draw(); };
    st.toSvg = toSvg;
    st.taskXY = (i) => layout.taskPoint(ix, st.view, i, W_, H_);
    st.findTask = (id) => { for (let i = 0; i < n; i++) if (ids[i] === id) return i; return -1; };
    st.nameOf = nameOf;
    // The first view is where the activity is (layout.busyRange), the whole trace when it is
    // spread out; Fit shows the whole trace.
    const busy = layout.busyRange(ix);
    function firstView() {
      fit();
      if (busy) { layout.showRange(st.view, busy[0], busy[1], W_); clampView(); }
    }
    cv.redrawers.tasks = () => { sized = null; if (!st.fitted) { const c = setupCanvas(canvas); W_ = c.w; H_ = c.h; firstView(); st.fitted = true; } draw(); };
  };

})(window.ctsViewer);
