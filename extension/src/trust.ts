// Workspace Trust, the editor side: refuse what Restricted Mode forbids (policy in
// trustPolicy.ts), with a button to manage trust; restart the server once the
// workspace is trusted, so it starts over with the workspace's own settings
// (the interpreter among them: VS Code withholds restricted settings until then).
import * as vscode from "vscode";
import type { LensContext } from "./context";
import { refusal } from "./trustPolicy";

export function isTrusted(): boolean {
  return vscode.workspace.isTrusted;
}

/** True (after saying why) when `command` may not run in this workspace now. */
export function refuseUntrusted(command: string): boolean {
  const why = refusal(command, isTrusted());
  if (!why) return false;
  void vscode.window.showWarningMessage(why, "Manage Workspace Trust").then((pick) => {
    if (pick) void vscode.commands.executeCommand("workbench.trust.manage");
  });
  return true;
}

export function registerTrust(ctx: LensContext): void {
  ctx.extension.subscriptions.push(
    vscode.workspace.onDidGrantWorkspaceTrust(() =>
      ctx.servers.scheduleRestart("the workspace is trusted now"),
    ),
  );
}
