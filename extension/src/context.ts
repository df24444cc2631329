// What every feature module receives: register yourself from `extension.ts`'s list.
import * as vscode from "vscode";
import type { ServerManager } from "./serverManager";

export interface LensContext {
  extension: vscode.ExtensionContext;
  servers: ServerManager;
  output: vscode.LogOutputChannel;
}

export type Feature = (ctx: LensContext) => void;
