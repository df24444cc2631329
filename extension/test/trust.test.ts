import { strict as assert } from "node:assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { UNTRUSTED, refusalText } from "../src/trustPolicy";

test("Restricted Mode: the client shows the server's refusal, and only a refusal", () => {
  const why = "Trainium Lens: profiling is off in Restricted Mode: the server's words";
  assert.equal(refusalText({ run_ids: [], error: why, kind: UNTRUSTED }), why);
  // Another error is the server's to show (it does): not a trust refusal.
  assert.equal(refusalText({ error: "f is not marked", kind: "usage" }), undefined);
  for (const reply of [undefined, null, "untrusted", { kind: UNTRUSTED }, { kind: UNTRUSTED, error: "" }])
    assert.equal(refusalText(reply), undefined);
});

test("every setting that names something to run or connect to is restricted in package.json", () => {
  const pkg = JSON.parse(readFileSync(join(__dirname, "..", "..", "package.json"), "utf8"));
  const trust = pkg.capabilities.untrustedWorkspaces;
  assert.equal(trust.supported, "limited");
  const restricted = new Set<string>(trust.restrictedConfigurations);
  for (const key of [
    "python",
    "remotePython",
    "sshConfig",
    "host",
    "workDir",
    "explorer.path",
    "explorer.urlTemplate",
  ]) {
    assert.ok(restricted.has(`trainiumLens.${key}`), key);
  }
  // ...and each names a real setting.
  const settings = Object.keys(pkg.contributes.configuration.properties);
  for (const key of restricted) assert.ok(settings.includes(key), key);
});
