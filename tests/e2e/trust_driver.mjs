// Drives a real VS Code (code-server with Workspace Trust on, started by
// test_trust.py) on a folder that is not trusted: the stored run's hints show,
// the window says Restricted Mode, and "Profile on Trainium" (context menu) and
// "Open Line in Neuron Explorer" (palette) are refused with a message that says
// why. JSON out, for pytest to check.
//
//   node tests/e2e/trust_driver.mjs CONFIG.json OUT.json
//
// CONFIG: {url, file, defText, hotLine, lineTexts, shots}
import { join } from "node:path";
import {
  chooseFromContextMenu,
  clearNotifications,
  editorOf,
  notificationTexts,
  openWorkbench,
  runCommand,
  settled,
  startDriver,
  waitForHint,
  waitForNotification,
} from "./workbench.mjs";

const { cfg, out, log, page, run } = await startDriver("trust driver");
const editorSel = editorOf(cfg.file);

await run(async () => {
  await openWorkbench(page, cfg.url, cfg.file, log);

  // Stored results still show: the server reads them and runs nothing.
  await waitForHint(page, editorSel);
  // every visible line's hint rendered
  out.hintLines = await settled(page, () =>
    page.$$eval(`${editorSel} .view-lines .view-line`, (lines) =>
      lines
        .filter((l) =>
          [...l.querySelectorAll("span[class*='dyn-rule']")].some((s) => s.textContent.includes("⏱")),
        )
        .map((l) => l.textContent.replace(/\u00a0/g, " ")),
    ),
  );
  out.restrictedIndicator = await page
    .locator("#status\\.workspaceTrust, .statusbar-item", { hasText: "Restricted Mode" })
    .count();
  log(`hints on ${out.hintLines.length} lines; Restricted Mode shown: ${out.restrictedIndicator}`);
  await page.screenshot({ path: join(cfg.shots, "restricted-hints.png") });
  await clearNotifications(page); // from here on, any notification is news

  // Profile from the context menu: refused, with the reason.
  const def = page.locator(`${editorSel} .view-line`, { hasText: cfg.defText });
  await chooseFromContextMenu(page, def, "Profile on Trainium", log);
  out.profileRefusal = await waitForNotification(page, /profiling is off in Restricted Mode/);
  log(`profile refused: ${out.profileRefusal}`);
  await page.screenshot({ path: join(cfg.shots, "restricted-profile-refused.png") });
  await clearNotifications(page);

  // Neuron Explorer from the palette, on the hot line: refused too.
  await page
    .locator(`${editorSel} .view-line`, { hasText: cfg.lineTexts[String(cfg.hotLine)] })
    .first()
    .click();
  await runCommand(page, "Trainium Lens: Open Line in Neuron Explorer");
  out.explorerRefusal = await waitForNotification(page, /Neuron Explorer is off in Restricted Mode/);
  log(`explorer refused: ${out.explorerRefusal}`);
  out.notifications = await notificationTexts(page);
}, "restricted-failure.png");
