import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { expandPath, serverSettings, settingsPayload } from "../src/settings";
import { PAYLOAD_KEYS } from "../src/settingsKeys";

const from = (values: Record<string, unknown>) => (key: string) => values[key];

test("nothing set: only the resolved interpreter is sent (the server has the defaults)", () => {
  assert.deepEqual(serverSettings(from({}), "/usr/bin/python3"), { python: "/usr/bin/python3" });
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

test("values go as the user set them: the server parses, holds the ranges and warns", () => {
  const raw = {
    host: "  trn1 ",
    backend: "tpu",
    wait: 2.6,
    warmup: -3,
    active: 0,
    hintThreshold: "2%",
    historySize: 0,
    timeoutSeconds: "soon",
    nproc: -1,
    warmWorker: { idleSeconds: -5 },
    include: [" transformers.models.llama ", "", 3],
  };
  assert.deepEqual(serverSettings(from(raw), "py"), { ...raw, python: "py" });
});

test("sshConfig: VS Code's path variables are expanded (only the client knows the folder)", () => {
  const s = serverSettings(from({ sshConfig: "${workspaceFolder}/ssh_config" }), "py", "/ws");
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
