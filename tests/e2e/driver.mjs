// Drives a real VS Code (code-server, started by test_vscode.py) in headless
// Chromium and reports what the page shows, as JSON, for the pytest side to check
// against the engine's stored result.
//
//   node tests/e2e/driver.mjs CONFIG.json OUT.json
//
// CONFIG: {url, file, defText, lineTexts, settingsPath, settings, barePython,
//          goodPython, libsDir, pickHost, shots, phases: ["errors", "host", "profile",
//          "train", "roofline", "script", "fix"], scriptFile, scriptMainLine,
//          fixFile, fixDefText, fixDefLine, fixFindingLine, fixCallText}
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  chooseFromContextMenu,
  clearNotifications,
  drawn,
  EXPLORER_ROW,
  editorOf,
  notificationTexts,
  openFromExplorer,
  openWorkbench,
  pressButton,
  runCommand,
  settled,
  startDriver,
  waitForHint,
  waitForNotification,
} from "./workbench.mjs";

const { cfg, out, log, page, run } = await startDriver("driver", { errors: {}, profile: {}, timings: {} });

const STATUS = '[id="trainium-lens.trainium-lens.trainiumLens.status"]';
const editorSel = editorOf(cfg.file);

function writeSettings(extra) {
  writeFileSync(cfg.settingsPath, JSON.stringify({ ...cfg.settings, ...extra }, null, 1));
}

await run(async () => {
  await openWorkbench(page, cfg.url, cfg.file, log);
  if (cfg.phases.includes("errors")) await errorPhase();
  if (cfg.phases.includes("host")) await hostPhase();
  if (cfg.phases.includes("profile")) await profilePhase();
  if (cfg.phases.includes("train")) await trainPhase();
  if (cfg.phases.includes("roofline")) await rooflinePhase();
  if (cfg.phases.includes("script")) await scriptPhase();
  if (cfg.phases.includes("fix")) await fixPhase();
}, "failure.png");

// -- the server cannot start: a clear message, then recovery ------------------

async function statusIcon() {
  return page.locator(`${STATUS} .codicon`).first().getAttribute("class");
}

async function waitForServerUp(timeout = 40_000) {
  // The server is up when its code lens ("Profile on Trainium") is on the marked functions.
  await page.waitForFunction(
    ([sel, status]) =>
      document.querySelector(`${sel} .contentWidgets`)?.textContent?.includes("Profile on Trainium") &&
      !document.querySelector(`${status} .codicon-warning`),
    [editorSel, STATUS],
    { timeout },
  );
}

async function errorPhase() {
  // 1. settings name an interpreter that does not exist (the initial settings)
  out.errors.badPath = await waitForNotification(page, /cannot start: the Python interpreter/);
  out.errors.badPathStatus = await statusIcon();
  await page.screenshot({ path: join(cfg.shots, "error-bad-interpreter.png") });
  await clearNotifications(page);
  log("bad interpreter path reported");

  // 2. a bare interpreter (a fresh venv: stdlib only) and the bundled libraries gone
  renameSync(cfg.libsDir, `${cfg.libsDir}.off`);
  try {
    writeSettings({ "trainiumLens.python": cfg.barePython });
    out.errors.missingDeps = await waitForNotification(page, /cannot import its dependencies/);
    await clearNotifications(page);
    log("missing dependencies reported");
  } finally {
    renameSync(`${cfg.libsDir}.off`, cfg.libsDir);
  }

  // 3. the same bare interpreter with the bundled libraries back: the server runs
  //    without anything installed in it (what the .vsix promises)
  await runCommand(page, "Trainium Lens: Restart Language Server");
  await waitForServerUp();
  out.errors.bareStarts = true;
  log("server runs on a bare interpreter with the bundled libraries");

  // 4. the interpreter with torch, for profiling
  writeSettings({ "trainiumLens.python": cfg.goodPython });
  await page
    .waitForSelector(`${STATUS} .codicon-loading`, { timeout: 10_000 })
    .catch(() => log("restart too quick to see"));
  await waitForServerUp();
  log("restarted on the interpreter with torch");
}

// -- Select Trainium Host: the SSH config's hosts, saved as a setting ------------

