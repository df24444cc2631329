// Timeline benchmark: time to first draw and frame time while panning, with
// 100,000 events, in real headless Chromium (playwright-core + Debian's chromium).
//
//   node bench/timeline_bench.mjs [--events 100000] [--runs 3] [--screenshot FILE]
//
// The page is the webview's own HTML and scripts (extension/media/timeline/),
// served from 127.0.0.1 with the same CSP the panel uses; the data arrives
// through window.postMessage like the extension's message. Side by side, the
// baseline draws the same views the straightforward way: every event culled
// and filled one by one (no binary search, no merging of sub-pixel events).
import { createServer } from "node:http";
import { readFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { randomBytes } from "node:crypto";
import { loadavg, cpus } from "node:os";
import { chromium } from "playwright-core";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const media = join(root, "extension", "media", "timeline");
const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : dflt;
};
const EVENTS = Number(opt("--events", 100000));
const RUNS = Number(opt("--runs", 3));
const SHOT = opt("--screenshot", null);

function serve() {
  const nonce = randomBytes(12).toString("base64");
  const server = createServer((req, res) => {
    const base = `http://127.0.0.1:${server.address().port}`;
    const name = req.url === "/" ? "index.html" : req.url.slice(1);
    if (!/^[a-z]+\.(html|js|css)$/.test(name)) {
      res.writeHead(404).end();
      return;
    }
    let body = readFileSync(join(media, name), "utf8");
    if (name === "index.html") {
      body = body
        .replaceAll("{{cspSource}}", base)
        .replaceAll("{{nonce}}", nonce)
        .replaceAll("{{base}}", base);
    }
    const type = name.endsWith(".js") ? "text/javascript" : name.endsWith(".css") ? "text/css" : "text/html";
    res.writeHead(200, { "content-type": type + "; charset=utf-8" }).end(body);
  });
  return new Promise((ok) => server.listen(0, "127.0.0.1", () => ok(server)));
}

// A run-shaped synthetic trace: per user-line range, two ATen ops (one with two
// nested children) and one device event per top-level op — 7 events per range.
function synth(total) {
  const names = [
    "aten::mul",
    "aten::add",
    "aten::mean",
    "aten::rsqrt",
    "aten::sum",
    "aten::fill_",
    "aten::div_",
    "aten::to",
    "aten::_to_copy",
    "aten::copy_",
    "aten::empty_strided",
    "aten::matmul",
    "aten::mm",
    "aten::softmax",
    "aten::_softmax",
    "aten::linear",
    "aten::addmm",
    "aten::t",
    "aten::view",
    "aten::reshape",
    "nc_exec_running",
    "nrt_tensor_write",
    "examples/model.py(12): block",
  ];
  const sources = [];
  for (let l = 10; l < 30; l++) sources.push(["examples/model.py", l]);
  const ev = { lane: [], depth: [], start: [], dur: [], name: [], src: [] };
  const push = (lane, depth, start, dur, name, src) => {
    ev.lane.push(lane);
    ev.depth.push(depth);
    ev.start.push(start);
    ev.dur.push(dur);
    ev.name.push(name);
    ev.src.push(src);
  };
  let t = 0,
    k = 0;
  while (ev.start.length + 7 <= total) {
    const src = k % sources.length;
    const len = 20 + ((k * 7919) % 60);
    push(0, 0, t, len, 22, src);
    push(1, 0, t + 1, len * 0.45, k % 20, src);
    push(1, 1, t + 2, len * 0.3, (k + 3) % 20, src);
    push(1, 2, t + 3, len * 0.1, (k + 5) % 20, src);
    push(1, 0, t + len * 0.5, len * 0.45, (k + 1) % 20, src);
    push(2, 0, t + len * 0.4, len * 0.3, 20, src);
    push(2, 0, t + len * 0.9, len * 0.2, 21, src);
    t += len + 5;
    k++;
  }
  const focusSrc = 5;
  let fs = -1,
    fe = -1;
  for (let i = 0; i < ev.start.length && fs < 0; i++)
    if (ev.src[i] === focusSrc && ev.lane[i] === 0) {
      fs = ev.start[i];
      fe = fs + ev.dur[i];
    }
  return {
    title: "synthetic · 100k events",
    file: "examples/model.py",
    line: 15,
    t0: 0,
    lanes: [
      { name: "User lines", kind: "lines", rows: 1 },
      { name: "ATen ops", kind: "ops", rows: 3 },
      { name: "Device · NC 0", kind: "device", rows: 1 },
    ],
    names,
    sources,
    events: ev,
    focus: { start: fs, end: fe },
    focusSrc,
  };
}

// Runs in the page: the straightforward renderer, for the side-by-side baseline.
function naiveFrames(views) {
  const d = window.__data;
  const c = document.createElement("canvas");
  const W = window.lensTimeline.state.width,
    H = window.lensTimeline.state.height;
  c.width = W;
  c.height = H;
  const ctx = c.getContext("2d", { alpha: false });
  const ev = d.events,
    n = ev.start.length,
    plotW = W - 160;
  const out = [];
  for (const v of views) {
    const t0 = performance.now();
    ctx.fillStyle = "#1e1e1e";
    ctx.fillRect(0, 0, W, H);
    const scale = plotW / (v.tb - v.ta);
    for (let i = 0; i < n; i++) {
      const s = ev.start[i],
        e = s + ev.dur[i];
      if (e < v.ta || s > v.tb) continue;
      ctx.fillStyle = ev.src[i] === d.focusSrc ? "#ff9f1a" : "hsl(" + ((ev.name[i] * 37) % 360) + ",55%,52%)";
      ctx.fillRect(
        160 + (s - v.ta) * scale,
        28 + (ev.lane[i] * 4 + ev.depth[i]) * 18,
        Math.max(1, (e - s) * scale),
        16,
      );
    }
    ctx.getImageData(0, 0, 1, 1); // wait for the raster like a presented frame would
    out.push(performance.now() - t0);
  }
  return out;
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};
const fmt = (x) => x.toFixed(2);

