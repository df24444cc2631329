import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { expandInclude, hostChoices, readSshHosts, tokenize } from "../src/sshConfig";

function fakeHome(files: Record<string, string>): string {
  const home = mkdtempSync(join(tmpdir(), "lens-ssh-"));
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(join(home, rel, ".."), { recursive: true });
    writeFileSync(join(home, rel), text);
  }
  return home;
}

test("tokenize: Key value, Key=value, quotes, comments", () => {
  assert.deepEqual(tokenize("  Host trn1 trn2  # two"), { key: "host", args: ["trn1", "trn2"] });
  assert.deepEqual(tokenize("HostName=ec2-1.compute.amazonaws.com"), {
    key: "hostname",
    args: ["ec2-1.compute.amazonaws.com"],
  });
  assert.deepEqual(tokenize('Include "my configs/*.conf"'), { key: "include", args: ["my configs/*.conf"] });
  assert.equal(tokenize("# only a comment"), undefined);
  assert.equal(tokenize("   "), undefined);
});

test("hosts of a config with Include, wildcards skipped, HostName/User kept", () => {
  const home = fakeHome({
    ".ssh/config": [
      "Host *",
      "  ServerAliveInterval 30",
      "Host trn1 trn1-alias",
      "  HostName ec2-3-1-2-3.compute.amazonaws.com",
      "  User ubuntu",
      "Include config.d/*",
      "Host !bastion *.internal dev?",
      "Match host foo",
      "  User nobody",
      "Host=gpu-box",
      "  HostName 10.0.0.7",
      "  HostName ignored-second-value",
    ].join("\n"),
    ".ssh/config.d/10-inf2": "Host inf2\n  HostName inf2.example\n  User ec2-user\nInclude ~/.ssh/config\n",
    ".ssh/config.d/20-trn2": "Host trn2\n",
    ".ssh/config.d/.hidden": "Host hidden\n",
  });
  const hosts = readSshHosts(undefined, home);
  assert.deepEqual(
    hosts.map((h) => [h.alias, h.hostName, h.user]),
    [
      ["trn1", "ec2-3-1-2-3.compute.amazonaws.com", "ubuntu"],
      ["trn1-alias", "ec2-3-1-2-3.compute.amazonaws.com", "ubuntu"],
      ["inf2", "inf2.example", "ec2-user"],
      ["trn2", undefined, undefined],
      ["gpu-box", "10.0.0.7", undefined],
    ],
  );
  assert.equal(hosts[2].file, join(home, ".ssh/config.d/10-inf2"));
});

test("an explicit config path, a missing one, an absolute Include", () => {
  const home = fakeHome({ "elsewhere/extra": "Host extra\n", cfg: "" });
  writeFileSync(
    join(home, "cfg"),
    `Host a\nInclude ${join(home, "elsewhere/extra")}\nInclude does-not-exist\n`,
  );
  assert.deepEqual(
    readSshHosts(join(home, "cfg"), home).map((h) => h.alias),
    ["a", "extra"],
  );
  assert.deepEqual(readSshHosts(join(home, "nope"), home), []);
  assert.deepEqual(readSshHosts(undefined, home), []); // no ~/.ssh/config at all
});

test("expandInclude: globs in directory parts, sorted, files only", () => {
  const home = fakeHome({ ".ssh/a/x.conf": "", ".ssh/b/x.conf": "", ".ssh/b/y.txt": "" });
  mkdirSync(join(home, ".ssh/c.conf"));
  const got = expandInclude("*/x.conf", join(home, ".ssh"), home);
  assert.deepEqual(got, [join(home, ".ssh/a/x.conf"), join(home, ".ssh/b/x.conf")]);
  assert.deepEqual(expandInclude("~/.ssh/*.conf", join(home, ".ssh"), home), []);
});

test("hostChoices: local first, current marked, user@hostname described", () => {
  const rows = hostChoices(
    [
      { alias: "trn1", hostName: "h", user: "u", file: "f" },
      { alias: "bare", file: "f" },
    ],
    "trn1",
  );
  assert.deepEqual(
    rows.map((r) => r.host),
    ["local", "trn1", "bare"],
  );
  assert.equal(rows[1].description, "u@h (current)");
  assert.equal(rows[2].description, "");
  assert.equal(rows[0].description, "this machine (CPU or CUDA)");
});
