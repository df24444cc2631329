import assert from "node:assert/strict";
import { test } from "node:test";
import { baselineItems, commitLabel } from "../src/baselinePick";

const run = (id: string, commit: string | null, dirty = false) => ({
  run_id: id,
  created_at: "2026-11-30T10:15:00+00:00",
  commit,
  dirty,
  branch: "main",
  backend: "cpu",
  host: "local",
  clock: "cpu",
  step_us: 1520,
});

test("the newest run is the one compared: the picker offers the others, newest first", () => {
  const items = baselineItems({
    function: "block",
    runs: [run("r3", "aaaaaaa1111"), run("r2", "bbbbbbb2222", true), run("r1", null)],
  });
  assert.deepEqual(
    items.map((i) => i.runId),
    ["r2", "r1"],
  );
  assert.equal(items[0].label, "2026-11-30 10:15 UTC · bbbbbbb+dirty");
  assert.match(items[0].description, /^1\.52 ms cpu$/);
  assert.equal(items[0].detail, "cpu@local · main · r2");
  assert.equal(commitLabel(run("x", null)), "no commit");
});

test("no history, one run, or junk: nothing to pick", () => {
  assert.deepEqual(baselineItems(undefined), []);
  assert.deepEqual(baselineItems({ runs: [run("r1", "c")] }), []);
  assert.deepEqual(baselineItems({}), []);
});
