// The `Host` aliases of an OpenSSH client config, for the host quick pick.
//
// Pure logic over the file system (no `vscode`): follows `Include` (relative paths
// resolve against ~/.ssh as ssh_config(5) says, globs in the last path parts are
// expanded), skips wildcard and negated patterns (they are not hosts one can pick),
// and remembers `HostName`/`User` to describe each alias.
import { readFileSync, readdirSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute, join } from "node:path";

export interface SshHost {
  alias: string;
  hostName?: string;
  user?: string;
  file: string; // the config file that declared it
}

const MAX_DEPTH = 16; // ssh itself gives up on deeper Include chains

/** Split a config line into keyword and arguments (`Key value`, `Key=value`, quotes). */
export function tokenize(line: string): { key: string; args: string[] } | undefined {
  const trimmed = line.trim();
  if (!trimmed || trimmed.startsWith("#")) return undefined;
  const m = /^([A-Za-z][A-Za-z0-9]*)\s*(?:=\s*|\s+)(.*)$/.exec(trimmed);
  if (!m) return undefined;
  const args: string[] = [];
  const re = /"([^"]*)"|(\S+)/g;
  let part: RegExpExecArray | null;
  while ((part = re.exec(m[2])) !== null) {
    const word = part[1] ?? part[2];
    if (word.startsWith("#")) break; // trailing comment
    args.push(word);
  }
  return { key: m[1].toLowerCase(), args };
}

export function isPattern(alias: string): boolean {
  return /[*?]/.test(alias) || alias.startsWith("!");
}

function globToRegExp(glob: string): RegExp {
  const body = glob
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${body}$`);
}

/** Expand `~` and a glob (in any path part) into the existing files, sorted as ssh does. */
export function expandInclude(pattern: string, sshDir: string, home: string): string[] {
  let path = pattern.startsWith("~/") ? join(home, pattern.slice(2)) : pattern;
  if (!isAbsolute(path)) path = join(sshDir, path);
  const parts = path.split("/").filter((p) => p !== "");
  let candidates = ["/"];
  for (const part of parts) {
    const next: string[] = [];
    for (const base of candidates) {
      if (!/[*?]/.test(part)) {
        next.push(join(base, part));
        continue;
      }
      let names: string[];
      try {
        names = readdirSync(base).sort();
      } catch {
        continue;
      }
      const re = globToRegExp(part);
      for (const name of names) if (re.test(name) && !name.startsWith(".")) next.push(join(base, name));
    }
    candidates = next;
  }
  return candidates.filter((file) => {
    try {
      return statSync(file).isFile();
    } catch {
      return false;
    }
  });
}

/** All concrete `Host` aliases of `configPath` and the files it includes, in order, deduplicated. */
export function readSshHosts(configPath?: string, home: string = homedir()): SshHost[] {
  const sshDir = join(home, ".ssh");
  const hosts = new Map<string, SshHost>();
  const visiting = new Set<string>();

  const visit = (file: string, depth: number): void => {
    if (depth > MAX_DEPTH || visiting.has(file)) return;
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      return; // a missing include is not an error for ssh either
    }
    visiting.add(file);
    let current: SshHost[] = []; // the aliases the next HostName/User apply to
    for (const line of text.split(/\r?\n/)) {
      const tok = tokenize(line);
      if (!tok) continue;
      switch (tok.key) {
        case "host":
          current = [];
          for (const alias of tok.args) {
            if (isPattern(alias)) continue;
            const existing = hosts.get(alias);
            if (existing) {
              current.push(existing);
            } else {
              const host: SshHost = { alias, file };
              hosts.set(alias, host);
              current.push(host);
            }
          }
          break;
        case "match":
          current = [];
          break;
        case "hostname":
          // first value wins in ssh; only fill what is still unset
          for (const h of current) h.hostName ??= tok.args[0];
          break;
        case "user":
          for (const h of current) h.user ??= tok.args[0];
          break;
        case "include":
          for (const pattern of tok.args) {
            for (const included of expandInclude(pattern, sshDir, home)) visit(included, depth + 1);
          }
          break;
      }
    }
    visiting.delete(file);
  };

  visit(configPath && configPath.trim() ? expandHome(configPath.trim(), home) : join(sshDir, "config"), 0);
  return [...hosts.values()];
}

function expandHome(path: string, home: string): string {
  return path === "~" ? home : path.startsWith("~/") ? join(home, path.slice(2)) : path;
}

/** The quick pick's rows: "local" first, then the SSH hosts; the current one marked. */
export function hostChoices(
  hosts: SshHost[],
  current: string,
): { label: string; description: string; host: string }[] {
  const rows = [{ label: "local", description: "this machine (CPU or CUDA)", host: "local" }];
  for (const h of hosts) {
    const target = h.hostName ? `${h.user ? h.user + "@" : ""}${h.hostName}` : "";
    rows.push({ label: h.alias, description: target, host: h.alias });
  }
  return rows.map((r) =>
    r.host === current ? { ...r, description: `${r.description} (current)`.trim() } : r,
  );
}
