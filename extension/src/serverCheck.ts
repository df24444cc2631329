// Can the chosen interpreter run the language server? One short `launch.py --check`
// answers, and a failure becomes a one-line message with its fix (pure Node: no vscode).
import { spawn } from "node:child_process";

export interface ServerPaths {
  launcher: string; // extension/src/python/launch.py (shipped as is)
  serverPath: string; // the folder holding trainium_lens/
  libs: string; // bundled pure-Python dependencies (may be absent in a dev checkout)
}

export type CheckResult =
  { ok: true; python: string; version: string } | { ok: false; message: string; fix: string };

export function launcherArgs(paths: ServerPaths, check = false): string[] {
  const args = [paths.launcher, "--server-path", paths.serverPath, "--libs", paths.libs];
  return check ? [...args, "--check"] : args;
}

interface Report {
  ok: boolean;
  python: string;
  version: string;
  problem: "version" | "import" | null;
  detail: string | null;
}

const SELECT_FIX =
  "Set 'trainiumLens.python' to a Python 3.11+ interpreter, or pick one with 'Python: Select Interpreter'.";

/** Turn what the check process did into a verdict (exported for tests). */
export function verdict(
  python: string,
  source: string,
  outcome: {
    error?: NodeJS.ErrnoException;
    code: number | null;
    stdout: string;
    stderr: string;
    timedOut?: boolean;
  },
): CheckResult {
  const who = `the Python interpreter '${python}' (${source})`;
  if (outcome.error) {
    if (outcome.error.code === "ENOENT")
      return { ok: false, message: `${who} was not found.`, fix: SELECT_FIX };
    if (outcome.error.code === "EACCES")
      return { ok: false, message: `${who} is not executable.`, fix: SELECT_FIX };
    return { ok: false, message: `${who} could not be started: ${outcome.error.message}.`, fix: SELECT_FIX };
  }
  if (outcome.timedOut) return { ok: false, message: `${who} did not answer within 30 s.`, fix: SELECT_FIX };
  const line = outcome.stdout.trim().split(/\r?\n/).pop() ?? "";
  let report: Report | undefined;
  try {
    report = JSON.parse(line) as Report;
  } catch {
    report = undefined;
  }
  if (!report || typeof report.ok !== "boolean") {
    const why = lastLine(outcome.stderr) || `exit code ${outcome.code}`;
    return { ok: false, message: `${who} failed to run the server check: ${why}.`, fix: SELECT_FIX };
  }
  if (report.ok) return { ok: true, python: report.python, version: report.version };
  if (report.problem === "version") {
    return {
      ok: false,
      message: `${who} is Python ${report.version}; Trainium Lens needs Python 3.11 or newer.`,
      fix: SELECT_FIX,
    };
  }
  return {
    ok: false,
    message: `the language server cannot import its dependencies with ${who}: ${report.detail}.`,
    fix: "Reinstall the Trainium Lens extension (its .vsix carries pygls and lsprotocol), or run 'pip install trainium-lens' in that interpreter.",
  };
}

function lastLine(text: string): string {
  return text.trim().split(/\r?\n/).pop()?.trim() ?? "";
}

export function checkServer(
  python: string,
  source: string,
  paths: ServerPaths,
  timeoutMs = 30_000,
): Promise<CheckResult> {
  return new Promise((resolve) => {
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    let settled = false;
    const finish = (outcome: Parameters<typeof verdict>[2]) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(verdict(python, source, outcome));
    };
    const child = spawn(python, launcherArgs(paths, true), {
      stdio: ["ignore", "pipe", "pipe"],
      windowsHide: true,
    });
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", (error) => finish({ error, code: null, stdout, stderr }));
    child.on("close", (code) => finish({ code, stdout, stderr, timedOut }));
  });
}
