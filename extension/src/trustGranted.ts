// Restart the server once the workspace is trusted, so it starts over with the
// workspace's own settings (the interpreter among them: VS Code withholds
// restricted settings until then).
import * as vscode from "vscode";
import type { LensContext } from "./context";

export function registerTrust(ctx: LensContext): void {
  ctx.extension.subscriptions.push(
    vscode.workspace.onDidGrantWorkspaceTrust(() =>
      ctx.servers.scheduleRestart("the workspace is trusted now"),
    ),
  );
}
