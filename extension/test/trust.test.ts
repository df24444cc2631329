import { strict as assert } from "node:assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ServerCommand } from "../src/protocol";
import { RESTRICTED_COMMANDS, refusal } from "../src/trustPolicy";

test("Restricted Mode refuses profiling and Explorer, saying why; a trusted workspace runs them", () => {
  assert.deepEqual(
    [...RESTRICTED_COMMANDS].sort(),
    [ServerCommand.openExplorer, ServerCommand.profile, ServerCommand.runScript].sort(),
  );
  assert.equal(refusal(ServerCommand.runScript, false), refusal(ServerCommand.profile, false));
  const profile = refusal(ServerCommand.profile, false);
  assert.match(profile ?? "", /profiling is off in Restricted Mode: it runs this workspace's code/);
  assert.match(
    refusal(ServerCommand.openExplorer, false) ?? "",
    /Neuron Explorer is off in Restricted Mode: .*SSH tunnel/,
  );
  for (const command of RESTRICTED_COMMANDS) assert.equal(refusal(command, true), undefined);
  // Reading stored results runs nothing: allowed either way.
  assert.equal(refusal(ServerCommand.compareWithPrevious, false), undefined);
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
