// The built-in timeline: a webview drawing a run's trace (server request
// `trainiumLens/timeline`), opened zoomed on one line's events with those
// highlighted; clicking an event reveals its source line. Works for every backend.
// The drawing lives in extension/media/timeline/ (canvas, plain JS, strict CSP).
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import * as vscode from "vscode";
import type { LensContext } from "./context";
import { LineRef, RevealMessage, TimelineData, fillPage, revealTarget, timelineArgs } from "./timelineHtml";
import { ClientCommand, Request } from "./protocol";

export class TimelinePanel implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  private ready: Promise<void> | undefined;
  private data: TimelineData | undefined;
  private origin: LineRef | undefined;

  constructor(private readonly ctx: LensContext) {}

  async open(arg: unknown): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const active = editor
      ? { uri: editor.document.uri.toString(), line: editor.selection.active.line }
      : undefined;
    const where = timelineArgs(arg, active);
    if (!where) {
      void vscode.window.showWarningMessage("Trainium Lens: put the cursor on a profiled line first.");
      return;
    }
    const client = await this.ctx.servers.ready();
    if (!client) return;
    this.origin = where;
    const panel = this.ensurePanel();
    panel.title = "Timeline";
    const request = client.sendRequest<TimelineData>(Request.timeline, where);
    // The page says when its script listens; VS Code also queues messages for a
    // page still loading, so a slow load (a cold, busy machine) only delays it.
    await Promise.race([this.ready, new Promise((resolve) => setTimeout(resolve, 10_000))]);
    let data: TimelineData;
    try {
      data = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Window, title: "Trainium Lens: loading the trace" },
        () => request,
      );
    } catch (e) {
      data = { error: `cannot load the trace: ${e instanceof Error ? e.message : e}` };
    }
    if (!this.panel) return; // closed while loading
    this.data = data;
    if (data.error) {
      void panel.webview.postMessage({ type: "error", message: data.error });
      void vscode.window.showWarningMessage(`Trainium Lens: ${data.error}`);
      return;
    }
    panel.title = data.line ? `Timeline: ${data.file?.split("/").pop()}:${data.line}` : "Timeline";
    void panel.webview.postMessage({ type: "data", data });
  }

  private ensurePanel(): vscode.WebviewPanel {
    if (this.panel) {
      this.panel.reveal(vscode.ViewColumn.Beside, true);
      return this.panel;
    }
    const media = vscode.Uri.joinPath(this.ctx.extension.extensionUri, "extension", "media", "timeline");
    const panel = vscode.window.createWebviewPanel(
      "trainiumLens.timeline",
      "Timeline",
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
      { enableScripts: true, localResourceRoots: [media], retainContextWhenHidden: true },
    );
    let markReady: () => void = () => undefined;
    this.ready = new Promise((resolve) => (markReady = resolve));
    panel.webview.onDidReceiveMessage((m) => {
      if (m?.type === "ready") markReady();
      else if (m?.type === "reveal") void this.reveal(m as RevealMessage);
    });
    panel.onDidDispose(() => {
      this.panel = undefined;
      this.data = undefined;
    });
    const template = readFileSync(vscode.Uri.joinPath(media, "index.html").fsPath, "utf8");
    panel.webview.html = fillPage(template, {
      cspSource: panel.webview.cspSource,
      nonce: randomBytes(16).toString("base64"),
      base: panel.webview.asWebviewUri(media).toString(),
    });
    this.panel = panel;
    return panel;
  }

  /** An event was clicked: open its file at its line, in the editor it came from. */
  private async reveal(m: RevealMessage): Promise<void> {
    const target = revealTarget(this.data, m);
    if (!target) return;
    let uri: vscode.Uri;
    if ("uri" in target) uri = vscode.Uri.parse(target.uri);
    else {
      const origin = this.origin ? vscode.Uri.parse(this.origin.uri) : undefined;
      const folder = origin && vscode.workspace.getWorkspaceFolder(origin);
      if (!folder) return;
      uri = vscode.Uri.joinPath(folder.uri, ...target.file.split("/"));
    }
    const doc = await vscode.workspace.openTextDocument(uri);
    const line = Math.max(0, Math.min(doc.lineCount - 1, target.line));
    const visible = vscode.window.visibleTextEditors.find(
      (e) => e.document.uri.toString() === uri.toString(),
    );
    const editor = await vscode.window.showTextDocument(doc, {
      viewColumn: visible?.viewColumn ?? vscode.ViewColumn.One,
      preserveFocus: false,
    });
    const range = doc.lineAt(line).range;
    editor.selection = new vscode.Selection(range.start, range.start);
    editor.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
  }

  dispose(): void {
    this.panel?.dispose();
  }
}

export function registerTimeline(ctx: LensContext): void {
  const panel = new TimelinePanel(ctx);
  ctx.extension.subscriptions.push(
    panel,
    vscode.commands.registerCommand(ClientCommand.openTimeline, (arg?: unknown) => panel.open(arg)),
  );
  // The palette entry's `when` clause: the command itself says when there is no run.
  void vscode.commands.executeCommand("setContext", "trainiumLens.timelineAvailable", true);
}
