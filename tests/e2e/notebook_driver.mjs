// Drives a real VS Code (code-server, started by test_notebook.py) on a workspace
// holding a .ipynb whose %%trainium_lens cell a real kernel ran and stored: opens it in
// VS Code's own notebook editor and reads, per cell editor, its lines, the inlay hints,
// the heat (the decorations' tinted lines) and the code lenses; then hovers the model's
// forward line. Then clicks *Profile Cell* on the cell that starts with `profileText`
// and reads that cell's lines again and whether VS Code asked for a kernel (its
// kernel picker: code-server here has no Jupyter extension, so no controller).
// JSON out, for pytest to check; a screenshot of the notebook.
//
//   node tests/e2e/notebook_driver.mjs CONFIG.json OUT.json
//
// CONFIG: {url, notebook, hoverText, profileText, shots}
import { join } from "node:path";
import { EXPLORER_ROW, settled, startDriver, waitForHint } from "./workbench.mjs";

const { cfg, out, log, page, run } = await startDriver("notebook driver");
// a notebook cell's editor: a code editor whose model is the cell's text document
const CELL = `.monaco-editor[data-uri^="vscode-notebook-cell:"]`;

/** Per cell editor: its lines (code only), hints, heat and lenses by 0-based line. */
function readCells() {
  return page.$$eval(CELL, (editors) =>
    editors.map((ed) => {
      const rows = [...ed.querySelectorAll(".view-lines .view-line")]
        .map((l) => [parseFloat(l.style.top), l])
        .sort((a, b) => a[0] - b[0]);
      const index = new Map(rows.map(([top], i) => [top, i]));
      const hints = {};
      const lines = rows.map(([, l], i) => {
        const copy = l.cloneNode(true);
        for (const s of copy.querySelectorAll("span[class*='dyn-rule']")) {
          if (s.textContent.includes("⏱")) {
            hints[i] = s.textContent.replace(/\u00a0/g, " ");
            s.remove();
          }
        }
        return copy.textContent.replace(/\u00a0/g, " ");
      });
      const heat = {};
      for (const d of ed.querySelectorAll(".view-overlays .cdr[class*='TextEditorDecorationType']")) {
        const line = index.get(parseFloat(d.parentElement.style.top));
        if (line !== undefined) heat[line] = getComputedStyle(d).backgroundColor;
      }
      const lenses = [...ed.querySelectorAll(".codelens-decoration")].map((c) => c.textContent);
      return { uri: ed.getAttribute("data-uri"), lines, hints, heat, lenses };
    }),
  );
}

/** Rest the mouse on the first token of `row` until the hover shows ops. */
async function hoverText(row) {
  for (let attempt = 0; attempt < 6; attempt++) {
    await row.click();
    const box = await row.boundingBox();
    const at = await row.evaluate((l) => {
      const token = l.querySelector("span > span");
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
    await page.mouse.move(box.x - 50, box.y - 80);
  }
  throw new Error("no hover with an op table on the model's line");
}

await run(async () => {
  await page.goto(cfg.url);
  await page.waitForSelector(EXPLORER_ROW, { timeout: 90_000 });
  log("workbench up");
  await page.locator(EXPLORER_ROW, { hasText: cfg.notebook }).click();
  await page.waitForSelector(`${CELL} .view-line`, { timeout: 60_000 });
  log("notebook open");
  await waitForHint(page, CELL);
  // the loop cell's lens on its magic's line, once the hints are there
  await page.waitForFunction(
    (sel) => [...document.querySelectorAll(`${sel} .codelens-decoration`)].some((c) => c.textContent.trim()),
    CELL,
    { timeout: 60_000 },
  );
  out.cells = await settled(page, readCells);
  log(`cells: ${out.cells.map((c) => `${Object.keys(c.hints).length} hints`).join(", ")}`);
  await page.screenshot({ path: join(cfg.shots, "notebook.png") });
  const row = page.locator(`${CELL} .view-line`, { hasText: cfg.hoverText }).first();
  out.hover = await hoverText(row);
  log("hover read");
  await page.screenshot({ path: join(cfg.shots, "notebook-hover.png") });
  await page.mouse.move(5, 500);
  await page.keyboard.press("Escape");
  out.profileCell = await clickProfileCell(cfg.profileText);
  await page.screenshot({ path: join(cfg.shots, "notebook-profile-cell.png") });
}, "notebook-failure.png");

/** The lens on the cell starting with `first`: click it, read what it did. */
async function clickProfileCell(first) {
  const cells = await readCells();
  const target = cells.find((c) => c.lines[0]?.trim() === first.trim());
  if (!target) throw new Error(`no cell starts with ${first}`);
  const editor = `.monaco-editor[data-uri="${target.uri}"]`;
  const lens = page.locator(`${editor} .codelens-decoration a`, { hasText: "Profile Cell" });
  await lens.first().click();
  log("Profile Cell clicked");
  // the magic on the cell's first line (the edit), then VS Code's kernel picker (the execute)
  await page.waitForFunction(
    (sel) => document.querySelector(`${sel} .view-lines`)?.textContent.includes("%%trainium_lens"),
    editor,
    { timeout: 20_000 },
  );
  const picker = page.locator(".quick-input-widget");
  const asked = await picker.waitFor({ state: "visible", timeout: 20_000 }).then(
    () => true,
    () => false,
  );
  const pickerText = asked ? await picker.innerText() : "";
  log(`kernel asked: ${asked} ${pickerText.slice(0, 80)}`);
  await page.screenshot({ path: join(cfg.shots, "notebook-kernel-picker.png") });
  await page.keyboard.press("Escape");
  const after = await settled(page, readCells);
  return {
    uri: target.uri,
    before: target,
    after: after.find((c) => c.uri === target.uri),
    cellsBefore: cells.map((c) => c.uri),
    cellsAfter: after.map((c) => c.uri),
    kernelAsked: asked,
    pickerText,
  };
}
