// The panel's figures read exactly as the server writes them: both suites assert the
// same sample table (tests/data/figure_samples.json; tests/unit/model/test_figures.py).
import { strict as assert } from "node:assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { KINDS, shownText, timeUs } from "../src/panel/figures";

const samples = JSON.parse(readFileSync(join(process.cwd(), "tests", "data", "figure_samples.json"), "utf8"));

test("the sample table names every kind the panel formats", () => {
  assert.deepEqual(
    Object.keys(samples)
      .filter((k) => k !== "_about")
      .sort(),
    Object.keys(KINDS).sort(),
  );
});

for (const kind of Object.keys(KINDS)) {
  test(`${kind}: each sample reads as the server writes it`, () => {
    const rows = samples[kind] as [number | null, string][];
    assert.deepEqual(
      rows.map(([value]) => [value, KINDS[kind](value)]),
      rows,
    );
  });
}

test("the server's text wins over the client's formatting", () => {
  assert.equal(
    shownText({ self_time_us: 2.5, shown: { self_time_us: "server text" } }, "self_time_us", timeUs),
    "server text",
  );
  assert.equal(shownText({ self_time_us: 0.004 }, "self_time_us", timeUs), "4 ns");
  assert.equal(shownText(undefined, "self_time_us", timeUs), "–");
});
