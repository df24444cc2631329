// Drives the built-in timeline in a real VS Code (code-server, started by
// test_timeline.py) in headless Chromium: hover a hot line, click "Open timeline"
// in the hover, read what the timeline panel shows, click an event of another
// line, and report where the editor's cursor went. JSON out, for pytest to check.
//
//   node tests/e2e/timeline_driver.mjs CONFIG.json OUT.json
//
// CONFIG: {url, file, hotLine, lineTexts, shots}
import { join } from "node:path";
import { drawn, editorOf, openWorkbench, settled, startDriver, waitForHint } from "./workbench.mjs";

const { cfg, out, log, page, run } = await startDriver("timeline driver");
const editorSel = editorOf(cfg.file);
// The webview's own errors (CSP refusals, script errors) land in the log.
page.on("console", (m) => {
  if (m.type() === "error" && /timeline|Content Security|Refused/i.test(m.text()))
    log(`console: ${m.text().slice(0, 300)}`);
});
page.on("pageerror", (e) => log(`page error: ${String(e).slice(0, 300)}`));

await run(async () => {
  await openWorkbench(page, cfg.url, cfg.file, log);
  // The stored run's hints show once the server is up and has read the store.
  await waitForHint(page, editorSel);
  log("hints from the stored run are shown");

  const hotRow = page
    .locator(`${editorSel} .view-line`)
    .filter({ hasText: cfg.lineTexts[String(cfg.hotLine)] });
  out.hover = await hoverWithLink(hotRow);
  const t0 = Date.now();
  await page
    .locator(".monaco-hover", { hasText: `line ${cfg.hotLine} of` })
    .locator("a", { hasText: "Open timeline" })
    .first()
    .click();
  log("clicked Open timeline in the hover");
  const frame = await timelineFrame();
  out.openMs = Date.now() - t0;
  await page.mouse.move(5, 500); // off the hover, which then closes
  await page.keyboard.press("Escape");
  await drawn(frame); // the first frame is drawn on the next animation frame
  out.status = await frame.locator("#status").textContent();
  out.highlighted = Number(await frame.locator("#status").getAttribute("data-highlighted"));
  out.panelTitle = await page
    .locator(".tab.active .label-name")
    .first()
    .textContent()
    .catch(() => null);
  out.view = await frame.evaluate(() => {
    const s = window.lensTimeline.state;
    const d = s.model.data;
    const focus = d.focusSrc >= 0 ? d.sources[d.focusSrc] : null;
    return {
      ta: s.view.ta,
      tb: s.view.tb,
      t1: s.model.t1,
      focus,
      focusWindow: d.focus,
      lanes: d.lanes.map((l) => l.name),
      events: d.events.start.length,
    };
  });
  await page.screenshot({ path: join(cfg.shots, "timeline.png") });
  await page
    .locator("iframe.webview.ready")
    .last()
    .screenshot({ path: join(cfg.shots, "timeline-panel.png") })
    .catch((e) => log(`panel shot: ${e}`));

  // Click an ATen op of another line: the editor moves to that line.
  await frame.evaluate(recordPresses);
  out.misses = [];
  for (let attempt = 1; ; attempt++) {
    out.clicked = await pickEvent(frame);
    const { x, y, source } = out.clicked;
    await frame.evaluate(() => (window.lensPresses = []));
    // (a point the canvas no longer covers is refused: a miss too)
    const refused = await frame
      .locator("#timeline")
      .click({ position: { x, y }, timeout: 10_000 })
      .then(
        () => null,
        (e) => String(e).split("\n")[0],
      );
    if (!refused && (await cursorOn(source[1], 10_000))) break;
    // Missed: what the webview saw of the press, and what the workbench has active.
    const press = await frame.evaluate(() => window.lensPresses[0]);
    const miss = { attempt, pick: out.clicked, refused, ...press };
    out.misses.push({ ...miss, ...(await workbenchFocus()) });
    log(`the cursor did not reach line ${source[1]} in 10 s: ${JSON.stringify(out.misses.at(-1))}`);
    // A press that reached the view the event was picked from is the product's to
    // follow: no second try (the assertions fail). Tried again: a press that never
    // reached the webview, or that came after its view changed (the pick was stale).
    if ((miss.down && sameView(miss.down.view, out.clicked.view)) || attempt === 3) break;
  }
  out.clicked.hit = (await frame.evaluate(() => window.lensPresses[0]))?.up?.hit ?? null;
  const text = await page
    .locator("#status\\.editor\\.selection")
    .textContent({ timeout: 2000 })
    .catch(() => null); // absent when no text editor is active
  out.cursorLine = Number(/Ln (\d+)/.exec(text ?? "")?.[1]);
  out.activeEditor = (await workbenchFocus()).activeTab; // the active group's editor
  await page.screenshot({ path: join(cfg.shots, "timeline-after-click.png") });
  log(`clicked ${out.clicked.name} of line ${out.clicked.source[1]}; cursor on line ${out.cursorLine}`);
}, "timeline-failure.png");

