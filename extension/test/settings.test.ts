import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { expandPath, serverSettings, settingsPayload } from "../src/settings";
import { PAYLOAD_KEYS } from "../src/settingsKeys";

const from = (values: Record<string, unknown>) => (key: string) => values[key];

test("defaults when nothing is set", () => {
  assert.deepEqual(serverSettings(from({}), "/usr/bin/python3"), {
    host: "local",
    sshConfig: "",
    remotePython: "",
    workDir: "",
    backend: "auto",
    wait: null,
    warmup: null,
    active: null,
    hintThreshold: 0,
    historySize: 20,
    timeoutSeconds: 3600,
    python: "/usr/bin/python3",
    warmWorker: { idleSeconds: 300 },
    nproc: 0,
  });
});

test("nproc: ranks under torchrun, sent as set (0: the marker decides), clamped", () => {
  assert.equal(serverSettings(from({ nproc: 4 }), "py").nproc, 4);
  assert.equal(serverSettings(from({ nproc: -1 }), "py").nproc, 0);
  assert.equal(serverSettings(from({ nproc: "two" }), "py").nproc, 0);
});

test("every key the server reads is sent, from package.json's settings (trusted: trust.ts adds it)", () => {
  // npm runs the tests from the repository root.
  const pkg = JSON.parse(readFileSync(join(process.cwd(), "package.json"), "utf8"));
  const declared: Record<string, { default?: unknown }> = pkg.contributes.configuration.properties;
  const values: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(declared)) {
    const key = name.slice("trainiumLens.".length);
    values[key] = Array.isArray(schema.default) ? ["torch.nn.functional"] : schema.default;
    const [parent, child] = key.split(".");
    if (child) values[parent] = { ...(values[parent] as object), [child]: schema.default };
  }
  const sent = Object.keys(serverSettings(from(values), "py")).sort();
  assert.deepEqual(
    sent,
    PAYLOAD_KEYS.filter((k) => k !== "trusted"),
  );
});

test("the warm worker's idle seconds: 0 turns it off, junk falls back", () => {
  assert.deepEqual(serverSettings(from({ "warmWorker.idleSeconds": 0 }), "py").warmWorker, {
    idleSeconds: 0,
  });
  assert.deepEqual(serverSettings(from({ "warmWorker.idleSeconds": -5 }), "py").warmWorker, {
    idleSeconds: 0,
  });
  assert.deepEqual(serverSettings(from({ "warmWorker.idleSeconds": "x" }), "py").warmWorker, {
    idleSeconds: 300,
  });
});

test("values are trimmed, clamped, and junk falls back", () => {
  const s = serverSettings(
    from({
      host: "  trn1 ",
      backend: "tpu",
      wait: 2.6,
      warmup: -3,
      active: 0,
      hintThreshold: "2%",
      historySize: 0,
      timeoutSeconds: "soon",
      sshConfig: "${workspaceFolder}/ssh_config",
    }),
    "py",
    "/ws",
  );
  assert.equal(s.host, "trn1");
  assert.equal(s.backend, "auto");
  assert.deepEqual([s.wait, s.warmup, s.active], [3, 0, 1]);
  assert.equal(s.hintThreshold, "2%");
  assert.equal(s.historySize, 1);
  assert.equal(s.timeoutSeconds, 3600);
  assert.equal(s.sshConfig, "/ws/ssh_config");
});

test("payload is keyed by section, as the server's settings.section_of reads it", () => {
  const s = serverSettings(from({ host: "trn1" }), "py");
  assert.deepEqual(Object.keys(settingsPayload(s)), ["settings"]);
  assert.equal(settingsPayload(s).settings.trainiumLens.host, "trn1");
});

test("expandPath: ~, ${userHome}, ${workspaceFolder}", () => {
  assert.equal(expandPath("~/venv/bin/python", "/ws", "/home/me"), "/home/me/venv/bin/python");
  assert.equal(expandPath("${userHome}/x", undefined, "/home/me"), "/home/me/x");
  assert.equal(expandPath(" ${workspaceFolder}/.venv/bin/python ", "/ws", "/h"), "/ws/.venv/bin/python");
  assert.equal(expandPath("${workspaceFolder}/p", undefined, "/h"), "${workspaceFolder}/p");
});

test("include: installed packages whose lines get figures, sent only when set", () => {
  assert.deepEqual(serverSettings(from({ include: [" transformers.models.llama ", "", 3] }), "py").include, [
    "transformers.models.llama",
  ]);
  assert.equal("include" in serverSettings(from({ include: [] }), "py"), false);
});
