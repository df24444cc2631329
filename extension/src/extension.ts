// Trainium Lens: a thin client. It starts the Python language server (which does
// all profiling work) and draws what it sends. Each feature registers itself from
// a small module; add new ones (e.g. the timeline panel) to FEATURES.
import * as vscode from "vscode";
import { registerCommands } from "./commands";
import type { Feature, LensContext } from "./context";
import { registerHeat } from "./heatDecorations";
import { registerHostPicker } from "./hostPicker";
import { ServerManager } from "./serverManager";
import { registerStatusBar } from "./statusBar";
import { registerTimeline } from "./timelinePanel";
import { registerTrust } from "./trustGranted";

const FEATURES: Feature[] = [
  registerStatusBar,
  registerHeat,
  registerCommands,
  registerHostPicker,
  registerTimeline,
  registerTrust,
];

let servers: ServerManager | undefined;

export async function activate(extension: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel("Trainium Lens", { log: true });
  const root = extension.extensionUri.fsPath;
  servers = new ServerManager(
    {
      launcher: vscode.Uri.joinPath(extension.extensionUri, "extension", "src", "python", "launch.py").fsPath,
      serverPath: vscode.Uri.joinPath(extension.extensionUri, "server").fsPath,
      libs: vscode.Uri.joinPath(extension.extensionUri, "extension", "dist", "libs").fsPath,
    },
    output,
  );
  const ctx: LensContext = { extension, servers, output };
  extension.subscriptions.push(output, servers);
  for (const feature of FEATURES) feature(ctx);
  output.info(`Trainium Lens ${extension.extension.packageJSON.version} activated from ${root}`);
  await servers.start();
}

export async function deactivate(): Promise<void> {
  await servers?.dispose();
  servers = undefined;
}
