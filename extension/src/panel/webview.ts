// Runs inside the results panel (a browser context, no Node, no vscode module):
// a click or Enter on a line/finding row, or on a roofline point, asks the extension
// to reveal that line.
declare function acquireVsCodeApi(): { postMessage(message: unknown): void };

const vscodeApi = acquireVsCodeApi();

function reveal(row: Element): void {
  const line = Number(row.getAttribute("data-line"));
  const file = row.getAttribute("data-file");
  if (!file || !Number.isInteger(line)) return;
  vscodeApi.postMessage({ type: "reveal", file, line });
}

document.addEventListener("click", (event) => {
  const row = (event.target as Element).closest(".reveal");
  if (row) reveal(row);
});
document.addEventListener("keydown", (event) => {
  if (event.key !== "Enter") return;
  const row = (event.target as Element).closest(".reveal");
  if (row) reveal(row);
});