async function pickHostList() {
  await runCommand(page, "Trainium Lens: Select Trainium Host");
  // Wait for our quick pick to replace the command palette's list.
  await page.locator(".quick-input-title", { hasText: "where to profile" }).waitFor({ state: "visible" });
  const rows = page.locator(".quick-input-list .monaco-list-row");
  await rows
    .filter({ hasText: /^local/ })
    .first()
    .waitFor({ state: "visible" });
  return rows;
}

async function hostPhase() {
  let rows = await pickHostList();
  out.host = { choices: await rows.locator(".label-name").allTextContents() };
  await rows.filter({ hasText: cfg.pickHost }).first().click();
  await page.waitForFunction(
    ([status, host]) => document.querySelector(status)?.textContent?.includes(`Trainium: ${host}`),
    [STATUS, cfg.pickHost],
    { timeout: 10_000 },
  );
  out.host.status = await page.locator(STATUS).textContent();
  out.host.saved = JSON.parse(readFileSync(cfg.settingsPath, "utf8"))["trainiumLens.host"];
  // back to local for the profile
  rows = await pickHostList();
  await rows
    .filter({ hasText: /^local/ })
    .first()
    .click();
  await page.waitForFunction(
    (status) => document.querySelector(status)?.textContent?.includes("Trainium: local"),
    STATUS,
    { timeout: 10_000 },
  );
  log(`host picker offered ${out.host.choices.join(", ")}`);
}

// -- profile from the context menu ----------------------------------------------

/** Editor line numbers (1-based) by the `top` of their row, to place other elements. */
async function lineTops(sel = editorSel) {
  return page.$$eval(`${sel} .margin-view-overlays > div`, (rows) =>
    Object.fromEntries(
      rows
        .map((r) => [parseFloat(r.style.top), Number(r.querySelector(".line-numbers")?.textContent)])
        .filter(([top, n]) => Number.isFinite(top) && n > 0),
    ),
  );
}

async function hintsByLine(sel = editorSel) {
  const tops = await lineTops(sel);
  const rows = await page.$$eval(`${sel} .view-lines .view-line`, (lines) =>
    lines.map((l) => {
      // An inlay hint is injected text: a span of its own after the code's tokens.
      const hint = [...l.querySelectorAll("span[class*='dyn-rule']")]
        .map((s) => s.textContent)
        .find((t) => t.includes("⏱"));
      return [parseFloat(l.style.top), hint?.replace(/\u00a0/g, " ")];
    }),
  );
  return Object.fromEntries(
    rows.filter(([top, hint]) => hint && tops[top]).map(([top, hint]) => [tops[top], hint]),
  );
}

async function heatByLine() {
  const tops = await lineTops();
  const marks = await page.$$eval(`${editorSel} .cgmr[class*='TextEditorDecorationType']`, (els) =>
    els.map((e) => [
      parseFloat(e.style.top),
      /TextEditorDecorationType(\d+)/.exec(e.className)[1],
      getComputedStyle(e).backgroundImage,
    ]),
  );
  const backgrounds = await page.$$eval(
    `${editorSel} .view-overlays .cdr[class*='TextEditorDecorationType']`,
    (els) => els.map((e) => [parseFloat(e.parentElement.style.top), getComputedStyle(e).backgroundColor]),
  );
  return {
    gutter: Object.fromEntries(
      marks
        .filter(([top]) => tops[top])
        .map(([top, type, img]) => [tops[top], { type: Number(type), svg: img.includes("svg") }]),
    ),
    background: Object.fromEntries(
      backgrounds.filter(([top]) => tops[top]).map(([top, color]) => [tops[top], color]),
    ),
  };
}

async function panelFrame(timeout = 30_000) {
  const until = Date.now() + timeout;
  while (Date.now() < until) {
    for (const frame of page.frames()) {
      if (
        await frame
          .locator("#ops")
          .count()
          .catch(() => 0)
      )
        return frame;
    }
    await page.waitForTimeout(300);
  }
  throw new Error("the results panel never showed an op table");
}

/** The line of the editor's cursor, from the editor itself (focused or not). */
async function cursorLine(sel = editorSel) {
  const tops = await lineTops(sel);
  const top = await page
    .locator(`${sel} .cursors-layer .cursor`)
    .first()
    .evaluate((c) => parseFloat(c.style.top));
  return tops[top];
}

