// Drives a real VS Code (code-server with Workspace Trust on, started by
// test_trust.py) on a folder that is not trusted: the stored run's hints show,
// the window says Restricted Mode, and "Profile on Trainium" (context menu) and
// "Open Line in Neuron Explorer" (palette) are refused with a message that says
// why. JSON out, for pytest to check.
//
//   node tests/e2e/trust_driver.mjs CONFIG.json OUT.json
//
// CONFIG: {url, file, defText, hotLine, lineTexts, shots}
import { chromium } from "playwright-core";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [configPath, outPath] = process.argv.slice(2);
const cfg = JSON.parse(readFileSync(configPath, "utf8"));
const out = { log: [] };
const log = (msg) => {
  out.log.push(`${new Date().toISOString().slice(11, 23)} ${msg}`);
  process.stderr.write(`trust driver: ${msg}\n`);
};
const editorSel = `.monaco-editor[data-uri$="/${cfg.file}"]`;

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
});
const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });

try {
  await page.goto(cfg.url);
  await page.waitForSelector(".explorer-folders-view .monaco-list-row", { timeout: 90_000 });
  await page.locator(".explorer-folders-view .monaco-list-row", { hasText: /^examples$/ }).click();
  await page.locator(".explorer-folders-view .monaco-list-row", { hasText: cfg.file.split("/").pop() }).click();
  await page.waitForSelector(`${editorSel} .view-line`, { timeout: 30_000 });

  // Stored results still show: the server reads them and runs nothing.
  await page.waitForFunction(
    (sel) => [...document.querySelectorAll(`${sel} .view-lines span[class*='dyn-rule']`)].some((s) => s.textContent.includes("⏱")),
    editorSel,
    { timeout: 90_000 },
  );
  await page.waitForTimeout(500); // every visible line's hint rendered
  out.hintLines = await page.$$eval(`${editorSel} .view-lines .view-line`, (lines) =>
    lines.filter((l) => [...l.querySelectorAll("span[class*='dyn-rule']")].some((s) => s.textContent.includes("⏱"))).map((l) => l.textContent.replace(/\u00a0/g, " ")),
  );
  out.restrictedIndicator = await page.locator("#status\\.workspaceTrust, .statusbar-item", { hasText: "Restricted Mode" }).count();
  log(`hints on ${out.hintLines.length} lines; Restricted Mode shown: ${out.restrictedIndicator}`);
  await page.screenshot({ path: join(cfg.shots, "restricted-hints.png") });
  await clearNotifications(); // from here on, any notification is news

  // Profile from the context menu: refused, with the reason.
  const def = page.locator(`${editorSel} .view-line`, { hasText: cfg.defText });
  await def.click({ button: "right" });
  const item = page.locator(".context-view .action-label", { hasText: "Profile on Trainium" });
  await item.waitFor({ state: "visible" });
  await item.click();
  for (let i = 0; i < 3; i++) { // a click lost while the menu settles: click again
    await page.waitForTimeout(1000);
    if (!(await item.isVisible().catch(() => false))) break;
    await item.click().catch(() => {});
  }
  out.profileRefusal = await waitForNotification(/profiling is off in Restricted Mode/);
  log(`profile refused: ${out.profileRefusal}`);
  await page.screenshot({ path: join(cfg.shots, "restricted-profile-refused.png") });
  await clearNotifications();

  // Neuron Explorer from the palette, on the hot line: refused too.
  await page.locator(`${editorSel} .view-line`, { hasText: cfg.lineTexts[String(cfg.hotLine)] }).first().click();
  await page.keyboard.press("F1");
  await page.locator(".quick-input-widget input").fill(">Trainium Lens: Open Line in Neuron Explorer");
  await page.locator(".quick-input-list .monaco-list-row", { hasText: "Open Line in Neuron Explorer" }).first().click();
  out.explorerRefusal = await waitForNotification(/Neuron Explorer is off in Restricted Mode/);
  log(`explorer refused: ${out.explorerRefusal}`);
  out.notifications = await notificationTexts();
} catch (e) {
  out.failure = String(e?.stack ?? e);
  await page.screenshot({ path: join(cfg.shots, "restricted-failure.png") }).catch(() => {});
  log(`FAILED: ${e}`);
} finally {
  writeFileSync(outPath, JSON.stringify(out, null, 1));
  await browser.close();
}
process.exit(out.failure ? 1 : 0);

async function notificationTexts() {
  // With the smoke-test driver on, toasts go straight to the Notification Center.
  const center = page.locator(".notifications-center");
  if (!(await center.isVisible())) await page.locator("#status\\.notifications").click();
  await center.waitFor({ state: "visible" });
  return page.locator(".notifications-center .notification-list-item-message").allTextContents();
}

async function clearNotifications() {
  const center = page.locator(".notifications-center");
  if (!(await center.isVisible())) await page.locator("#status\\.notifications").click();
  await center.waitFor({ state: "visible" });
  await page.locator(".notifications-center-header .codicon-notifications-clear-all").click({ timeout: 2000 }).catch(() => {});
  await page.keyboard.press("Escape");
}

async function waitForNotification(pattern, timeout = 30_000) {
  const until = Date.now() + timeout;
  let texts = [];
  while (Date.now() < until) {
    texts = await notificationTexts();
    const hit = texts.find((t) => pattern.test(t));
    if (hit) return hit;
    await page.waitForTimeout(500);
  }
  throw new Error(`no notification matching ${pattern}; saw ${JSON.stringify(texts)}`);
}
