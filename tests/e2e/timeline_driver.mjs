// Drives the built-in timeline in a real VS Code (code-server, started by
// test_timeline.py) in headless Chromium: hover a hot line, click "Open timeline"
// in the hover, read what the timeline panel shows, click an event of another
// line, and report where the editor's cursor went. JSON out, for pytest to check.
//
//   node tests/e2e/timeline_driver.mjs CONFIG.json OUT.json
//
// CONFIG: {url, file, hotLine, lineTexts, shots}
import { join } from "node:path";
import { drawn, editorOf, openWorkbench, startDriver, waitForHint } from "./workbench.mjs";

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
  const pick = await frame.evaluate(() => {
    const tl = window.lensTimeline;
    const find = () => {
      const d = tl.state.model.data,
        ev = d.events;
      for (let i = 0; i < ev.start.length; i++) {
        const lane = d.lanes[ev.lane[i]];
        if (lane.kind !== "ops" || ev.src[i] < 0 || ev.src[i] === d.focusSrc) continue;
        const c = tl.eventCenter(i);
        if (c && c.x > 170 && c.x < tl.state.width - 10 && tl.eventAt(c.x, c.y) === i) {
          return { i, x: c.x, y: c.y, name: d.names[ev.name[i]], source: d.sources[ev.src[i]] };
        }
      }
      return null;
    };
    let hit = find();
    if (!hit) {
      tl.fitAll();
      tl.drawNow();
      hit = find();
    }
    return hit;
  });
  if (!pick) throw new Error("no event of another line on screen to click");
  out.clicked = pick;
  await frame.locator("#timeline").click({ position: { x: pick.x, y: pick.y } });
  await page
    .waitForFunction(
      (n) =>
        new RegExp(`Ln ${n},`).test(
          document.querySelector("#status\\.editor\\.selection")?.textContent ?? "",
        ),
      pick.source[1],
      { timeout: 10_000 },
    )
    .catch(() => log("cursor did not reach the clicked line in 10 s"));
  const text = await page.locator("#status\\.editor\\.selection").textContent();
  out.cursorLine = Number(/Ln (\d+)/.exec(text ?? "")?.[1]);
  out.activeEditor = await page
    .locator(".tab.active .label-name")
    .first()
    .textContent()
    .catch(() => null);
  await page.screenshot({ path: join(cfg.shots, "timeline-after-click.png") });
  log(`clicked ${pick.name} of line ${pick.source[1]}; cursor on line ${out.cursorLine}`);
}, "timeline-failure.png");

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
