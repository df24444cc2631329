// "Profile Script…": which `.vscode/launch.json` configurations run this file,
// with the args, env and cwd they give it (pure: no `vscode` import, tested with
// node --test). A Python launch configuration names the file when its `program`,
// with VS Code's variables substituted, is the file's path (`${file}` always is).

export interface ScriptLaunch {
  name: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
}

export interface LaunchContext {
  file: string; // the script's absolute path
  workspaceFolder: string; // the folder the launch.json belongs to
  env?: Record<string, string | undefined>; // for ${env:NAME}
}

const PYTHON_TYPES = new Set(["python", "debugpy"]);

/** `${file}`, `${workspaceFolder}`, `${fileDirname}`, … replaced; unknown variables are left as written. */
export function substitute(text: string, ctx: LaunchContext): string {
  const slash = ctx.file.lastIndexOf("/");
  const dirname = slash > 0 ? ctx.file.slice(0, slash) : "/";
  const basename = ctx.file.slice(slash + 1);
  const folder = ctx.workspaceFolder.replace(/\/+$/, "");
  const relative = ctx.file.startsWith(folder + "/") ? ctx.file.slice(folder.length + 1) : ctx.file;
  const vars: Record<string, string> = {
    file: ctx.file,
    fileDirname: dirname,
    fileBasename: basename,
    fileBasenameNoExtension: basename.replace(/\.[^.]*$/, ""),
    relativeFile: relative,
    workspaceFolder: folder,
    workspaceRoot: folder,
    workspaceFolderBasename: folder.slice(folder.lastIndexOf("/") + 1),
    cwd: folder,
  };
  return text.replace(/\$\{([^}]+)\}/g, (whole, name: string) => {
    if (name.startsWith("env:")) return ctx.env?.[name.slice(4)] ?? "";
    return vars[name] ?? whole;
  });
}

/** `a/./b/../c` → `a/c`; a relative path is taken from the workspace folder. */
export function normalize(path: string, base: string): string {
  const full = path.startsWith("/") ? path : `${base.replace(/\/+$/, "")}/${path}`;
  const out: string[] = [];
  for (const part of full.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") out.pop();
    else out.push(part);
  }
  return "/" + out.join("/");
}

/** The Python launch configurations whose `program` is `ctx.file`, in launch.json's order. */
export function scriptLaunches(configurations: unknown, ctx: LaunchContext): ScriptLaunch[] {
  if (!Array.isArray(configurations)) return [];
  const file = normalize(ctx.file, ctx.workspaceFolder);
  const out: ScriptLaunch[] = [];
  for (const raw of configurations) {
    if (!raw || typeof raw !== "object") continue;
    const c = raw as Record<string, unknown>;
    if (!PYTHON_TYPES.has(String(c.type)) || (c.request ?? "launch") !== "launch") continue;
    if (typeof c.program !== "string") continue;
    if (normalize(substitute(c.program, ctx), ctx.workspaceFolder) !== file) continue;
    const args = Array.isArray(c.args)
      ? c.args.filter((a): a is string => typeof a === "string").map((a) => substitute(a, ctx))
      : typeof c.args === "string"
        ? substitute(c.args, ctx).split(/\s+/).filter(Boolean)
        : [];
    const env: Record<string, string> = {};
    if (c.env && typeof c.env === "object") {
      for (const [k, v] of Object.entries(c.env as Record<string, unknown>)) {
        if (typeof v === "string") env[k] = substitute(v, ctx);
        else if (typeof v === "number" || typeof v === "boolean") env[k] = String(v);
      }
    }
    const launch: ScriptLaunch = { name: typeof c.name === "string" ? c.name : "(unnamed)", args, env };
    if (typeof c.cwd === "string" && c.cwd)
      launch.cwd = normalize(substitute(c.cwd, ctx), ctx.workspaceFolder);
    out.push(launch);
  }
  return out;
}

/** What `trainiumLens.runScript` is sent: without a configuration, just the file (the server then uses trainiumLens.script.args). */
export function runScriptArgs(uri: string, launch: ScriptLaunch | undefined): Record<string, unknown> {
  if (!launch) return { uri };
  return { uri, args: launch.args, env: launch.env, ...(launch.cwd ? { cwd: launch.cwd } : {}) };
}
