// Workspace Trust, the policy (pure: no `vscode` import, tested with node --test).
//
// Profiling runs the workspace's code with the interpreter and on the hosts its
// settings name; Neuron Explorer starts a program on a host and opens an SSH
// tunnel. In Restricted Mode none of that runs: the results already stored in
// the workspace still show (hints, hover, results panel, timeline), since
// reading them executes nothing. The server is told too (`trusted` in its
// settings) and refuses the same commands, so no path around the client runs them.
import { ServerCommand } from "./protocol";

const TRUST_HINT = "Trust the workspace (Manage Workspace Trust) to use it.";

/** Why a command is refused in an untrusted workspace; absent: always allowed. */
const REFUSED: Record<string, string> = {
  [ServerCommand.profile]:
    "Trainium Lens: profiling is off in Restricted Mode: it runs this workspace's code, with the interpreter and on the hosts its settings name. " +
    TRUST_HINT,
  [ServerCommand.runScript]:
    "Trainium Lens: profiling is off in Restricted Mode: it runs this workspace's code, with the interpreter and on the hosts its settings name. " +
    TRUST_HINT,
  [ServerCommand.openExplorer]:
    "Trainium Lens: Neuron Explorer is off in Restricted Mode: it starts a program on the host and opens an SSH tunnel. " +
    TRUST_HINT,
};

/** The message refusing `command`, or undefined when it may run. */
export function refusal(command: string, trusted: boolean): string | undefined {
  return trusted ? undefined : REFUSED[command];
}

/** Commands that Restricted Mode refuses (for tests and docs). */
export const RESTRICTED_COMMANDS: readonly string[] = Object.keys(REFUSED);
