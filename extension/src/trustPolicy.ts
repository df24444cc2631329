// Workspace Trust, the policy (pure: no `vscode` import, tested with node --test).
//
// Profiling runs the workspace's code with the interpreter and on the hosts its
// settings name; Neuron Explorer starts a program on a host and opens an SSH
// tunnel. In Restricted Mode none of that runs: the results already stored in
// the workspace still show (hints, hover, results panel, timeline), since
// reading them executes nothing. The server is told (`trusted` in its settings)
// and refuses those commands (server/trainium_lens/lsp/workspace_trust.py); the
// client keeps no words of its own: it shows the server's reply.

/** The kind of reply the server gives a command Restricted Mode refuses. */
export const UNTRUSTED = "untrusted";

/** The server's refusal text when `reply` is one (`{error, kind: "untrusted"}`), else undefined. */
export function refusalText(reply: unknown): string | undefined {
  if (!reply || typeof reply !== "object") return undefined;
  const { kind, error } = reply as { kind?: unknown; error?: unknown };
  return kind === UNTRUSTED && typeof error === "string" && error ? error : undefined;
}
