// The settings the language server reads, sent as the editor holds them (pure logic:
// the caller passes a getter over `trainiumLens.*`): the server owns their parsing.
import { homedir } from "node:os";
import { join } from "node:path";
import { PAYLOAD_KEYS } from "./settingsKeys";

/**
 * The `trainiumLens` section as the editor holds it, keyed as the server reads it. The
 * values are the user's, unchecked: the server parses them, holds the ranges and warns
 * about a bad one in one line naming it (server/trainium_lens/lsp/settings.py). The
 * client adds only what it alone knows: the interpreter it resolved (`python`) and
 * Workspace Trust (`trusted`, trust.ts); it expands VS Code's path variables.
 */
export interface ServerSettings {
  host?: unknown;
  sshConfig?: unknown; // `~`, `${workspaceFolder}`, `${userHome}` expanded (expandPath)
  remotePython?: unknown;
  workDir?: unknown;
  hosts?: unknown; // across nodes: SSH hosts, one torchrun each (docs/nodes.md)
  slurm?: unknown; // {login, nodes, partition}: across nodes through SLURM
  ifname?: unknown; // across nodes: the cluster interface
  backend?: unknown;
  wait?: unknown;
  warmup?: unknown;
  active?: unknown;
  hintThreshold?: unknown; // a share (<= 1), µs (> 1), or "2%" / "50us": the server reads the forms
  historySize?: unknown;
  timeoutSeconds?: unknown;
  python: string; // the interpreter actually used (resolved), for local profiling
  include?: unknown; // installed packages whose lines get figures (the server checks the names)
  warmWorker?: unknown; // {idleSeconds}; 0: no warm worker (every run cold)
  nproc?: unknown; // ranks under torchrun; 0: the marker's nproc= option, else one process
  explorer?: unknown; // trainiumLens.explorer.* (hosttools/explorer/settings.py)
  script?: unknown; // {args}: Profile Script's arguments without a launch.json configuration
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
  const out: ServerSettings = { python };
  for (const key of PAYLOAD_KEYS) {
    if (key === "python" || key === "trusted") continue; // the client's own (above)
    const value = get(key);
    if (value !== undefined) (out as unknown as Record<string, unknown>)[key] = value;
  }
  if (typeof out.sshConfig === "string") out.sshConfig = expandPath(out.sshConfig, workspaceFolder);
  return out;
}

/**
 * What the server receives, in `initializationOptions` and in every
 * `workspace/didChangeConfiguration`: the VS Code convention of settings keyed by
 * section, so the server reads `settings["trainiumLens"]` in both places.
 */
export function settingsPayload(settings: ServerSettings): { settings: { trainiumLens: ServerSettings } } {
  return { settings: { trainiumLens: settings } };
}
