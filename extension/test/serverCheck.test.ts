// Runs the real launcher (extension/src/python/launch.py) with real interpreters.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { ServerPaths, checkServer, verdict } from "../src/serverCheck";

const root = resolve(__dirname, "..", "..");
const paths: ServerPaths = {
  launcher: join(root, "extension", "src", "python", "launch.py"),
  serverPath: join(root, "server"),
  libs: join(root, "extension", "dist", "libs"),
};
const venvPython = join(root, ".venv", "bin", "python");
const emptyLibs = mkdtempSync(join(tmpdir(), "lens-nolibs-"));

test("an interpreter path that does not exist: named, with the fix", async () => {
  const r = await checkServer("/nonexistent/bin/python", "setting trainiumLens.python", paths);
  assert.equal(r.ok, false);
  if (r.ok) return;
  assert.equal(
    r.message,
    "the Python interpreter '/nonexistent/bin/python' (setting trainiumLens.python) was not found.",
  );
  assert.match(r.fix, /trainiumLens\.python/);
});

test("a file that is not executable", async () => {
  const r = await checkServer(paths.launcher, "setting trainiumLens.python", paths);
  assert.equal(r.ok, false);
  if (!r.ok) assert.match(r.message, /is not executable/);
});

test("the project's venv starts the server", { skip: !existsSync(venvPython) && "no .venv" }, async () => {
  const r = await checkServer(venvPython, "test", paths);
  assert.equal(r.ok, true, JSON.stringify(r));
  if (r.ok) assert.match(r.version, /^3\.\d+/);
});

test("an interpreter without pygls and no bundled libs: the missing module is named", async () => {
  // Debian's python3 has no pygls; an empty libs folder stands for a broken install.
  const r = await checkServer("/usr/bin/python3", "default python3 on PATH", { ...paths, libs: emptyLibs });
  if (r.ok) return; // a system python that does have pygls cannot show this
  assert.match(r.message, /cannot import its dependencies .*: (lsprotocol|pygls)\S*: ModuleNotFoundError/);
  assert.match(r.fix, /Reinstall the Trainium Lens extension/);
});

test("verdict: too old, and a crash before the check could answer", () => {
  const old = verdict("/usr/bin/python3.8", "test", {
    code: 0,
    stdout:
      '{"ok": false, "python": "/usr/bin/python3.8", "version": "3.8.10", "problem": "version", "detail": "Python 3.8.10"}\n',
    stderr: "",
  });
  assert.deepEqual(
    old.ok ? undefined : old.message,
    "the Python interpreter '/usr/bin/python3.8' (test) is Python 3.8.10; Trainium Lens needs Python 3.11 or newer.",
  );
  const crash = verdict("py", "test", {
    code: 1,
    stdout: "",
    stderr: "Traceback...\nSyntaxError: invalid syntax\n",
  });
  assert.equal(
    crash.ok ? "" : crash.message,
    "the Python interpreter 'py' (test) failed to run the server check: SyntaxError: invalid syntax.",
  );
});
