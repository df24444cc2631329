// Draws `trainiumLens/heat`: one decoration type per intensity bucket, shared by
// all lines and editors. Setting every bucket each time replaces the old heat in
// place (no clear-then-draw flicker) and drops lines that are stale or cooled.
import * as vscode from "vscode";
import { HEAT_BUCKETS, HeatParams, bucketLines, gutterSvg, unreliableLines } from "./heat";
import type { LensContext } from "./context";
import { Notification } from "./protocol";

const GUTTER_RGB = "#ff5a1f";
const UNRELIABLE_RGB = "#8a8a8a";

export function registerHeat(ctx: LensContext): void {
  const types: vscode.TextEditorDecorationType[] = [];
  for (let b = 1; b <= HEAT_BUCKETS; b++) {
    const color = new vscode.ThemeColor(`trainiumLens.heat${b}`);
    types[b] = vscode.window.createTextEditorDecorationType({
      isWholeLine: true,
      backgroundColor: color,
      overviewRulerColor: color,
      overviewRulerLane: vscode.OverviewRulerLane.Left,
      gutterIconPath: vscode.Uri.parse(gutterSvg(b, GUTTER_RGB)),
      gutterIconSize: "contain",
      rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
    });
    ctx.extension.subscriptions.push(types[b]);
  }
  // A noisy run's lines: grey, not heat, so a disturbed figure never reads as hot or cool.
  const unreliableColor = new vscode.ThemeColor("trainiumLens.heatUnreliable");
  const unreliable = vscode.window.createTextEditorDecorationType({
    isWholeLine: true,
    backgroundColor: unreliableColor,
    overviewRulerColor: unreliableColor,
    overviewRulerLane: vscode.OverviewRulerLane.Left,
    gutterIconPath: vscode.Uri.parse(gutterSvg(2, UNRELIABLE_RGB)),
    gutterIconSize: "contain",
    rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
  });
  ctx.extension.subscriptions.push(unreliable);
  const heatByUri = new Map<string, HeatParams>();

  const draw = (editor: vscode.TextEditor): void => {
    const heat = heatByUri.get(editor.document.uri.toString());
    const buckets = bucketLines(heat?.lines ?? [], editor.document.lineCount);
    for (let b = 1; b <= HEAT_BUCKETS; b++) {
      editor.setDecorations(
        types[b],
        buckets[b].map((line) => new vscode.Range(line, 0, line, 0)),
      );
    }
    editor.setDecorations(
      unreliable,
      unreliableLines(heat?.lines ?? [], editor.document.lineCount).map((line) => ({
        range: new vscode.Range(line, 0, line, 0),
        hoverMessage: "Trainium Lens: this run was judged noisy; its figures are unreliable.",
      })),
    );
  };
  const drawUri = (uri: string): void => {
    for (const editor of vscode.window.visibleTextEditors)
      if (editor.document.uri.toString() === uri) draw(editor);
  };

  ctx.extension.subscriptions.push(
    vscode.window.onDidChangeVisibleTextEditors((editors) => editors.forEach(draw)),
    vscode.workspace.onDidCloseTextDocument((doc) => heatByUri.delete(doc.uri.toString())),
  );
  ctx.servers.onClient((client) => [
    client.onNotification(Notification.heat, (params: HeatParams) => {
      if (!params || typeof params.uri !== "string" || !Array.isArray(params.lines)) return;
      // The server names files by its own URI spelling; compare through vscode.Uri.
      const uri = vscode.Uri.parse(params.uri).toString();
      heatByUri.set(uri, params);
      drawUri(uri);
    }),
    {
      // A stopped server's heat no longer means anything.
      dispose: () => {
        const uris = [...heatByUri.keys()];
        heatByUri.clear();
        uris.forEach(drawUri);
      },
    },
  ]);
}