/** Rest the mouse on the first word of a line until the editor's hover shows ops. */
async function hoverText(row) {
  for (let attempt = 0; attempt < 6; attempt++) {
    // Measured afresh each time: the panel opening beside the editor re-lays it out.
    await row.click(); // the editor takes focus back from the panel, as a user's click would
    const box = await row.boundingBox();
    const at = await row.evaluate((l) => {
      const token = l.querySelector("span > span"); // the first token: monospace code text
      const indent = l.textContent.length - l.textContent.trimStart().length;
      return {
        indent,
        charWidth: token.getBoundingClientRect().width / Math.max(1, token.textContent.length),
      };
    });
    if (!box) continue;
    await page.mouse.move(box.x + (at.indent + 1.5 + attempt) * at.charWidth, box.y + box.height / 2, {
      steps: 3,
    });
    const ok = await page
      .waitForFunction(
        () => [...document.querySelectorAll(".monaco-hover")].some((h) => h.textContent.includes("aten::")),
        null,
        { timeout: 4000 },
      )
      .then(
        () => true,
        () => false,
      );
    if (ok) return (await page.locator(".monaco-hover").allTextContents()).join("\n");
    if (attempt === 0) {
      await page.screenshot({ path: join(cfg.shots, "hover-miss.png") });
      log(
        `no op table in the hover yet: ${JSON.stringify(await page.locator(".monaco-hover").allTextContents())}`,
      );
    }
    await page.mouse.move(box.x - 50, box.y - 80); // away, so the next rest is a new hover
  }
  throw new Error("no hover with an op table on the hottest line");
}

async function profilePhase() {
  await waitForServerUp();
  await clearNotifications(page); // from here on, any notification is news

  const def = page.locator(`${editorSel} .view-line`, { hasText: cfg.defText });
  const menu = await chooseFromContextMenu(page, def, "Profile on Trainium", log);
  out.profile.menuItems = menu.items;
  const t0 = menu.clickedAt;
  await page.waitForSelector(`${STATUS} .codicon-sync`, { timeout: 10_000 }).then(
    () => (out.profile.sawRunning = true),
    () => log("running state not seen"),
  );
  await waitForHint(page, editorSel, { timeout: 120_000, polling: 50 });
  out.timings.commandToHintsMs = Date.now() - t0;
  log(`hints after ${out.timings.commandToHintsMs} ms`);
  out.profile.hints = await settled(page, () => hintsByLine()); // every visible line's hint
  out.profile.heat = await heatByLine();
  out.profile.statusIcon = await statusIcon();
  await page.screenshot({ path: join(cfg.shots, "editor-hints.png") });

  const panel = await panelFrame();
  out.timings.commandToPanelMs = Date.now() - t0;
  out.profile.panelOps = await panel.locator("#ops tbody tr td:first-child").allTextContents();
  out.profile.panelLines = await panel
    .locator("#lines tbody tr")
    .evaluateAll((rows) => rows.map((r) => Number(r.dataset.line)));
  out.profile.panelFindings = await panel.locator("#findings tbody tr").count();
  out.profile.panelTitle = await panel.locator("h1").textContent();
  await page.screenshot({ path: join(cfg.shots, "editor-and-panel.png") });
  await page
    .locator("iframe.webview.ready")
    .first()
    .screenshot({ path: join(cfg.shots, "results-panel.png") })
    .catch((e) => log(`panel shot: ${e}`));

  // Hover the hottest line: the op table from the server's hover.
  const hottest = out.profile.panelLines[0];
  const hotRow = page.locator(`${editorSel} .view-line`).filter({ hasText: cfg.lineTexts[String(hottest)] });
  out.profile.hover = await hoverText(hotRow);
  out.profile.hoverLine = hottest;
  await page.screenshot({ path: join(cfg.shots, "hover.png") });
  await page.keyboard.press("Escape");

  // A click on a line row in the panel reveals that line in the editor.
  const target = out.profile.panelLines[out.profile.panelLines.length - 1];
  const before = await cursorLine();
  await panel.locator(`#lines tbody tr[data-line="${target}"]`).click();
  const until = Date.now() + 10_000;
  while ((await cursorLine()) !== target && Date.now() < until) await page.waitForTimeout(200);
  out.profile.revealed = { clicked: target, before, cursor: await cursorLine() };
  log(`panel row ${target} revealed line ${out.profile.revealed.cursor}`);
  // Edit the revealed line: its figure no longer applies, so its heat goes and
  // its hint says "(stale)"; the other lines keep theirs.
  await page
    .locator(`${editorSel} .view-line`)
    .filter({ hasText: cfg.lineTexts[String(target)] })
    .click();
  await page.keyboard.press("End");
  await page.keyboard.type("  # edited");
  const staleUntil = Date.now() + 15_000;
  let heat = await heatByLine();
  let hints = await hintsByLine();
  while (Date.now() < staleUntil && (heat.gutter[target] || !hints[target]?.includes("(stale)"))) {
    await page.waitForTimeout(250);
    heat = await heatByLine();
    hints = await hintsByLine();
  }
  out.profile.afterEdit = { line: target, heat, hints };
  await page.screenshot({ path: join(cfg.shots, "stale.png") });

  // Everything VS Code told the user since the errors phase was cleared.
  out.profile.notifications = await notificationTexts(page);
}

