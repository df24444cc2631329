// The status bar's words for the host and the last run (`trainiumLens/runState`).
// Pure logic; statusBar.ts puts it on screen.

export type RunStateName = "idle" | "starting" | "running" | "ok" | "error" | "cancelled" | "server-error";

export interface RunState {
  state: RunStateName;
  host: string;
  message?: string;
}

const ICONS: Record<RunStateName, string> = {
  idle: "$(pulse)",
  starting: "$(loading~spin)",
  running: "$(sync~spin)",
  ok: "$(check)",
  error: "$(error)",
  cancelled: "$(circle-slash)",
  "server-error": "$(warning)",
};

export function statusText(s: RunState): string {
  const host = s.host || "local";
  return `${ICONS[s.state] ?? ICONS.idle} Trainium: ${host}`;
}

export function statusTooltip(s: RunState): string {
  const head = `Trainium Lens: profiling on ${s.host || "local"}`;
  const what: Record<RunStateName, string> = {
    idle: "no run yet",
    starting: "starting the language server",
    running: "a run is in progress",
    ok: "last run finished",
    error: "last run failed",
    cancelled: "last run was cancelled",
    "server-error": "the language server cannot start",
  };
  const detail = s.message ? `: ${s.message}` : "";
  return `${head}\n${what[s.state] ?? s.state}${detail}\nClick to select the host.`;
}

/** Accept the server's notification defensively: unknown states read as idle. */
export function parseRunState(params: unknown, fallbackHost: string): RunState {
  const p = (params ?? {}) as Record<string, unknown>;
  const known: RunStateName[] = ["running", "ok", "error", "cancelled"];
  const state = known.includes(p.state as RunStateName) ? (p.state as RunStateName) : "idle";
  return {
    state,
    host: typeof p.host === "string" && p.host ? p.host : fallbackHost,
    message: typeof p.message === "string" ? p.message : undefined,
  };
}

/** `trainiumLens/worker` → a suffix for the status item ("warm" and where) and a tooltip line. */
export function workerNote(params: unknown): { text: string; tooltip: string } {
  const p = (params ?? {}) as Record<string, unknown>;
  if (p.state !== "warm") return { text: "", tooltip: "" };
  const where = typeof p.host === "string" && p.host ? p.host : "local";
  const idle = typeof p.idle_s === "number" ? ` (ends after ${p.idle_s} s idle)` : "";
  return {
    text: " $(flame)",
    tooltip: `\nA warm worker is held on ${where}${idle}: run "Trainium Lens: Release Warm Worker" to end it now.`,
  };
}
