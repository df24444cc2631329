// The settings the language server reads, normalized from the editor's
// configuration (pure logic: the caller passes a getter over `trainiumLens.*`).
import { homedir } from "node:os";
import { join } from "node:path";
import { PAYLOAD_KEYS } from "./settingsKeys";

export interface ServerSettings {
  host: string;
  sshConfig: string;
  remotePython: string;
  workDir: string;
  backend: "auto" | "neuron" | "cuda" | "cpu" | "xla";
  wait: number | null;
  warmup: number | null;
  active: number | null;
  hintThreshold: number | string; // a share (<= 1), µs (> 1), or "2%" / "50us"
  historySize: number;
  timeoutSeconds: number;
  python: string; // the interpreter actually used (resolved), for local profiling
  include?: string[]; // trainiumLens.include: installed packages whose lines get figures (the server checks the names)
  warmWorker: { idleSeconds: number }; // 0: no warm worker (every run cold)
  script?: { args: string[] }; // trainiumLens.script.args: Profile Script's arguments without a launch.json configuration
  nproc: number; // ranks under torchrun; 0: the marker's nproc= option, else one process
  // trainiumLens.explorer.* (ports, URL template, path): validated by the server (hosttools/explorer/service.py)
  explorer?: Record<string, unknown>;
  // Workspace Trust (trust.ts): false in Restricted Mode, where the server runs nothing.
  trusted?: boolean;
}

// The server's settings table is the one list of keys (settingsKeys.ts is generated from it):
// this line fails to compile while ServerSettings names a key the server does not read, or
// lacks one it does.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export const SAME_KEYS_AS_THE_SERVER: Same<keyof ServerSettings, (typeof PAYLOAD_KEYS)[number]> = true;

/** Keys whose change needs a new server process (a new interpreter); the rest are sent live. */
export const RESTART_KEYS = ["trainiumLens.python"];

const BACKENDS = new Set(["auto", "neuron", "cuda", "cpu", "xla"]);

function str(v: unknown): string {
  return typeof v === "string" ? v.trim() : "";
}

/** `trainiumLens.include`: sent only when it names something (absent: the workspace only). */
function includeSetting(v: unknown): { include?: string[] } {
  const names = Array.isArray(v)
    ? v.filter((x): x is string => typeof x === "string" && x.trim() !== "").map((x) => x.trim())
    : [];
  return names.length ? { include: names } : {};
}

/** `trainiumLens.script.args`: sent only when it holds arguments (the server checks them). */
function scriptSetting(v: unknown): { script?: { args: string[] } } {
  const args = Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
  return args.length ? { script: { args } } : {};
}

function optInt(v: unknown, min: number): number | null {
  if (typeof v !== "number" || !Number.isFinite(v)) return null;
  return Math.max(min, Math.round(v));
}

function num(v: unknown, fallback: number, min: number, max: number): number {
  if (typeof v !== "number" || !Number.isFinite(v)) return fallback;
  return Math.min(max, Math.max(min, v));
}

/** The server parses the forms (share, µs, "2%", "50us"); only junk becomes 0 (all lines). */
function threshold(v: unknown): number | string {
  if (typeof v === "number" && Number.isFinite(v) && v >= 0) return v;
  if (typeof v === "string" && v.trim()) return v.trim();
  return 0;
}

/** `~` and `${workspaceFolder}`/`${userHome}` in path settings, as other Python tools accept. */
export function expandPath(value: string, workspaceFolder?: string, home: string = homedir()): string {
  let out = value.trim();
  if (workspaceFolder) out = out.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
  out = out.replace(/\$\{userHome\}/g, home);
  if (out === "~") return home;
  if (out.startsWith("~/")) return join(home, out.slice(2));
  return out;
}

export function serverSettings(
  get: (key: string) => unknown,
  python: string,
  workspaceFolder?: string,
): ServerSettings {
  const backend = str(get("backend"));
  return {
    host: str(get("host")) || "local",
    sshConfig: expandPath(str(get("sshConfig")), workspaceFolder),
    remotePython: str(get("remotePython")),
    workDir: str(get("workDir")),
    backend: (BACKENDS.has(backend) ? backend : "auto") as ServerSettings["backend"],
    wait: optInt(get("wait"), 0),
    warmup: optInt(get("warmup"), 0),
    active: optInt(get("active"), 1),
    hintThreshold: threshold(get("hintThreshold")),
    historySize: Math.round(num(get("historySize"), 20, 1, 10_000)),
    timeoutSeconds: Math.round(num(get("timeoutSeconds"), 3600, 1, 86_400)),
    python,
    ...includeSetting(get("include")),
    ...scriptSetting(get("script.args")),
    warmWorker: { idleSeconds: num(get("warmWorker.idleSeconds"), 300, 0, 86_400) },
    nproc: Math.round(num(get("nproc"), 0, 0, 4096)),
    ...explorerSettings(get("explorer")),
  };
}

/** `trainiumLens.explorer` as VS Code nests it ({uiPort, ...}); only when present. */
function explorerSettings(v: unknown): { explorer?: Record<string, unknown> } {
  return v && typeof v === "object" ? { explorer: { ...(v as Record<string, unknown>) } } : {};
}

/**
 * What the server receives, in `initializationOptions` and in every
 * `workspace/didChangeConfiguration`: the VS Code convention of settings keyed by
 * section, so the server reads `settings["trainiumLens"]` in both places.
 */
export function settingsPayload(settings: ServerSettings): { settings: { trainiumLens: ServerSettings } } {
  return { settings: { trainiumLens: settings } };
}
