// Which Python runs the language server (and local profiling): the
// `trainiumLens.python` setting when set, else the interpreter selected in the
// Python extension (ms-python.python) when it is installed, else `python3`.
// An explicit setting wins, as in Microsoft's Python tool extensions.
import * as vscode from "vscode";
import { expandPath } from "./settings";

export interface Interpreter {
  path: string;
  source: string; // for messages: where the choice came from
}

// The slice of ms-python.python's public API used here (@vscode/python-extension).
interface PythonApi {
  environments: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { path: string };
    resolveEnvironment(env: { path: string }): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
  };
}

async function pythonApi(): Promise<PythonApi | undefined> {
  const ext = vscode.extensions.getExtension<PythonApi>("ms-python.python");
  if (!ext) return undefined;
  try {
    const api = ext.isActive ? ext.exports : await ext.activate();
    return api?.environments ? api : undefined;
  } catch {
    return undefined; // a broken Python extension must not stop ours
  }
}

export async function resolveInterpreter(resource?: vscode.Uri): Promise<Interpreter> {
  const folder = resource
    ? vscode.workspace.getWorkspaceFolder(resource)
    : vscode.workspace.workspaceFolders?.[0];
  const configured = vscode.workspace.getConfiguration("trainiumLens", resource).get<string>("python", "");
  if (configured.trim()) {
    return { path: expandPath(configured, folder?.uri.fsPath), source: "setting trainiumLens.python" };
  }
  // In Restricted Mode the Python extension's choice may be an interpreter inside
  // the untrusted workspace (its .venv): not run until the workspace is trusted.
  const api = vscode.workspace.isTrusted ? await pythonApi() : undefined;
  if (api) {
    try {
      const env = await api.environments.resolveEnvironment(
        api.environments.getActiveEnvironmentPath(folder?.uri),
      );
      const exe = env?.executable.uri?.fsPath;
      if (exe) return { path: exe, source: "the Python extension's selected interpreter" };
    } catch {
      // fall through to python3
    }
  }
  const restricted = vscode.workspace.isTrusted ? "" : ", Restricted Mode";
  return { path: "python3", source: `default python3 on PATH${restricted}` };
}

/** Calls `listener` when the Python extension's selected interpreter changes. */
export async function onInterpreterChange(listener: () => void): Promise<vscode.Disposable | undefined> {
  const api = await pythonApi();
  return api?.environments.onDidChangeActiveEnvironmentPath(() => listener());
}
