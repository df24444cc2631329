// "Select Trainium Host": the SSH config's hosts plus "local", written to the
// `trainiumLens.host` setting (which the server receives through the settings flow).
import * as vscode from "vscode";
import type { LensContext } from "./context";
import { hostChoices, readSshHosts } from "./sshConfig";
import { expandPath } from "./settings";

export function registerHostPicker(ctx: LensContext): void {
  ctx.extension.subscriptions.push(
    vscode.commands.registerCommand("trainiumLens.selectHost", async () => {
      const config = vscode.workspace.getConfiguration("trainiumLens");
      const sshConfig = expandPath(
        config.get<string>("sshConfig", ""),
        vscode.workspace.workspaceFolders?.[0]?.uri.fsPath,
      );
      const current = config.get<string>("host", "local") || "local";
      const choices = hostChoices(readSshHosts(sshConfig || undefined), current);
      const pick = await vscode.window.showQuickPick(choices, {
        title: "Trainium Lens: where to profile",
        placeHolder:
          choices.length > 1
            ? "local, or a Host from your SSH config"
            : "No Host entries in your SSH config: only local",
        matchOnDescription: true,
      });
      if (!pick) return;
      const target = vscode.workspace.workspaceFolders
        ? vscode.ConfigurationTarget.Workspace
        : vscode.ConfigurationTarget.Global;
      await config.update("host", pick.host, target);
    }),
  );
}
