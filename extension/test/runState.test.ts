import assert from "node:assert/strict";
import { test } from "node:test";
import { parseRunState, statusText, statusTooltip, workerNote } from "../src/runState";

test("status text names the host and shows the state as an icon", () => {
  assert.equal(statusText({ state: "running", host: "trn1" }), "$(sync~spin) Trainium: trn1");
  assert.equal(statusText({ state: "ok", host: "" }), "$(check) Trainium: local");
  assert.match(
    statusTooltip({ state: "error", host: "trn1", message: "cannot connect" }),
    /last run failed: cannot connect/,
  );
});

test("parseRunState accepts the server's payload and rejects junk", () => {
  assert.deepEqual(parseRunState({ state: "ok", host: "trn1", message: "2.36 ms" }, "local"), {
    state: "ok",
    host: "trn1",
    message: "2.36 ms",
  });
  assert.deepEqual(parseRunState({ state: "exploded" }, "local"), {
    state: "idle",
    host: "local",
    message: undefined,
  });
  assert.deepEqual(parseRunState(null, "h"), { state: "idle", host: "h", message: undefined });
});

test("a warm worker shows as a flame and a tooltip line naming its host", () => {
  const note = workerNote({ state: "warm", host: "trn1", pid: 42, idle_s: 300 });
  assert.equal(note.text, " $(flame)");
  assert.match(note.tooltip, /warm worker is held on trn1 \(ends after 300 s idle\).*Release Warm Worker/);
  assert.deepEqual(workerNote({ state: "none", host: "trn1" }), { text: "", tooltip: "" });
  assert.deepEqual(workerNote(null), { text: "", tooltip: "" });
});
