// Runs inside the results panel (a browser context, no Node, no vscode module):
// a click or Enter on a line/finding row asks the extension to reveal that line.
declare function acquireVsCodeApi(): { postMessage(message: unknown): void };

const vscodeApi = acquireVsCodeApi();

function reveal(row: HTMLElement): void {
  const line = Number(row.dataset.line);
  if (!row.dataset.file || !Number.isInteger(line)) return;
  vscodeApi.postMessage({ type: "reveal", file: row.dataset.file, line });
}

document.addEventListener("click", (event) => {
  const row = (event.target as HTMLElement).closest<HTMLElement>("tr.reveal");
  if (row) reveal(row);
});
document.addEventListener("keydown", (event) => {
  if (event.key !== "Enter") return;
  const row = (event.target as HTMLElement).closest<HTMLElement>("tr.reveal");
  if (row) reveal(row);
});
