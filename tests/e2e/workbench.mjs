// What every e2e driver (driver.mjs, trust_driver.mjs, timeline_driver.mjs) does
// the same way: read its CONFIG, drive headless Chromium on the code-server page,
// write its observations as JSON; open a file from the explorer, wait for the
// stored run's hints, read the Notification Center, run a palette command and
// choose a context-menu item.
import { chromium } from "playwright-core";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const EXPLORER_ROW = ".explorer-folders-view .monaco-list-row";

/**
 * Start a driver run (`node tests/e2e/NAME.mjs CONFIG.json OUT.json`): the parsed
 * CONFIG, `out` (the observations: `fields` and a `log`), `log(msg)`, a page in
 * headless Chromium, and `run(steps, failureShot)`, which runs the steps, records
 * a failure (with a screenshot under cfg.shots), writes OUT.json, closes the
 * browser and exits 1 on a failure, else 0.
 */
export async function startDriver(name, fields = {}) {
  const [configPath, outPath] = process.argv.slice(2);
  const cfg = JSON.parse(readFileSync(configPath, "utf8"));
  const out = { ...fields, log: [] };
  const log = (msg) => {
    out.log.push(`${new Date().toISOString().slice(11, 23)} ${msg}`);
    process.stderr.write(`${name}: ${msg}\n`);
  };
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  async function run(steps, failureShot) {
    try {
      await steps();
    } catch (e) {
      out.failure = String(e?.stack ?? e);
      await page.screenshot({ path: join(cfg.shots, failureShot) }).catch(() => {});
      log(`FAILED: ${e}`);
    } finally {
      writeFileSync(outPath, JSON.stringify(out, null, 1));
      await browser.close();
    }
    process.exit(out.failure ? 1 : 0);
  }
  return { cfg, out, log, page, run };
}

/** The editor of a workspace file (its path relative to the workspace). */
export const editorOf = (file) => `.monaco-editor[data-uri$="/${file}"]`;

/** Load the workbench at `url` and open `file` (examples/NAME) from the explorer. */
export async function openWorkbench(page, url, file, log) {
  await page.goto(url);
  await page.waitForSelector(EXPLORER_ROW, { timeout: 90_000 });
  log("workbench up");
  await page.locator(EXPLORER_ROW, { hasText: /^examples$/ }).click();
  await openFromExplorer(page, file);
  log(`opened ${file}`);
}

/** Click `file` in the explorer (its folder already open) and wait for its editor. */
export async function openFromExplorer(page, file) {
  await page.locator(EXPLORER_ROW, { hasText: file.split("/").pop() }).click();
  await page.waitForSelector(`${editorOf(file)} .view-line`, { timeout: 30_000 });
}

/** Wait until an inlay hint holding `text` shows in the editor `sel`. */
export async function waitForHint(page, sel, { text = "⏱", timeout = 90_000, polling } = {}) {
  await page.waitForFunction(
    ([s, t]) =>
      [...document.querySelectorAll(`${s} .view-lines span[class*='dyn-rule']`)].some((x) =>
        x.textContent.includes(t),
      ),
    [sel, text],
    { timeout, ...(polling ? { polling } : {}) },
  );
}

async function notificationCenter(page) {
  // With the smoke-test driver on, toasts go straight to the Notification Center.
  const center = page.locator(".notifications-center");
  if (!(await center.isVisible())) await page.locator("#status\\.notifications").click();
  await center.waitFor({ state: "visible" });
}

export async function notificationTexts(page) {
  await notificationCenter(page);
  return page.locator(".notifications-center .notification-list-item-message").allTextContents();
}

export async function clearNotifications(page) {
  await notificationCenter(page);
  // disabled (nothing to clear) is fine too
  await page
    .locator(".notifications-center-header .codicon-notifications-clear-all")
    .click({ timeout: 2000 })
    .catch(() => {});
  await page.keyboard.press("Escape");
}

/**
 * Read `read()` until two reads `interval` ms apart agree (the editor has stopped
 * adding hints or decorations) and return that value: no fixed wait before a read.
 */
export async function settled(page, read, { interval = 150, timeout = 10_000 } = {}) {
  const until = Date.now() + timeout;
  let last = JSON.stringify(await read());
  for (;;) {
    await page.waitForTimeout(interval);
    const value = await read();
    const now = JSON.stringify(value);
    if (now === last) return value;
    if (Date.now() > until) throw new Error(`still changing after ${timeout} ms: ${now}`);
    last = now;
  }
}

/** Resolve once `frame` has drawn two more animation frames (after a scroll or new data). */
export async function drawn(frame) {
  await frame.evaluate(
    () => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))),
  );
}

/**
 * Press a workbench button as a user does: a click, or, when a hover the pointer left
 * behind covers it (a tooltip intercepts every click while the pointer rests there;
 * seen on a notification's Apply), the button focused and Enter.
 */
export async function pressButton(page, button) {
  const clicked = await button.click({ timeout: 5_000 }).then(
    () => true,
    () => false,
  );
  if (clicked) return;
  await page.mouse.move(0, 0); // off the workbench: the hover goes
  await button.focus();
  await page.keyboard.press("Enter");
}

export async function waitForNotification(page, pattern, timeout = 30_000) {
  const until = Date.now() + timeout;
  let texts = [];
  while (Date.now() < until) {
    texts = await notificationTexts(page);
    const hit = texts.find((t) => pattern.test(t));
    if (hit) return hit;
    await page.waitForTimeout(500);
  }
  throw new Error(`no notification matching ${pattern}; saw ${JSON.stringify(texts)}`);
}

/** Run a command from the palette by its title ("Trainium Lens: ..."). */
export async function runCommand(page, title) {
  await page.keyboard.press("F1");
  await page.locator(".quick-input-widget input").fill(`>${title}`);
  await page
    .locator(".quick-input-list .monaco-list-row", { hasText: title.split(": ").pop() })
    .first()
    .click();
}

/**
 * Right-click `row` and choose `label` from the context menu. Returns the menu's
 * items and when the item was clicked (Date.now()).
 */
export async function chooseFromContextMenu(page, row, label, log = () => {}) {
  await row.click({ button: "right" });
  const item = page.locator(".context-view .action-label", { hasText: label });
  await item.waitFor({ state: "visible" });
  const items = await page.locator(".context-view .action-label").allTextContents();
  const clickedAt = Date.now();
  await item.click();
  log(`clicked ${label}`);
  // A click that lands while the menu is still settling can be lost, and the
  // menu then stays open (it closes as soon as its command runs): still open after
  // 1 s, click again. Closed sooner, done then (no fixed second per choice).
  for (let i = 0; i < 3; i++) {
    const closed = await item.waitFor({ state: "hidden", timeout: 1000 }).then(
      () => true,
      () => false,
    );
    if (closed) break;
    log("the menu is still open: clicking the item again");
    await item.click().catch(() => {});
  }
  return { items, clickedAt };
}