async function once(browser, base, data, shot) {
  const page = await browser.newPage({ viewport: { width: 1600, height: 700 } });
  await page.goto(base + "/");
  await page.evaluate((d) => {
    window.__data = d;
  }, data);
  // First draw: from the message to the end of the first frame's drawing.
  const firstDraw = await page.evaluate(async () => {
    const t0 = performance.now();
    window.postMessage({ type: "data", data: window.__data }, "*");
    while (!(window.lensTimeline && window.lensTimeline.state.firstDrawAt))
      await new Promise((r) => setTimeout(r, 1));
    return window.lensTimeline.state.firstDrawAt - t0;
  });
  const box = await page.locator("#timeline").boundingBox();
  const y = box.y + 60;
  const result = { firstDraw };
  for (const [label, zoom] of [
    ["whole trace", "fit-all"],
    ["zoomed to the line", "fit-line"],
  ]) {
    await page.click("#" + zoom);
    await page.waitForTimeout(50);
    await page.evaluate(() => {
      window.lensTimeline.state.frames.length = 0;
      window.__views = [];
    });
    // Record each frame's view so the baseline can draw exactly the same ones.
    await page.evaluate(() => {
      window.__rec = true;
      const loop = () => {
        if (!window.__rec) return;
        window.__views.push({ ...window.lensTimeline.state.view });
        requestAnimationFrame(loop);
      };
      requestAnimationFrame(loop);
    });
    await page.mouse.move(box.x + box.width * 0.8, y);
    await page.mouse.down();
    for (let k = 0; k < 120; k++) {
      await page.mouse.move(box.x + box.width * 0.8 - k * 8, y);
      if (k % 4 === 3) await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
    }
    await page.mouse.up();
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
    const { frames, views, rects } = await page.evaluate(() => {
      window.__rec = false;
      return {
        frames: window.lensTimeline.state.frames.slice(),
        views: window.__views.slice(),
        rects: window.lensTimeline.state.lastRects,
      };
    });
    const replay = views.filter((_, i) => i % 2 === 0).slice(0, 40);
    // The same views drawn synchronously and rastered (getImageData flushes the
    // canvas), like the baseline below: draw + raster, apples to apples.
    const flushed = await page.evaluate((vs) => {
      const canvas = document.getElementById("timeline");
      const ctx = canvas.getContext("2d");
      return vs.map((v) => {
        const t0 = performance.now();
        window.lensTimeline.setView(v);
        window.lensTimeline.drawNow();
        ctx.getImageData(0, 0, 1, 1);
        return performance.now() - t0;
      });
    }, replay);
    const naive = await page.evaluate(naiveFrames, replay);
    result[label] = { frames, flushed, naive, rects };
  }
  if (shot) await page.screenshot({ path: shot });
  await page.close();
  return result;
}

const server = await serve();
const base = `http://127.0.0.1:${server.address().port}`;
const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
  ],
});
try {
  const data = synth(EVENTS);
  console.log(
    `timeline bench: ${data.events.start.length} events, 1600x700 px, ${RUNS} runs, Chromium ${browser.version()}, ` +
      `${cpus().length} CPUs, load average ${loadavg()
        .map((x) => x.toFixed(1))
        .join(" ")}`,
  );
  const runs = [];
  for (let r = 0; r < RUNS; r++) runs.push(await once(browser, base, data, r === RUNS - 1 ? SHOT : null));
  const first = runs.map((r) => r.firstDraw);
  console.log(
    `first draw (message → first frame drawn): median ${fmt(pct(first, 0.5))} ms, max ${fmt(Math.max(...first))} ms  (goal ≤ 1000 ms)`,
  );
  for (const label of ["whole trace", "zoomed to the line"]) {
    const ours = runs.flatMap((r) => r[label].frames);
    const flushed = runs.flatMap((r) => r[label].flushed);
    const naive = runs.flatMap((r) => r[label].naive);
    console.log(
      `pan, ${label}: ${ours.length} frames while dragging, draw p50 ${fmt(pct(ours, 0.5))} ms, ` +
        `p95 ${fmt(pct(ours, 0.95))} ms, max ${fmt(Math.max(...ours))} ms (goal ≤ 16 ms); ${runs[0][label].rects} rects/frame`,
    );
    console.log(
      `  same views, draw + raster: ours p50 ${fmt(pct(flushed, 0.5))} ms, p95 ${fmt(pct(flushed, 0.95))} ms | ` +
        `baseline (every event drawn) p50 ${fmt(pct(naive, 0.5))} ms, p95 ${fmt(pct(naive, 0.95))} ms | ` +
        `baseline/ours p50 ${fmt(pct(naive, 0.5) / pct(flushed, 0.5))}x`,
    );
  }
} finally {
  await browser.close();
  server.close();
}
