// Workspace Trust, the editor side: the server refuses what Restricted Mode forbids
// and says why in its reply (trustPolicy.ts reads it); this shows that text with a
// button to manage trust. Imports no feature context, so the server manager can use
// it (trustGranted.ts restarts the server).
import * as vscode from "vscode";
import { refusalText } from "./trustPolicy";

export function isTrusted(): boolean {
  return vscode.workspace.isTrusted;
}

/** True (after showing the server's reason) when `reply` refuses a command in Restricted Mode. */
export function showRefusal(reply: unknown): boolean {
  const why = refusalText(reply);
  if (!why) return false;
  void vscode.window.showWarningMessage(why, "Manage Workspace Trust").then((pick) => {
    if (pick) void vscode.commands.executeCommand("workbench.trust.manage");
  });
  return true;
}
