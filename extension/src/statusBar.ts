// The status bar item: the profiling host and the last run's state.
import * as vscode from "vscode";
import type { LensContext } from "./context";
import { RunState, parseRunState, statusText, statusTooltip, workerNote } from "./runState";

export function registerStatusBar(ctx: LensContext): void {
  const item = vscode.window.createStatusBarItem("trainiumLens.status", vscode.StatusBarAlignment.Left, 50);
  item.name = "Trainium Lens";
  item.command = "trainiumLens.selectHost";
  const host = (): string =>
    vscode.workspace.getConfiguration("trainiumLens").get<string>("host", "local") || "local";
  let state: RunState = { state: "idle", host: host() };
  let warm: { text: string; tooltip: string } = { text: "", tooltip: "" }; // `trainiumLens/worker`
  const render = (): void => {
    item.text = statusText(state) + warm.text;
    item.tooltip = statusTooltip(state) + warm.tooltip;
    item.backgroundColor =
      state.state === "error" || state.state === "server-error"
        ? new vscode.ThemeColor("statusBarItem.errorBackground")
        : undefined;
    item.show();
  };
  ctx.extension.subscriptions.push(
    item,
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("trainiumLens.host")) {
        state = { ...state, host: host() };
        render();
      }
    }),
    ctx.servers.onDidChangeState((s) => {
      if (s !== "running") warm = { text: "", tooltip: "" }; // a stopped server holds no worker
      if (s === "starting") state = { state: "starting", host: host() };
      else if (s === "failed") state = { state: "server-error", host: host(), message: "see Show Output" };
      else if (s === "running" && state.state === "starting") state = { state: "idle", host: host() };
      render();
    }),
  );
  ctx.extension.subscriptions.push(
    ctx.servers.onRunState((params) => {
      state = parseRunState(params, host());
      render();
    }),
    ctx.servers.onWorker((params) => {
      warm = workerNote(params);
      render();
    }),
  );
  render();
}
