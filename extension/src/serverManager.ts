// Owns the language server process: check the interpreter, start the client,
// restart (debounced) when the interpreter changes, send settings when they change.
// Features attach to each new client through `onClient` (their notification
// handlers live exactly as long as that client).
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
  TransportKind,
} from "vscode-languageclient/node";
import { Interpreter, onInterpreterChange, resolveInterpreter } from "./interpreter";
import { CheckResult, ServerPaths, checkServer, launcherArgs } from "./serverCheck";
import { RESTART_KEYS, ServerSettings, serverSettings, settingsPayload } from "./settings";
import { ClientCommand, Notification, ServerCommand } from "./protocol";
import { isTrusted, showRefusal } from "./trust";

export type ServerState = "stopped" | "starting" | "running" | "failed";
type ClientHook = (client: LanguageClient) => vscode.Disposable[];

const RESTART_DELAY_MS = 500;

export class ServerManager implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private clientDisposables: vscode.Disposable[] = [];
  private readonly hooks: ClientHook[] = [];
  private readonly disposables: vscode.Disposable[] = [];
  private pending: Promise<void> = Promise.resolve();
  private restartTimer: NodeJS.Timeout | undefined;
  private interpreter: Interpreter | undefined;
  private lastFailure: Extract<CheckResult, { ok: false }> | undefined;
  private lastShown: string | undefined; // one notification per distinct problem, not per retry
  private readonly stateEmitter = new vscode.EventEmitter<ServerState>();
  readonly onDidChangeState = this.stateEmitter.event;
  // `trainiumLens/runState`, shared: a JSON-RPC connection keeps one handler per method.
  private readonly runStateEmitter = new vscode.EventEmitter<unknown>();
  readonly onRunState = this.runStateEmitter.event;
  // `trainiumLens/worker`: whether a warm worker is held, and where.
  private readonly workerEmitter = new vscode.EventEmitter<unknown>();
  readonly onWorker = this.workerEmitter.event;
  state: ServerState = "stopped";

  constructor(
    private readonly paths: ServerPaths,
    readonly output: vscode.LogOutputChannel,
  ) {
    this.disposables.push(
      this.stateEmitter,
      this.runStateEmitter,
      this.workerEmitter,
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (!e.affectsConfiguration("trainiumLens")) return;
        const needsRestart = this.state !== "running" || RESTART_KEYS.some((k) => e.affectsConfiguration(k));
        if (needsRestart) this.scheduleRestart("settings changed");
        else void this.sendSettings();
      }),
    );
    void onInterpreterChange(() => {
      if (!vscode.workspace.getConfiguration("trainiumLens").get<string>("python", "").trim()) {
        this.scheduleRestart("the selected Python interpreter changed");
      }
    }).then((d) => d && this.disposables.push(d));
  }

  /** Attach a feature to every client this manager starts. */
  onClient(hook: ClientHook): void {
    this.hooks.push(hook);
    if (this.client) this.clientDisposables.push(...hook(this.client));
  }

  settings(): ServerSettings {
    const folder = vscode.workspace.workspaceFolders?.[0];
    const config = vscode.workspace.getConfiguration("trainiumLens", folder?.uri);
    const settings = serverSettings((k) => config.get(k), this.interpreter?.path ?? "", folder?.uri.fsPath);
    return { ...settings, trusted: isTrusted() }; // the server refuses to run anything when false
  }

  start(): Promise<void> {
    this.pending = this.pending.then(() => this.doStart()).catch((e) => this.output.error(String(e)));
    return this.pending;
  }

  restart(reason: string): Promise<void> {
    this.output.info(`Restarting the language server: ${reason}`);
    this.pending = this.pending.then(() => this.doStop()).catch((e) => this.output.error(String(e)));
    return this.start();
  }

  /** Settle bursts of changes (typing in settings.json, an interpreter switch) into one restart. */
  scheduleRestart(reason: string): void {
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      void this.restart(reason);
    }, RESTART_DELAY_MS);
  }

  /** The running client, after any start in progress; undefined (and a message) when there is none. */
  async ready(): Promise<LanguageClient | undefined> {
    await this.pending;
    if (this.client && this.state === "running") return this.client;
    if (this.lastFailure) void this.showFailure(this.lastFailure);
    else
      void vscode.window.showErrorMessage(
        "Trainium Lens: the language server is not running. See 'Trainium Lens: Show Output'.",
      );
    return undefined;
  }

  /** `workspace/executeCommand` on the server, with its error shown as one line. */
  async executeCommand<T>(command: string, args: unknown): Promise<T | undefined> {
    const client = await this.ready();
    if (!client) return undefined;
    try {
      const reply = await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [args] });
      return showRefusal(reply) ? undefined : (reply as T); // Restricted Mode: the server's words
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      this.output.error(`${command} failed: ${message}`);
      void vscode.window.showErrorMessage(`Trainium Lens: ${message}`, "Show Output").then((pick) => {
        if (pick) this.output.show(true);
      });
      return undefined;
    }
  }

  private setState(state: ServerState): void {
    this.state = state;
    this.stateEmitter.fire(state);
  }

  private async doStart(): Promise<void> {
    this.setState("starting");
    this.interpreter = await resolveInterpreter(vscode.window.activeTextEditor?.document.uri);
    const check = await checkServer(this.interpreter.path, this.interpreter.source, this.paths);
    if (!check.ok) {
      this.lastFailure = check;
      this.setState("failed");
      this.output.error(`Cannot start the language server: ${check.message} ${check.fix}`);
      if (this.lastShown !== check.message) void this.showFailure(check);
      this.lastShown = check.message;
      return;
    }
    this.lastFailure = this.lastShown = undefined;
    this.output.info(
      `Starting the language server with ${check.python} (Python ${check.version}, ${this.interpreter.source})`,
    );
    const folder = vscode.workspace.workspaceFolders?.[0];
    const serverOptions: ServerOptions = {
      command: this.interpreter.path,
      args: launcherArgs(this.paths),
      transport: TransportKind.stdio,
      options: { cwd: folder?.uri.fsPath, env: { ...process.env, PYTHONUNBUFFERED: "1" } },
    };
    const clientOptions: LanguageClientOptions = {
      // files, and a notebook's Python cells (the server declares LSP 3.17 notebook sync;
      // a cell's hints come from the results a kernel stored for its text: docs/notebooks.md)
      documentSelector: [
        { scheme: "file", language: "python" },
        { notebook: "*", language: "python" },
      ],
      outputChannel: this.output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationOptions: settingsPayload(this.settings()),
      // The hover's links run these two commands; no other command link is trusted.
      markdown: { isTrusted: { enabledCommands: [ClientCommand.openTimeline, ServerCommand.openExplorer] } },
      middleware: {
        // Commands the server registers (e.g. trainiumLens.openExplorer) can be run
        // from the palette with no arguments: give them the cursor's place.
        executeCommand: async (command, args, next) => {
          // Code lenses, hover links and the palette all come through here.
          const editor = vscode.window.activeTextEditor;
          const hasPayload = args.length > 0 && args[0] && typeof args[0] === "object" && "uri" in args[0];
          if (!hasPayload && editor) {
            args = [{ uri: editor.document.uri.toString(), line: editor.selection.active.line }];
          }
          const reply = await next(command, args);
          showRefusal(reply); // Restricted Mode: the server refused and says why
          return reply;
        },
      },
    };
    const client = new LanguageClient("trainiumLens", "Trainium Lens", serverOptions, clientOptions);
    this.client = client;
    this.clientDisposables.push(
      client.onNotification(Notification.runState, (p: unknown) => this.runStateEmitter.fire(p)),
    );
    this.clientDisposables.push(
      client.onNotification(Notification.worker, (p: unknown) => this.workerEmitter.fire(p)),
    );
    for (const hook of this.hooks) this.clientDisposables.push(...hook(client));
    try {
      await client.start();
      this.setState("running");
      void vscode.commands.executeCommand("setContext", "trainiumLens.serverRunning", true);
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      this.lastFailure = {
        ok: false,
        message: `the language server exited during startup (${message}).`,
        fix: "See 'Trainium Lens: Show Output' for its log.",
      };
      this.setState("failed");
      void this.showFailure(this.lastFailure);
    }
  }

  private async doStop(): Promise<void> {
    void vscode.commands.executeCommand("setContext", "trainiumLens.serverRunning", false);
    const client = this.client;
    this.client = undefined;
    for (const d of this.clientDisposables.splice(0)) d.dispose();
    if (client) {
      try {
        await client.stop(5000);
      } catch (e) {
        this.output.warn(`Stopping the language server: ${e}`);
      }
    }
    this.setState("stopped");
  }

  private async sendSettings(): Promise<void> {
    if (!this.client || this.state !== "running") return;
    await this.client.sendNotification(
      DidChangeConfigurationNotification.type,
      settingsPayload(this.settings()),
    );
  }

  private async showFailure(f: { message: string; fix: string }): Promise<void> {
    const text = `Trainium Lens cannot start: ${f.message} ${f.fix}`;
    const pick = await vscode.window.showErrorMessage(text, "Open Settings", "Show Output");
    if (pick === "Open Settings")
      void vscode.commands.executeCommand("workbench.action.openSettings", "trainiumLens.python");
    if (pick === "Show Output") this.output.show(true);
  }

  async dispose(): Promise<void> {
    if (this.restartTimer) clearTimeout(this.restartTimer);
    await this.doStop();
    for (const d of this.disposables) d.dispose();
  }
}
