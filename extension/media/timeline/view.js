/* The timeline's canvas: draws the visible part of each track, pans on drag,
 * zooms on wheel, and reports a click on an event (the panel reveals its line).
 *
 * One canvas, redrawn on the next animation frame after any change. A frame
 * costs one binary search per track plus one rectangle per visible event or
 * per pixel column of merged sub-pixel events (model.visitTrack), so panning
 * stays smooth however many events the run has.
 */
(function (root) {
  "use strict";
  const M = root.TimelineModel;

  const AXIS_H = 24;
  const GUTTER_W = 160;
  const ROW_H = 18;
  const LANE_GAP = 8;
  const CLICK_SLOP = 4; // px a press may move and still count as a click

  function cssVar(name, fallback) {
    const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return v || fallback;
  }

  function create(canvas, model, options) {
    options = options || {};
    const ctx = canvas.getContext("2d", { alpha: false });
    const colors = {
      bg: cssVar("--vscode-editor-background", "#1e1e1e"),
      fg: cssVar("--vscode-editor-foreground", "#d4d4d4"),
      dim: cssVar("--vscode-descriptionForeground", "#9d9d9d"),
      grid: cssVar(
        "--vscode-editorIndentGuide-background1",
        cssVar("--vscode-editorIndentGuide-background", "#404040"),
      ),
      hl: cssVar("--vscode-editorWarning-foreground", "#ff9f1a"),
      font: cssVar("--vscode-font-family", "sans-serif"),
    };
    const state = {
      model: model,
      view: M.initialView(model),
      scrollY: 0,
      width: 0,
      height: 0,
      dpr: 1,
      pending: false,
      hover: -1,
      frames: [],
      firstDrawMs: null,
      created: performance.now(),
    };
    const nameColor = new Map();

    const phaseColor = [
      null,
      ["hsl(275,45%,45%)", "hsla(275,30%,45%,0.45)"],
      ["hsl(35,70%,45%)", "hsla(35,45%,45%,0.45)"],
    ];

    function colorOf(i) {
      const phase = state.model.data.events.phase;
      const p = phase ? phase[i] : 0;
      if (p) return state.model.focusSrc >= 0 ? phaseColor[p][1] : phaseColor[p][0]; // backward: own colour
      const nameIdx = state.model.data.events.name[i];
      let c = nameColor.get(nameIdx);
      if (!c) {
        const h = M.hue(state.model.data.names[nameIdx] || "");
        c = ["hsl(" + h + ",55%,52%)", "hsla(" + h + ",35%,50%,0.45)"];
        nameColor.set(nameIdx, c);
      }
      return state.model.focusSrc >= 0 ? c[1] : c[0];
    }

    function layoutLanes() {
      let y = AXIS_H + 4;
      return state.model.lanes.map(function (lane) {
        const top = y;
        y += lane.rows * ROW_H + LANE_GAP;
        return { lane: lane, top: top, bottom: y - LANE_GAP };
      });
    }
    let lanesLayout = layoutLanes();

    function contentHeight() {
      const last = lanesLayout[lanesLayout.length - 1];
      return last ? last.bottom + LANE_GAP : AXIS_H;
    }

    function resize() {
      const rect = canvas.getBoundingClientRect();
      state.dpr = root.devicePixelRatio || 1;
      state.width = Math.max(1, Math.floor(rect.width));
      state.height = Math.max(1, Math.floor(rect.height));
      canvas.width = Math.floor(state.width * state.dpr);
      canvas.height = Math.floor(state.height * state.dpr);
      schedule();
    }

    function schedule() {
      if (state.pending) return;
      state.pending = true;
      root.requestAnimationFrame(draw);
    }

    function draw() {
      state.pending = false;
      const t0 = performance.now();
      const W = state.width,
        H = state.height;
      const plotW = Math.max(1, W - GUTTER_W);
      const v = state.view;
      ctx.setTransform(state.dpr, 0, 0, state.dpr, 0, 0);
      ctx.fillStyle = colors.bg;
      ctx.fillRect(0, 0, W, H);
      ctx.font = "11px " + colors.font;
      ctx.textBaseline = "middle";

      // Grid and axis.
      const marks = M.ticks(v.ta, v.tb, plotW, 110);
      const scale = plotW / (v.tb - v.ta);
      ctx.fillStyle = colors.grid;
      marks.forEach(function (t) {
        ctx.fillRect(GUTTER_W + Math.round((t - v.ta) * scale), AXIS_H, 1, H - AXIS_H);
      });

      // Events, clipped to the plot area.
      ctx.save();
      ctx.beginPath();
      ctx.rect(GUTTER_W, AXIS_H, plotW, H - AXIS_H);
      ctx.clip();
      // Rectangles are batched per colour, so a frame changes the fill style a few
      // dozen times however many rectangles it has.
      let rects = 0;
      const buckets = new Map();
      const labels = [];
      const highlighted = [];
      lanesLayout.forEach(function (L) {
        const top = L.top - state.scrollY;
        if (top > H || L.bottom - state.scrollY < AXIS_H) return;
        L.lane.tracks.forEach(function (t) {
          const y = top + t.depth * ROW_H;
          rects += M.visitTrack(t, v.ta, v.tb, plotW, function (x, w, _t, i, hl) {
            if (hl) {
              highlighted.push(GUTTER_W + x, y + 1, Math.max(w, 2), ROW_H - 2);
            } else {
              const color = i >= 0 ? colorOf(i) : colors.dim;
              let b = buckets.get(color);
              if (!b) {
                b = [];
                buckets.set(color, b);
              }
              b.push(GUTTER_W + x, y + 1, w, ROW_H - 2);
            }
            if (i >= 0 && w > 40) labels.push(i, GUTTER_W + x, y, w, hl);
          });
        });
      });
      buckets.forEach(function (b, color) {
        fillAll(color, b);
      });
      // The selected line's events on top, so merging never hides them.
      fillAll(colors.hl, highlighted);
      for (let k = 0; k < labels.length; k += 5) {
        label(labels[k], labels[k + 1], labels[k + 2], labels[k + 3], labels[k + 4] ? "#000" : colors.bg);
      }
      if (state.hover >= 0) outline(state.hover);
      ctx.restore();

      // Gutter with lane names, and the axis labels, drawn over the plot.
      ctx.fillStyle = colors.bg;
      ctx.fillRect(0, AXIS_H, GUTTER_W, H);
      ctx.fillRect(0, 0, W, AXIS_H);
      ctx.fillStyle = colors.fg;
      lanesLayout.forEach(function (L) {
        const y = L.top - state.scrollY + ROW_H / 2;
        if (y > AXIS_H && y < H) ctx.fillText(L.lane.name, 8, y, GUTTER_W - 14);
      });
      ctx.fillStyle = colors.dim;
      marks.forEach(function (t) {
        const x = GUTTER_W + Math.round((t - v.ta) * scale);
        ctx.fillText(M.formatUs(t), x + 3, AXIS_H / 2);
        ctx.fillRect(x, AXIS_H - 6, 1, 6);
      });

      const ms = performance.now() - t0;
      state.lastRects = rects;
      if (state.firstDrawMs === null) {
        state.firstDrawAt = performance.now();
        state.firstDrawMs = state.firstDrawAt - state.created;
      }
      state.frames.push(ms);
      if (state.frames.length > 600) state.frames.shift();
      if (options.onDraw) options.onDraw(ms, rects);
    }

    function fillAll(color, b) {
      if (!b.length) return;
      ctx.fillStyle = color; // one style change per colour, not per rectangle
      // Whole pixels: axis-aligned, unantialiased fills are the rasterizer's fast path.
      for (let k = 0; k < b.length; k += 4) {
        const x0 = Math.round(b[k]);
        ctx.fillRect(x0, b[k + 1], Math.max(1, Math.round(b[k] + b[k + 2]) - x0), b[k + 3]);
      }
    }

    function label(i, x, y, w, color) {
      const name = state.model.data.names[state.model.data.events.name[i]] || "";
      const max = Math.floor((w - 6) / 6.2);
      if (max < 3) return;
      ctx.fillStyle = color;
      ctx.fillText(
        name.length > max ? name.slice(0, max - 1) + "…" : name,
        Math.max(x, GUTTER_W) + 3,
        y + ROW_H / 2,
      );
    }

    function outline(i) {
      const ev = state.model.data.events;
      const L = lanesLayout[ev.lane[i]];
      const scale = (state.width - GUTTER_W) / (state.view.tb - state.view.ta);
      const x = GUTTER_W + (ev.start[i] - state.view.ta) * scale;
      const y = L.top - state.scrollY + ev.depth[i] * ROW_H;
      ctx.strokeStyle = colors.fg;
      ctx.lineWidth = 1;
      ctx.strokeRect(x + 0.5, y + 1.5, Math.max(ev.dur[i] * scale, 2) - 1, ROW_H - 3);
    }

    /** The event under canvas point (px, py), or -1. */
    function eventAt(px, py) {
      if (px < GUTTER_W || py < AXIS_H) return -1;
      const y = py + state.scrollY;
      const L = lanesLayout.find(function (l) {
        return y >= l.top && y < l.bottom;
      });
      if (!L) return -1;
      const t = L.lane.tracks[Math.floor((y - L.top) / ROW_H)];
      if (!t) return -1;
      const plotW = state.width - GUTTER_W;
      const perPx = (state.view.tb - state.view.ta) / plotW;
      return M.hitTest(t, state.view.ta + (px - GUTTER_W) * perPx, 3 * perPx);
    }

    function timeAt(px) {
      return state.view.ta + ((px - GUTTER_W) * (state.view.tb - state.view.ta)) / (state.width - GUTTER_W);
    }

    // -- interaction ---------------------------------------------------------
    let drag = null;
    function local(e) {
      const r = canvas.getBoundingClientRect();
      return [e.clientX - r.left, e.clientY - r.top];
    }
    function onDown(e) {
      if (e.button !== 0) return;
      const p = local(e);
      drag = { x: p[0], y: p[1], view: state.view, scrollY: state.scrollY, moved: false };
      canvas.setPointerCapture && e.pointerId !== undefined && canvas.setPointerCapture(e.pointerId);
    }
    function onMove(e) {
      const p = local(e);
      if (drag) {
        const dx = p[0] - drag.x,
          dy = p[1] - drag.y;
        if (Math.abs(dx) + Math.abs(dy) > CLICK_SLOP) drag.moved = true;
        if (!drag.moved) return;
        const perPx = (drag.view.tb - drag.view.ta) / (state.width - GUTTER_W);
        state.view = M.pan(drag.view, -dx * perPx, state.model);
        const maxScroll = Math.max(0, contentHeight() - state.height);
        state.scrollY = Math.min(maxScroll, Math.max(0, drag.scrollY - dy));
        schedule();
        return;
      }
      const i = eventAt(p[0], p[1]);
      if (i !== state.hover) {
        state.hover = i;
        canvas.style.cursor = i >= 0 ? "pointer" : "default";
        if (options.onHover) options.onHover(i >= 0 ? M.describe(state.model, i) : null, e);
        schedule();
      } else if (i >= 0 && options.onHover) options.onHover(M.describe(state.model, i), e);
    }
    function onUp(e) {
      if (!drag) return;
      const wasClick = !drag.moved;
      drag = null;
      if (!wasClick) return;
      const p = local(e);
      const i = eventAt(p[0], p[1]);
      if (i >= 0 && options.onClick) options.onClick(M.describe(state.model, i), i);
    }
    function onWheel(e) {
      e.preventDefault();
      const p = local(e);
      const horizontal = e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY);
      if (horizontal) {
        const d = e.deltaX || e.deltaY;
        const perPx = (state.view.tb - state.view.ta) / (state.width - GUTTER_W);
        state.view = M.pan(state.view, d * perPx, state.model);
      } else {
        const factor = Math.exp(e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0015));
        state.view = M.zoom(state.view, factor, timeAt(Math.max(p[0], GUTTER_W)), state.model);
      }
      schedule();
    }
    function onLeave() {
      if (state.hover >= 0) {
        state.hover = -1;
        schedule();
      }
      if (options.onHover) options.onHover(null);
    }

    canvas.addEventListener("pointerdown", onDown);
    canvas.addEventListener("pointermove", onMove);
    canvas.addEventListener("pointerup", onUp);
    canvas.addEventListener("pointerleave", onLeave);
    canvas.addEventListener("wheel", onWheel, { passive: false });
    const ro = new ResizeObserver(resize);
    ro.observe(canvas);
    resize();

    return {
      state: state,
      setView: function (v) {
        state.view = M.pan(v, 0, state.model);
        schedule();
      },
      pan: function (dt) {
        state.view = M.pan(state.view, dt, state.model);
        schedule();
      },
      zoom: function (factor) {
        state.view = M.zoom(state.view, factor, (state.view.ta + state.view.tb) / 2, state.model);
        schedule();
      },
      fitFocus: function () {
        state.view = M.initialView(state.model);
        schedule();
      },
      fitAll: function () {
        state.view = { ta: 0, tb: state.model.t1 };
        schedule();
      },
      setModel: function (m) {
        state.model = m;
        nameColor.clear();
        lanesLayout = layoutLanes();
        state.view = M.initialView(m);
        state.scrollY = 0;
        state.hover = -1;
        schedule();
      },
      eventAt: eventAt,
      /** Canvas-relative centre of event i's visible part, and that part's width
       * (px), when it is on screen (for tests). */
      eventCenter: function (i) {
        const ev = state.model.data.events;
        const L = lanesLayout[ev.lane[i]];
        const scale = (state.width - GUTTER_W) / (state.view.tb - state.view.ta);
        const x0 = Math.max(GUTTER_W, GUTTER_W + (ev.start[i] - state.view.ta) * scale);
        const x1 = Math.min(state.width, GUTTER_W + (ev.start[i] + ev.dur[i] - state.view.ta) * scale);
        const y = L.top - state.scrollY + ev.depth[i] * ROW_H + ROW_H / 2;
        return x1 >= x0 ? { x: (x0 + x1) / 2, y: y, w: x1 - x0 } : null;
      },
      redraw: schedule,
      /** Draw now, synchronously (the benchmark times draw + raster this way). */
      drawNow: function () {
        draw();
      },
      destroy: function () {
        ro.disconnect();
        canvas.removeEventListener("pointerdown", onDown);
        canvas.removeEventListener("pointermove", onMove);
        canvas.removeEventListener("pointerup", onUp);
        canvas.removeEventListener("pointerleave", onLeave);
        canvas.removeEventListener("wheel", onWheel);
      },
    };
  }

  root.TimelineView = { create: create, GUTTER_W: GUTTER_W, AXIS_H: AXIS_H, ROW_H: ROW_H };
})(typeof self !== "undefined" ? self : this);
