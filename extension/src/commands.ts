// The palette/context-menu commands. Each forwards to the server's
// `workspace/executeCommand` (the contract in docs/protocol.md, "LSP surface");
// the client adds only what the editor knows: the file, the cursor line, saving.
import * as vscode from "vscode";
import type { LensContext } from "./context";
import { ResultsPanel } from "./panel/resultsPanel";
import { type HistoryReply, baselineItems } from "./baselinePick";
import { ClientCommand, Request, ServerCommand } from "./protocol";
import { isTrusted } from "./trust";
import { type ScriptLaunch, runScriptArgs, scriptLaunches } from "./launchPick";
import { profileCell } from "./profileCell";

// The server's reply; on failure it has already shown the reason (window/showMessage).
interface ProfileReply {
  run_ids?: string[];
  backend?: string;
  headline?: string;
  error?: string;
  kind?: string;
}

function pythonEditor(): vscode.TextEditor | undefined {
  const editor = vscode.window.activeTextEditor;
  if (editor?.document.languageId === "python") return editor;
  void vscode.window.showWarningMessage(
    "Trainium Lens: open a Python file with a '# trainium: profile' function first.",
  );
  return undefined;
}

/** Profiling runs the file on disk: save first so the figures match the text. */
async function saved(editor: vscode.TextEditor): Promise<boolean> {
  if (!editor.document.isDirty) return true;
  return editor.document.save();
}

export function registerCommands(ctx: LensContext): void {
  const panel = new ResultsPanel(ctx);
  const { servers } = ctx;

  const profile = async (withLine: boolean): Promise<void> => {
    const editor = pythonEditor();
    if (!editor) return;
    // In Restricted Mode nothing is saved: the server refuses the run and says why.
    if (isTrusted() && !(await saved(editor))) return;
    const uri = editor.document.uri;
    const args = withLine
      ? { uri: uri.toString(), line: editor.selection.active.line }
      : { uri: uri.toString() };
    const reply = await servers.executeCommand<ProfileReply>(ServerCommand.profile, args);
    if (!reply || reply.error || !reply.run_ids?.length) return;
    if (reply.headline) vscode.window.setStatusBarMessage(`Trainium Lens: ${reply.headline}`, 10_000);
  };

  // "Profile Script…" (palette, or the code lens on `if __name__ == "__main__":`):
  // args, env and cwd from a launch.json configuration that runs this file, a pick
  // when several do; with none, the server takes trainiumLens.script.args.
  const profileScript = async (arg?: { uri?: string }): Promise<void> => {
    // In Restricted Mode the server refuses the run and says why (nothing is saved).
    const uri = arg?.uri ? vscode.Uri.parse(arg.uri) : pythonEditor()?.document.uri;
    if (!uri) return;
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
    if (isTrusted() && doc?.isDirty && !(await doc.save())) return;
    const folder = vscode.workspace.getWorkspaceFolder(uri);
    let launch: ScriptLaunch | undefined;
    if (folder) {
      const configurations = vscode.workspace
        .getConfiguration("launch", folder)
        .get<unknown>("configurations");
      const found = scriptLaunches(configurations, {
        file: uri.fsPath,
        workspaceFolder: folder.uri.fsPath,
        env: process.env,
      });
      launch = found[0];
      if (found.length > 1) {
        const picked = await vscode.window.showQuickPick(
          found.map((l) => ({ label: l.name, detail: l.args.join(" ") || "(no arguments)", launch: l })),
          {
            title: "Profile Script: which launch configuration?",
            placeHolder: "its args, env and cwd are used",
          },
        );
        if (!picked) return;
        launch = picked.launch;
      }
    }
    const reply = await servers.executeCommand<ProfileReply>(
      ServerCommand.runScript,
      runScriptArgs(uri.toString(), launch),
    );
    if (!reply || reply.error || !reply.run_ids?.length) return;
    if (reply.headline) vscode.window.setStatusBarMessage(`Trainium Lens: ${reply.headline}`, 10_000);
  };

  // Every finished run (from these commands or the server's code lens) opens or
  // refreshes the panel for the file in front of the user.
  const onRunState = (params: unknown): void => {
    const state = (params as { state?: string } | undefined)?.state;
    const editor = vscode.window.activeTextEditor;
    if (state !== "ok" || editor?.document.languageId !== "python") return;
    if (
      panel.isOpen() ||
      vscode.workspace.getConfiguration("trainiumLens").get<boolean>("openResultsAfterRun", true)
    ) {
      void panel.show({ uri: editor.document.uri });
    }
  };

  ctx.extension.subscriptions.push(
    panel,
    servers.onRunState(onRunState),
    vscode.commands.registerCommand("trainiumLens.profileHere", () => profile(true)),
    vscode.commands.registerCommand("trainiumLens.profileFile", () => profile(false)),
    vscode.commands.registerCommand(ClientCommand.profileScript, profileScript),
    vscode.commands.registerCommand(ClientCommand.profileCell, profileCell),
    vscode.commands.registerCommand("trainiumLens.compare", async () => {
      const editor = pythonEditor();
      if (!editor) return;
      const uri = editor.document.uri;
      const reply = await servers.executeCommand<{ error?: string; function?: string }>(
        ServerCommand.compareWithPrevious,
        { uri: uri.toString() },
      );
      if (reply && !reply.error) await panel.show({ uri, function: reply.function }, false);
    }),
    vscode.commands.registerCommand("trainiumLens.compareWithBaseline", async () => {
      const editor = pythonEditor();
      const client = editor && (await servers.ready());
      if (!editor || !client) return;
      const uri = editor.document.uri;
      const reply = await client.sendRequest<HistoryReply>(Request.history, { uri: uri.toString() });
      const items = baselineItems(reply);
      if (!items.length) {
        void vscode.window.showInformationMessage(
          `Trainium Lens: ${reply?.function ?? "this file"} has no earlier run to compare with: profile it again first.`,
        );
        return;
      }
      const picked = await vscode.window.showQuickPick(items, {
        title: `Compare ${reply.function}'s latest run with…`,
        placeHolder: "a stored run (when · commit)",
        matchOnDetail: true,
      });
      if (picked)
        await panel.show({ uri, function: reply.function ?? undefined, baseline: picked.runId }, false);
    }),
    vscode.commands.registerCommand(ClientCommand.showResults, async () => {
      const editor = pythonEditor();
      if (editor) await panel.show({ uri: editor.document.uri }, false);
    }),
    vscode.commands.registerCommand("trainiumLens.showOutput", () => ctx.output.show(true)),
    vscode.commands.registerCommand("trainiumLens.restartServer", () => servers.restart("restart requested")),
  );
}
