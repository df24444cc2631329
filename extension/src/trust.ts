// Workspace Trust, the editor side: refuse what Restricted Mode forbids (policy in
// trustPolicy.ts), with a button to manage trust. Imports no feature context, so
// the server manager can use it (trustGranted.ts restarts the server).
import * as vscode from "vscode";
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
