import assert from "node:assert/strict";
import { test } from "node:test";
import { normalize, runScriptArgs, scriptLaunches, substitute } from "../src/launchPick";

const ctx = { file: "/ws/tinylm/train.py", workspaceFolder: "/ws", env: { HOME: "/home/u" } };

test("variables are substituted; unknown ones stay as written", () => {
  assert.equal(substitute("${workspaceFolder}/tinylm/train.py", ctx), "/ws/tinylm/train.py");
  assert.equal(
    substitute("${fileDirname}:${fileBasename}:${relativeFile}", ctx),
    "/ws/tinylm:train.py:tinylm/train.py",
  );
  assert.equal(substitute("${env:HOME}/data ${command:pick}", ctx), "/home/u/data ${command:pick}");
  assert.equal(normalize("./tinylm/../tinylm/train.py", "/ws"), "/ws/tinylm/train.py");
});

test("only Python launch configurations whose program is this file, with their args, env and cwd", () => {
  const configs = [
    { name: "Node", type: "node", request: "launch", program: "${file}" },
    {
      name: "Other",
      type: "debugpy",
      request: "launch",
      program: "${workspaceFolder}/eval.py",
      args: ["--x"],
    },
    { name: "Attach", type: "debugpy", request: "attach", program: "${file}" },
    {
      name: "Train",
      type: "debugpy",
      request: "launch",
      program: "${workspaceFolder}/tinylm/train.py",
      args: ["--lr", "3e-4", "--out", "${workspaceFolder}/out"],
      env: { SEED: "1", WORKERS: 2 },
      cwd: "${workspaceFolder}/tinylm",
    },
    { name: "Current file", type: "python", program: "${file}", args: "--steps 6  --lr 1e-3" },
    { name: "Relative", type: "python", request: "launch", program: "tinylm/train.py" },
  ];
  const found = scriptLaunches(configs, ctx);
  assert.deepEqual(
    found.map((f) => f.name),
    ["Train", "Current file", "Relative"],
  );
  assert.deepEqual(found[0], {
    name: "Train",
    args: ["--lr", "3e-4", "--out", "/ws/out"],
    env: { SEED: "1", WORKERS: "2" },
    cwd: "/ws/tinylm",
  });
  assert.deepEqual(found[1].args, ["--steps", "6", "--lr", "1e-3"]);
  assert.equal(found[1].cwd, undefined);
  assert.deepEqual(
    scriptLaunches(configs, { ...ctx, file: "/ws/elsewhere.py" }).map((f) => f.name),
    ["Current file"],
  );
  assert.deepEqual(scriptLaunches(undefined, ctx), []);
  assert.deepEqual(scriptLaunches([null, 3, "x"], ctx), []);
});

test("the server is sent the configuration's args, env and cwd, or the file alone", () => {
  assert.deepEqual(runScriptArgs("file:///ws/t.py", undefined), { uri: "file:///ws/t.py" });
  assert.deepEqual(runScriptArgs("file:///ws/t.py", { name: "a", args: ["-x"], env: {}, cwd: "/ws" }), {
    uri: "file:///ws/t.py",
    args: ["-x"],
    env: {},
    cwd: "/ws",
  });
  assert.deepEqual(runScriptArgs("file:///ws/t.py", { name: "a", args: [], env: { K: "v" } }), {
    uri: "file:///ws/t.py",
    args: [],
    env: { K: "v" },
  });
});