// -- a training step: hints carry forward and backward --------------------------

async function trainPhase() {
  const sel = editorOf(cfg.trainFile);
  await page.keyboard.press("Escape");
  await openFromExplorer(page, cfg.trainFile);
  log(`opened ${cfg.trainFile}`);
  // bring the marked function into view (Go to Line centres it)
  await page.locator(`${sel} .view-line`).first().click();
  await page.keyboard.press("Control+G");
  await page.keyboard.type(String(cfg.trainLine));
  await page.keyboard.press("Enter");
  const def = page.locator(`${sel} .view-line`, { hasText: cfg.trainDefText });
  await def.waitFor({ state: "visible" });
  await chooseFromContextMenu(page, def, "Profile on Trainium", log);
  await waitForHint(page, sel, { text: "bwd", timeout: 180_000, polling: 100 });
  out.train = { hints: await settled(page, () => hintsByLine(sel)) };
  await page.screenshot({ path: join(cfg.shots, "train-step-hints.png") });
  log("training-step hints read");
}

// -- the results panel's roofline chart: drawn, and a point reveals its line -------

async function frameWith(selector, timeout) {
  const until = Date.now() + timeout;
  while (Date.now() < until) {
    for (const frame of page.frames()) {
      if (
        await frame
          .locator(selector)
          .count()
          .catch(() => 0)
      )
        return frame;
    }
    await page.waitForTimeout(300);
  }
  throw new Error(`the results panel never showed ${selector}`);
}

async function rooflinePhase() {
  const sel = editorOf(cfg.trainFile);
  // the panel follows the run: it shows the training step now, roofline and all
  const frame = await frameWith("#roofline-chart circle.point", 60_000);
  out.roofline = {
    title: await frame.locator("h1").textContent(),
    points: await frame.locator("#roofline-chart circle.point").evaluateAll((cs) =>
      cs.map((c) => ({
        line: Number(c.getAttribute("data-line")),
        cls: c.getAttribute("class"),
        title: c.querySelector("title")?.textContent ?? "",
      })),
    ),
    roof: await frame.locator("p.muted", { hasText: "Roof:" }).first().textContent(),
    mfu: await frame
      .locator("p", { hasText: "Function MFU" })
      .first()
      .textContent()
      .catch(() => null),
    memoryLines: await frame
      .locator("#memory tbody tr")
      .evaluateAll((rows) => rows.map((r) => Number(r.getAttribute("data-line")))),
  };
  await frame.locator("#roofline-chart").scrollIntoViewIfNeeded();
  await drawn(frame);
  await page
    .locator("iframe.webview.ready")
    .first()
    .screenshot({ path: join(cfg.shots, "roofline-panel.png") })
    .catch((e) => log(`roofline shot: ${e}`));
  // Click the last point drawn (nothing covers it): the editor goes to its line.
  const target = out.roofline.points[out.roofline.points.length - 1].line;
  // the cursor somewhere else first: on the def line (no point is on it)
  await page.locator(`${sel} .view-line`, { hasText: cfg.trainDefText }).click();
  const before = await cursorLine(sel);
  await frame.locator(`#roofline-chart circle.point[data-line="${target}"]`).last().click();
  const until = Date.now() + 10_000;
  while ((await cursorLine(sel)) !== target && Date.now() < until) await page.waitForTimeout(200);
  out.roofline.revealed = { clicked: target, before, cursor: await cursorLine(sel) };
  log(`roofline point ${target} revealed line ${out.roofline.revealed.cursor}`);
}

// -- an unmodified script: the code lens on `if __name__ == "__main__":` ---------