function sameView(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * In the webview: `lensView()` (the canvas size, time range and scroll) and, per press
 * on the canvas, `lensPresses` {down, up}: where it went down and up, the view then,
 * and the event under it on the way up, read before the timeline's own handlers.
 */
function recordPresses() {
  const canvas = document.getElementById("timeline");
  window.lensView = () => {
    const s = window.lensTimeline.state;
    return { width: s.width, height: s.height, ta: s.view.ta, tb: s.view.tb, scrollY: s.scrollY };
  };
  window.lensPresses = [];
  const record = (e) => {
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left,
      y = e.clientY - r.top;
    if (e.type === "pointerdown") window.lensPresses.push({ down: { x, y, view: window.lensView() } });
    else if (window.lensPresses.length)
      window.lensPresses.at(-1).up = {
        x,
        y,
        view: window.lensView(),
        hit: window.lensTimeline.eventAt(x, y),
      };
  };
  canvas.addEventListener("pointerdown", record, true);
  canvas.addEventListener("pointerup", record, true);
}

/**
 * An ATen op of another line than the focused one, at least 8 px wide on screen (a
 * sub-pixel event can lose the click to its neighbour), picked once the view has
 * settled (the same size and range on two reads 300 ms apart: the panel can still be
 * laid out after its first frame). The widest in the opened view, else the view is
 * zoomed onto the longest such op, as a user would. Its canvas point, line and view.
 */
async function pickEvent(frame) {
  await settled(page, () => frame.evaluate(() => window.lensView()), { interval: 300, timeout: 20_000 });
  const pick = await frame.evaluate(() => {
    const tl = window.lensTimeline;
    const d = tl.state.model.data,
      ev = d.events;
    const others = [];
    for (let i = 0; i < ev.start.length; i++) {
      if (d.lanes[ev.lane[i]].kind === "ops" && ev.src[i] >= 0 && ev.src[i] !== d.focusSrc) others.push(i);
    }
    const widest = () => {
      let best = null;
      for (const i of others) {
        const c = tl.eventCenter(i);
        if (!c || c.w < 8 || c.y > tl.state.height - 10 || (best && best.w >= c.w)) continue;
        if (tl.eventAt(c.x, c.y) === i) best = { i, ...c };
      }
      return best;
    };
    let hit = widest();
    if (!hit && others.length) {
      const i = others.reduce((a, b) => (ev.dur[b] > ev.dur[a] ? b : a));
      tl.setView({ ta: ev.start[i] - ev.dur[i], tb: ev.start[i] + 2 * ev.dur[i] });
      tl.drawNow();
      hit = widest();
    }
    const src = hit && d.sources[ev.src[hit.i]];
    return hit && { ...hit, name: d.names[ev.name[hit.i]], source: src, view: window.lensView() };
  });
  if (!pick) throw new Error("no event of another line to click on the timeline");
  return pick;
}

/** Whether the status bar shows the cursor on `line` within `timeout` ms. */
function cursorOn(line, timeout) {
  return page
    .waitForFunction(
      (n) =>
        new RegExp(`Ln ${n},`).test(
          document.querySelector("#status\\.editor\\.selection")?.textContent ?? "",
        ),
      line,
      { timeout },
    )
    .then(
      () => true,
      () => false,
    );
}

/** What the workbench has active and focused (a miss's context). */
function workbenchFocus() {
  return page.evaluate(() => ({
    activeTab: document.querySelector(".editor-group-container.active .tab.active .label-name")?.textContent,
    cursor: document.querySelector("#status\\.editor\\.selection")?.textContent ?? null,
    focused: document.activeElement?.className?.slice?.(0, 60) ?? null,
  }));
}

/** Rest the mouse on a line until the editor's hover shows the timeline link. */
async function hoverWithLink(row) {
  await row.click();
  // Monaco re-renders the line on a click; wait for it to be laid out again.
  let box = null;
  for (let i = 0; i < 40 && !box; i++) {
    box = await row.boundingBox().catch(() => null);
    if (!box) await page.waitForTimeout(250);
  }
  if (!box) throw new Error("the hot line has no box on the page (not rendered?)");
  const indent = await row.evaluate((l) => l.textContent.length - l.textContent.trimStart().length);
  const charWidth = await row.evaluate((l) => {
    const token = l.querySelector("span > span");
    return token.getBoundingClientRect().width / Math.max(1, token.textContent.length);
  });
  for (let attempt = 0; attempt < 6; attempt++) {
    await page.mouse.move(box.x + (indent + 1.5 + attempt) * charWidth, box.y + box.height / 2, { steps: 3 });
    // The hover of this line (moving there can first show the one above).
    const ok = await page
      .waitForFunction(
        (n) =>
          [...document.querySelectorAll(".monaco-hover")].some(
            (h) => h.textContent.includes(`line ${n} of`) && h.textContent.includes("Open timeline"),
          ),
        cfg.hotLine,
        { timeout: 4000 },
      )
      .then(
        () => true,
        () => false,
      );
    if (ok) return (await page.locator(".monaco-hover").allTextContents()).join("\n");
    await page.mouse.move(box.x - 50, box.y - 80);
  }
  throw new Error("no hover with an 'Open timeline' link on the hot line");
}

/** The timeline webview's inner frame, once it has drawn the run. */
async function timelineFrame(timeout = 90_000) {
  const until = Date.now() + timeout;
  while (Date.now() < until) {
    for (const frame of page.frames()) {
      const ready = await frame
        .evaluate(() => document.querySelector("canvas#timeline") && document.body.dataset.ready)
        .catch(() => null);
      if (ready === "true") return frame;
      if (ready === "error")
        throw new Error(`timeline error: ${await frame.locator("#status").textContent()}`);
    }
    await page.waitForTimeout(250);
  }
  const frames = [];
  for (const frame of page.frames()) {
    frames.push(
      `${frame.url().slice(0, 160)} :: ${await frame.evaluate(() => document.body?.innerHTML?.slice(0, 300)).catch((e) => String(e))}`,
    );
  }
  throw new Error(`the timeline panel never drew the run; frames:\n${frames.join("\n")}`);
}
