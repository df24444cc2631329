import assert from "node:assert/strict";
import { test } from "node:test";
import { parseRunState, statusText, statusTooltip } from "../src/runState";

test("status text names the host and shows the state as an icon", () => {
  assert.equal(statusText({ state: "running", host: "trn1" }), "$(sync~spin) Trainium: trn1");
  assert.equal(statusText({ state: "ok", host: "" }), "$(check) Trainium: local");
  assert.match(statusTooltip({ state: "error", host: "trn1", message: "cannot connect" }), /last run failed: cannot connect/);
});

test("parseRunState accepts the server's payload and rejects junk", () => {
  assert.deepEqual(parseRunState({ state: "ok", host: "trn1", message: "2.36 ms" }, "local"), {
    state: "ok",
    host: "trn1",
    message: "2.36 ms",
  });
  assert.deepEqual(parseRunState({ state: "exploded" }, "local"), { state: "idle", host: "local", message: undefined });
  assert.deepEqual(parseRunState(null, "h"), { state: "idle", host: "h", message: undefined });
});
