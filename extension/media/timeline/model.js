/* The timeline's data model and the queries that keep drawing fast.
 *
 * Pure functions, no DOM: the webview (view.js) and `node --test` both load
 * this file. The payload comes from the language server's
 * `trainiumLens/timeline` request (server/trainium_lens/lsp/features/timeline.py):
 *
 *   { lanes: [{name, kind, rows}], names: [str], sources: [[file, line]],
 *     events: {lane: [], depth: [], start: [], dur: [], name: [], src: []},
 *     focus: {start, end} | null, focusSrc: int, file, line, t0 }
 *
 * Times are µs relative to `t0`. Each (lane, depth) pair becomes a *track*:
 * events of one nesting level never overlap, so sorted by start they are also
 * sorted by end, and a binary search finds the first visible one. That, and
 * merging every run of sub-pixel events into one rectangle per pixel column,
 * bounds a frame's work by the canvas width, not by the event count.
 */
(function (root, factory) {
  if (typeof module === "object" && module.exports) module.exports = factory();
  else root.TimelineModel = factory();
})(/** @type {typeof globalThis} */ (typeof self !== "undefined" ? self : this), function () {
  "use strict";

  /** First index i in [lo, hi) with arr[i] >= value (hi when none). */
  function lowerBound(arr, value, lo, hi) {
    lo = lo || 0;
    hi = hi === undefined ? arr.length : hi;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (arr[mid] < value) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Build tracks (typed arrays per lane and depth) from the payload. */
  function buildModel(data) {
    const ev = data.events;
    const n = ev.start.length;
    const lanes = data.lanes.map(function (l) {
      return { name: l.name, kind: l.kind, rows: Math.max(1, l.rows | 0), tracks: [] };
    });
    const counts = new Map();
    for (let i = 0; i < n; i++) {
      const key = ev.lane[i] * 4096 + ev.depth[i];
      counts.set(key, (counts.get(key) || 0) + 1);
    }
    const tracks = [];
    const byKey = new Map();
    lanes.forEach(function (lane, li) {
      for (let d = 0; d < lane.rows; d++) {
        const size = counts.get(li * 4096 + d) || 0;
        const t = {
          lane: li,
          depth: d,
          size: 0,
          start: new Float64Array(size),
          end: new Float64Array(size),
          index: new Int32Array(size), // event index in the payload arrays
          hl: new Int32Array(size + 1), // prefix count of highlighted events
        };
        lane.tracks.push(t);
        byKey.set(li * 4096 + d, t);
        tracks.push(t);
      }
    });
    // Payload events come sorted by lane then start (the server sorts them);
    // sort here anyway per track so a hand-made payload cannot break the search.
    let sorted = true;
    for (let i = 0; i < n; i++) {
      const t = byKey.get(ev.lane[i] * 4096 + ev.depth[i]);
      if (!t) continue;
      const k = t.size++;
      t.start[k] = ev.start[i];
      t.end[k] = ev.start[i] + ev.dur[i];
      t.index[k] = i;
      if (k > 0 && t.start[k] < t.start[k - 1]) sorted = false;
    }
    if (!sorted) tracks.forEach(sortTrack);
    const model = {
      data: data,
      lanes: lanes,
      tracks: tracks,
      count: n,
      t0: 0,
      t1: 0,
      focusSrc: typeof data.focusSrc === "number" ? data.focusSrc : -1,
    };
    let t1 = 0;
    for (let i = 0; i < n; i++) t1 = Math.max(t1, ev.start[i] + ev.dur[i]);
    model.t1 = t1 > 0 ? t1 : 1;
    setHighlight(model, model.focusSrc);
    return model;
  }

  function sortTrack(t) {
    const order = Array.from({ length: t.size }, function (_, k) {
      return k;
    });
    order.sort(function (a, b) {
      return t.start[a] - t.start[b];
    });
    const s = Float64Array.from(order, function (k) {
      return t.start[k];
    });
    const e = Float64Array.from(order, function (k) {
      return t.end[k];
    });
    const ix = Int32Array.from(order, function (k) {
      return t.index[k];
    });
    t.start = s;
    t.end = e;
    t.index = ix;
  }

  /** Mark the events of one source line (index into data.sources) highlighted. */
  function setHighlight(model, src) {
    model.focusSrc = src;
    const evSrc = model.data.events.src;
    model.tracks.forEach(function (t) {
      let c = 0;
      t.hl[0] = 0;
      for (let k = 0; k < t.size; k++) {
        if (src >= 0 && evSrc[t.index[k]] === src) c++;
        t.hl[k + 1] = c;
      }
    });
  }

  /** Whether event `i` (payload index) is highlighted. */
  function isHighlighted(model, i) {
    return model.focusSrc >= 0 && model.data.events.src[i] === model.focusSrc;
  }

  /**
   * Call emit(x, w, track, eventIndex, highlighted) for each rectangle to draw
   * in one track for the view [ta, tb] (µs) mapped onto `width` pixels.
   * Events narrower than a pixel are merged: one rectangle per pixel column,
   * and neighbouring columns into one run (a dense stretch of tiny events
   * costs one rectangle, not one per pixel). A merged rectangle has
   * eventIndex -1 unless it holds a single event. Columns holding a
   * highlighted event also get their own highlighted runs, emitted after the
   * plain run they sit on (drawn on top of it).
   * Returns how many rectangles were emitted.
   */
  function visitTrack(t, ta, tb, width, emit) {
    if (t.size === 0 || tb <= ta) return 0;
    const scale = width / (tb - ta);
    // First event that ends at or after ta: ends are sorted within a track.
    let i = lowerBound(t.end, ta);
    let drawn = 0;
    // Pending runs of merged columns: plain [px, pxe, pi] and highlighted [hx, hxe, hi].
    let px = 0,
      pxe = -1,
      pi = -1,
      popen = false;
    let hx = 0,
      hxe = -1,
      hi = -1,
      hopen = false;
    function flush() {
      if (popen) {
        emit(px, pxe - px, t, pi, false);
        drawn++;
        popen = false;
      }
      if (hopen) {
        emit(hx, hxe - hx, t, hi, true);
        drawn++;
        hopen = false;
      }
    }
    while (i < t.size && t.start[i] <= tb) {
      const x0 = (t.start[i] - ta) * scale;
      const x1 = (t.end[i] - ta) * scale;
      if (x1 - x0 >= 1) {
        flush();
        emit(x0, x1 - x0, t, t.index[i], t.hl[i + 1] - t.hl[i] > 0);
        drawn++;
        i++;
        continue;
      }
      // A run of sub-pixel events: all that start in this pixel column.
      const col = Math.floor(x0);
      let j = lowerBound(t.start, ta + (col + 1) / scale, i + 1);
      // The last of them may be wide: leave it to be drawn on its own.
      if (j - 1 > i && (t.end[j - 1] - t.start[j - 1]) * scale >= 1) j--;
      const xe = Math.max(col + 1, (t.end[j - 1] - ta) * scale);
      const single = j - i === 1 ? t.index[i] : -1;
      if (popen && col <= pxe) {
        pxe = Math.max(pxe, xe);
        pi = -1;
      } else {
        if (popen) {
          emit(px, pxe - px, t, pi, false);
          drawn++;
        }
        px = col;
        pxe = xe;
        pi = single;
        popen = true;
      }
      if (t.hl[j] - t.hl[i] > 0) {
        if (hopen && col <= hxe) {
          hxe = Math.max(hxe, col + 1);
          hi = -1;
        } else {
          if (hopen) {
            emit(hx, hxe - hx, t, hi, true);
            drawn++;
          }
          hx = col;
          hxe = col + 1;
          hi = single;
          hopen = true;
        }
      }
      i = j;
    }
    flush();
    return drawn;
  }

  /** The event under time `tm` in a track, within `slack` µs, or -1. */
  function hitTest(t, tm, slack) {
    if (t.size === 0) return -1;
    let i = lowerBound(t.end, tm - slack);
    let best = -1;
    let bestDist = Infinity;
    for (; i < t.size && t.start[i] <= tm + slack; i++) {
      const d = tm < t.start[i] ? t.start[i] - tm : tm > t.end[i] ? tm - t.end[i] : 0;
      if (d < bestDist) {
        bestDist = d;
        best = t.index[i];
      }
      if (d === 0) break;
    }
    return best;
  }

  /** Initial view: the focus window with a margin, else the whole trace. */
  function initialView(model) {
    const f = model.data.focus;
    if (f && f.end > f.start) {
      const pad = (f.end - f.start) * 0.5; // the line's range fills the middle half
      return { ta: Math.max(0, f.start - pad), tb: f.end + pad };
    }
    return { ta: 0, tb: model.t1 };
  }

  /** Zoom by `factor` (< 1 zooms in) around time `at`; keeps a sane range. */
  function zoom(view, factor, at, model) {
    const span = Math.min(Math.max((view.tb - view.ta) * factor, 0.01), model.t1 * 4 + 1);
    const rel = (at - view.ta) / (view.tb - view.ta);
    const ta = at - rel * span;
    return clamp({ ta: ta, tb: ta + span }, model);
  }

  function pan(view, dt, model) {
    return clamp({ ta: view.ta + dt, tb: view.tb + dt }, model);
  }

  function clamp(view, model) {
    const span = view.tb - view.ta;
    const lo = -span * 0.5;
    const hi = model.t1 + span * 0.5;
    let ta = Math.min(Math.max(view.ta, lo), hi - span);
    return { ta: ta, tb: ta + span };
  }

  /** Tick marks for the time axis: a 1/2/5 step giving ~`target` px apart. */
  function ticks(ta, tb, width, target) {
    const span = tb - ta;
    if (!(span > 0) || width <= 0) return [];
    const raw = (span * (target || 100)) / width;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10]
      .map(function (m) {
        return m * p;
      })
      .find(function (s) {
        return s >= raw;
      });
    const out = [];
    for (let t = Math.ceil(ta / step) * step; t <= tb; t += step) out.push(t);
    return out;
  }

  // A duration as the server writes every time (server/trainium_lens/model/figures.py):
  // three significant figures, ns below 1 µs, ms from 1000 µs, s from 1000 ms. The
  // timeline draws tens of thousands of events in the browser, so it formats here;
  // tests/data/figure_samples.json (asserted by both suites) keeps it the server's.
  function round3(v) {
    return v === 0 ? 0 : Number(v.toPrecision(3));
  }

  function number3(v) {
    const r = round3(v);
    if (r === 0) return "0";
    if (r >= 1000) return v.toFixed(0);
    if (r >= 100) return r.toFixed(0);
    const exponent = parseInt(r.toExponential(2).split("e")[1], 10);
    const text = r.toFixed(2 - exponent);
    return text.indexOf(".") >= 0 ? text.replace(/0+$/, "").replace(/\.$/, "") : text;
  }

  /** "4 ns", "2.5 µs", "1.16 ms", "2.4 s", "0 µs". */
  function formatUs(us) {
    if (us === null || us === undefined || !isFinite(us)) return "–";
    if (Math.abs(us) < 1e-6) return "0 µs"; // a residue under a picosecond (figures.py ZERO_US)
    if (us < 0) return "-" + formatUs(-us);
    if (round3(us / 1e6) >= 1) return number3(us / 1e6) + " s";
    if (round3(us / 1e3) >= 1) return number3(us / 1e3) + " ms";
    if (round3(us) >= 1) return number3(us) + " µs";
    return number3(us * 1000) + " ns";
  }

  /** What the panel needs to describe one event (tooltip, reveal). */
  function describe(model, i) {
    const ev = model.data.events;
    const src = ev.src[i];
    const source = src >= 0 ? model.data.sources[src] : null;
    return {
      name: model.data.names[ev.name[i]],
      lane: model.lanes[ev.lane[i]].name,
      start: ev.start[i],
      dur: ev.dur[i],
      src: src,
      file: source ? source[0] : null,
      line: source ? source[1] : null,
      // 1: backward, 2: recompute; the line is then the forward line that caused it
      phase: ev.phase ? (ev.phase[i] === 1 ? "backward" : ev.phase[i] === 2 ? "recompute" : null) : null,
    };
  }

  /** A stable hue per name so one op keeps its colour across the timeline. */
  function hue(name) {
    let h = 2166136261;
    for (let k = 0; k < name.length; k++) {
      h ^= name.charCodeAt(k);
      h = Math.imul(h, 16777619);
    }
    return (h >>> 0) % 360;
  }

  return {
    lowerBound: lowerBound,
    buildModel: buildModel,
    setHighlight: setHighlight,
    isHighlighted: isHighlighted,
    visitTrack: visitTrack,
    hitTest: hitTest,
    initialView: initialView,
    zoom: zoom,
    pan: pan,
    ticks: ticks,
    formatUs: formatUs,
    describe: describe,
    hue: hue,
  };
});
