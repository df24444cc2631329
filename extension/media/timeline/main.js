/* The timeline webview's glue: receives the run's events from the extension,
 * draws them (view.js), and asks the extension to reveal a clicked event's line.
 * Loaded under a strict CSP (no inline script, no remote content). */
(function () {
  "use strict";
  const M = self.TimelineModel;
  const vscode = typeof acquireVsCodeApi === "function" ? acquireVsCodeApi() : null;
  const canvas = document.getElementById("timeline");
  const title = document.getElementById("title");
  const status = document.getElementById("status");
  const tip = document.getElementById("tip");
  let view = null;

  function post(msg) {
    if (vscode) vscode.postMessage(msg);
  }

  function showTip(d, e) {
    if (!d || !e) {
      tip.hidden = true;
      return;
    }
    tip.textContent =
      d.name +
      "\n" +
      M.formatUs(d.dur) +
      " at " +
      M.formatUs(d.start) +
      (d.file ? "\n" + (d.phase ? d.phase + " of " : "") + d.file + ":" + d.line : "") +
      "\n" +
      d.lane;
    tip.hidden = false;
    const x = Math.min(e.clientX + 12, window.innerWidth - tip.offsetWidth - 4);
    const y = Math.min(e.clientY + 14, window.innerHeight - tip.offsetHeight - 4);
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }

  function show(data) {
    const model = M.buildModel(data);
    title.textContent = data.title || "";
    const n = model.focusSrc >= 0 ? countFocus(model) : 0;
    status.textContent = data.line
      ? n
        ? n + " events of " + data.file + ":" + data.line + " highlighted"
        : "no events recorded for " + data.file + ":" + data.line
      : model.count + " events";
    status.dataset.highlighted = String(n);
    if (!view) {
      view = TimelineView.create(canvas, model, {
        onClick: function (d) {
          if (d.file) post({ type: "reveal", src: d.src, file: d.file, line: d.line });
        },
        onHover: showTip,
      });
      self.lensTimeline = view; // for the e2e test and the benchmark
    } else {
      view.setModel(model);
    }
    document.body.dataset.ready = "true";
  }

  function countFocus(model) {
    let n = 0;
    model.tracks.forEach(function (t) {
      n += t.hl[t.size];
    });
    return n;
  }

  window.addEventListener("message", function (e) {
    const msg = e.data || {};
    if (msg.type === "data") show(msg.data);
    else if (msg.type === "error") {
      status.textContent = msg.message;
      document.body.dataset.ready = "error";
    }
  });
  document.getElementById("fit-line").addEventListener("click", function () {
    view && view.fitFocus();
  });
  document.getElementById("fit-all").addEventListener("click", function () {
    view && view.fitAll();
  });
  document.getElementById("zoom-in").addEventListener("click", function () {
    view && view.zoom(0.5);
  });
  document.getElementById("zoom-out").addEventListener("click", function () {
    view && view.zoom(2);
  });
  window.addEventListener("keydown", function (e) {
    if (!view) return;
    const span = view.state.view.tb - view.state.view.ta;
    if (e.key === "f") view.fitFocus();
    else if (e.key === "0") view.fitAll();
    else if (e.key === "+" || e.key === "=" || e.key === "w") view.zoom(0.7);
    else if (e.key === "-" || e.key === "s") view.zoom(1 / 0.7);
    else if (e.key === "ArrowLeft" || e.key === "a") view.pan(-span * 0.1);
    else if (e.key === "ArrowRight" || e.key === "d") view.pan(span * 0.1);
  });
  self.showTimelineData = show; // the benchmark page feeds data directly
  post({ type: "ready" });
})();