async function scriptPhase() {
  const sel = editorOf(cfg.scriptFile);
  await page.keyboard.press("Escape");
  await page.locator(EXPLORER_ROW, { hasText: /^tinylm$/ }).click();
  await openFromExplorer(page, cfg.scriptFile);
  log(`opened ${cfg.scriptFile}`);
  await page.locator(`${sel} .view-line`).first().click();
  await page.keyboard.press("Control+G");
  await page.keyboard.type(String(cfg.scriptMainLine));
  await page.keyboard.press("Enter");
  // the lens above the main guard; launch.json's one configuration for this file gives
  // its args (no quick pick: one configuration names it)
  const lens = page.locator(`${sel} .codelens-decoration a`, { hasText: "Profile Script on Trainium" });
  await lens.first().waitFor({ state: "visible", timeout: 60_000 });
  const clicked = Date.now();
  await lens.first().click();
  await waitForHint(page, sel, { text: "⏱", timeout: 240_000, polling: 100 });
  out.script = {
    lens: await lens.first().textContent(),
    hints: await settled(page, () => hintsByLine(sel)),
    rendered: Object.values(await lineTops(sel)),
    clickToHintsMs: Date.now() - clicked,
  };
  await page.screenshot({ path: join(cfg.shots, "script-hints.png") });
  log("script hints read");
}

// -- a quick fix: measured first, applied only on Apply, its figure in the hint ---

async function lineText(sel, needle) {
  return page
    .locator(`${sel} .view-line`, { hasText: needle })
    .first()
    .evaluate((l) => l.textContent.replace(/\u00a0/g, " "));
}

async function goToLine(sel, line) {
  await page.locator(`${sel} .view-line`).first().click();
  await page.keyboard.press("Control+G");
  await page.keyboard.type(String(line));
  await page.keyboard.press("Enter");
}

async function fixPhase() {
  const sel = editorOf(cfg.fixFile);
  await page.keyboard.press("Escape");
  await clearNotifications(page);
  await openFromExplorer(page, cfg.fixFile);
  log(`opened ${cfg.fixFile}`);
  await goToLine(sel, cfg.fixDefLine);
  const def = page.locator(`${sel} .view-line`, { hasText: cfg.fixDefText });
  await def.waitFor({ state: "visible" });
  await chooseFromContextMenu(page, def, "Profile on Trainium", log);
  await waitForHint(page, sel, { text: "bwd", timeout: 180_000, polling: 100 });
  // the optimizer finding's line: its diagnostic's quick fix
  await goToLine(sel, cfg.fixFindingLine);
  const item = page.locator(".action-widget .monaco-list-row", { hasText: "Measure and apply" });
  for (let attempt = 0; attempt < 5 && !(await item.first().isVisible()); attempt++) {
    await page.keyboard.press("Control+.");
    await item
      .first()
      .waitFor({ state: "visible", timeout: 5_000 })
      .catch(() => log("no quick fix menu yet"));
  }
  out.fix = { actions: await page.locator(".action-widget .monaco-list-row").allTextContents() };
  await page.screenshot({ path: join(cfg.shots, "fix-menu.png") });
  await item.first().click();
  log("quick fix chosen");
  const verdict = await waitForNotification(page, /faster on|slower on|not applied|outputs differ/, 180_000);
  out.fix.message = verdict;
  out.fix.callBefore = await lineText(sel, cfg.fixCallText); // nothing written before the choice
  const apply = page.locator(".notifications-center .monaco-button", { hasText: /^Apply$/ });
  out.fix.offered = await apply.count();
  await page.screenshot({ path: join(cfg.shots, "fix-measured.png") });
  if (out.fix.offered) {
    await pressButton(page, apply.first());
    await page.waitForFunction(
      ([s, t]) =>
        [...document.querySelectorAll(`${s} .view-line`)].some(
          (l) => l.textContent.includes(t) && l.textContent.includes("fused=True"),
        ),
      [sel, cfg.fixCallText],
      { timeout: 30_000 },
    );
    await waitForHint(page, sel, { text: "(was", timeout: 30_000 }); // one word: the hint spaces are no-break
    out.fix.callAfter = await lineText(sel, cfg.fixCallText);
    out.fix.hints = await settled(page, () => hintsByLine(sel));
    await page.screenshot({ path: join(cfg.shots, "fix-applied.png") });
  }
  log("fix phase done");
}
