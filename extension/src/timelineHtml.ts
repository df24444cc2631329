// The timeline panel's pure parts (no `vscode` import, so `node --test` covers them):
// the webview page from its template, the command's arguments, and where a clicked
// event's line is.

export interface PageAssets {
  cspSource: string; // webview.cspSource
  nonce: string;
  base: string; // webview URI of extension/media/timeline
}

/** Fill extension/media/timeline/index.html's {{placeholders}}. */
export function fillPage(template: string, a: PageAssets): string {
  return template
    .replace(/\{\{cspSource\}\}/g, a.cspSource)
    .replace(/\{\{nonce\}\}/g, a.nonce)
    .replace(/\{\{base\}\}/g, a.base.replace(/\/$/, ""));
}

export interface LineRef {
  uri: string;
  line: number; // 0-based
}

/** The command's argument: `{uri, line}` from a hover link or code lens, else the cursor. */
export function timelineArgs(arg: unknown, active?: LineRef): LineRef | undefined {
  const a = Array.isArray(arg) ? arg[0] : arg;
  if (a && typeof a === "object" && typeof (a as LineRef).uri === "string") {
    const line = (a as LineRef).line;
    return { uri: (a as LineRef).uri, line: typeof line === "number" && line >= 0 ? Math.floor(line) : 0 };
  }
  return active;
}

export interface TimelineData {
  error?: string;
  title?: string;
  file?: string | null;
  line?: number | null;
  sources?: [string, number][];
  targets?: (LineRef | null)[];
  events?: { start: number[] };
}

export interface RevealMessage {
  type: "reveal";
  src?: number;
  file?: string;
  line?: number; // 1-based, in the run's numbering
}

/** Where to reveal a clicked event: the server's mapping to the editor now, else the
 * run's own file:line (resolved against the workspace by the caller). */
export function revealTarget(
  data: TimelineData | undefined,
  m: RevealMessage,
): LineRef | { file: string; line: number } | undefined {
  if (typeof m.src === "number" && data?.targets?.[m.src]) return data.targets[m.src]!;
  if (typeof m.file === "string" && typeof m.line === "number")
    return { file: m.file, line: Math.max(0, m.line - 1) };
  return undefined;
}
