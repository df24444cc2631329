// The results panel: one webview showing the run data of a file's latest run
// (`trainiumLens/runData`), refreshed after each run; rows reveal their line.
import { randomBytes } from "node:crypto";
import * as path from "node:path";
import * as vscode from "vscode";
import type { LensContext } from "../context";
import { RunData, currentLine } from "./format";
import { makeNonce, renderPage } from "./html";
import { Request } from "../protocol";

export interface PanelTarget {
  uri: vscode.Uri;
  function?: string;
  baseline?: string; // a run id: the diff is against it instead of the previous run
}

export class ResultsPanel implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  private target: PanelTarget | undefined;
  private data: RunData | undefined;

  constructor(private readonly ctx: LensContext) {}

  isOpen(): boolean {
    return this.panel !== undefined;
  }

  /** Open (or refresh) the panel beside the editor for `target`'s latest run. */
  async show(target: PanelTarget, preserveFocus = true): Promise<void> {
    const client = await this.ctx.servers.ready();
    if (!client) return;
    let data: RunData;
    try {
      data = await client.sendRequest<RunData>(Request.runData, {
        uri: target.uri.toString(),
        function: target.function,
        baseline: target.baseline,
      });
    } catch (e) {
      void vscode.window.showErrorMessage(
        `Trainium Lens: cannot read the run data: ${e instanceof Error ? e.message : e}`,
      );
      return;
    }
    this.target = target;
    this.data = data;
    const panel = this.ensurePanel(preserveFocus);
    panel.title = `Trainium Lens: ${data?.result?.function.name ?? path.basename(target.uri.fsPath)}`;
    panel.webview.html = this.page(panel.webview, data);
  }

  private ensurePanel(preserveFocus: boolean): vscode.WebviewPanel {
    if (this.panel) {
      this.panel.reveal(vscode.ViewColumn.Beside, preserveFocus);
      return this.panel;
    }
    const dist = vscode.Uri.joinPath(this.ctx.extension.extensionUri, "extension", "dist");
    const media = vscode.Uri.joinPath(this.ctx.extension.extensionUri, "extension", "src", "panel");
    const panel = vscode.window.createWebviewPanel(
      "trainiumLens.results",
      "Trainium Lens",
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus },
      { enableScripts: true, localResourceRoots: [dist, media], enableFindWidget: true },
    );
    panel.webview.onDidReceiveMessage((m) => void this.onMessage(m));
    panel.onDidDispose(() => (this.panel = undefined));
    this.panel = panel;
    return panel;
  }

  private page(webview: vscode.Webview, data: RunData): string {
    const root = this.ctx.extension.extensionUri;
    return renderPage(data, {
      cspSource: webview.cspSource,
      nonce: makeNonce((n) => randomBytes(n)),
      scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(root, "extension", "dist", "panel.js")).toString(),
      styleUri: webview
        .asWebviewUri(vscode.Uri.joinPath(root, "extension", "src", "panel", "panel.css"))
        .toString(),
    });
  }

  /** A row was clicked: open its file at its line (1-based in results). */
  private async onMessage(message: unknown): Promise<void> {
    const m = message as { type?: string; file?: string; line?: number };
    if (m?.type !== "reveal" || typeof m.file !== "string" || typeof m.line !== "number" || !this.target)
      return;
    const uri = this.resolveFile(m.file);
    const doc = await vscode.workspace.openTextDocument(uri);
    const wanted = this.data ? currentLine(this.data, m.file, m.line) : m.line - 1;
    const line = Math.max(0, Math.min(doc.lineCount - 1, wanted));
    const visible = vscode.window.visibleTextEditors.find(
      (e) => e.document.uri.toString() === uri.toString(),
    );
    const editor = await vscode.window.showTextDocument(doc, {
      viewColumn: visible?.viewColumn ?? vscode.ViewColumn.One,
    });
    const range = doc.lineAt(line).range;
    editor.selection = new vscode.Selection(range.start, range.start);
    editor.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
  }

  /** Results name files relative to the workspace root; the profiled file is the panel's own. */
  private resolveFile(file: string): vscode.Uri {
    const target = this.target!;
    if (this.data?.result?.function.file === file) return target.uri;
    const folder = vscode.workspace.getWorkspaceFolder(target.uri);
    return folder ? vscode.Uri.joinPath(folder.uri, ...file.split("/")) : target.uri;
  }

  dispose(): void {
    this.panel?.dispose();
  }
}
