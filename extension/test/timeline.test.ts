// node --test: the timeline's pure model (no DOM, no vscode).
import test from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
// eslint-disable-next-line @typescript-eslint/no-require-imports
const M = require("../media/timeline/model.js");

/** A payload like the server sends: one lane, one row, events [start, dur, src]. */
type Ev = [number, number, number];
type Rect = { x: number; w: number; i: number; hl: boolean };

function payload(events: Ev[], extra?: object) {
  return Object.assign(
    {
      lanes: [{ name: "ATen ops", kind: "ops", rows: 1 }],
      names: ["aten::mul", "aten::add"],
      sources: [
        ["a.py", 3],
        ["a.py", 4],
      ],
      events: {
        lane: events.map(() => 0),
        depth: events.map(() => 0),
        start: events.map((e) => e[0]),
        dur: events.map((e) => e[1]),
        name: events.map((_, i) => i % 2),
        src: events.map((e) => e[2]),
      },
      focus: null,
      focusSrc: -1,
    },
    extra || {},
  );
}

function collect(track: unknown, ta: number, tb: number, width: number): Rect[] {
  const out: Rect[] = [];
  M.visitTrack(track, ta, tb, width, (x: number, w: number, _t: unknown, i: number, hl: boolean) =>
    out.push({ x, w, i, hl }),
  );
  return out;
}

test("lowerBound finds the first element not below the value", () => {
  const a = Float64Array.from([1, 2, 2, 5, 9]);
  assert.equal(M.lowerBound(a, 0), 0);
  assert.equal(M.lowerBound(a, 2), 1);
  assert.equal(M.lowerBound(a, 3), 3);
  assert.equal(M.lowerBound(a, 10), 5);
});

test("only visible events are visited, each wide one on its own", () => {
  const m = M.buildModel(
    payload([
      [0, 10, 0],
      [20, 10, 1],
      [40, 10, 0],
      [60, 10, 1],
    ]),
  );
  const r = collect(m.tracks[0], 15, 45, 300); // 10 px per µs
  assert.deepEqual(
    r.map((e) => e.i),
    [1, 2],
  );
  assert.equal(r[0].x, 50);
  assert.equal(r[0].w, 100);
});

test("sub-pixel events merge per pixel column, and touching columns into one run", () => {
  // 10,000 events of 0.01 µs, 0.1 µs apart: 1,000 µs over 100 px = 10 µs per px.
  const evs: Ev[] = [];
  for (let k = 0; k < 10000; k++) evs.push([k * 0.1, 0.01, -1]);
  const m = M.buildModel(payload(evs));
  const r = collect(m.tracks[0], 0, 1000, 100);
  assert.equal(r.length, 1);
  assert.equal(r[0].i, -1);
  assert.ok(r[0].x === 0 && r[0].w >= 99 && r[0].w <= 101);
  // With a gap every other column, each column stays its own rectangle.
  const gaps: Ev[] = [];
  for (let c = 0; c < 100; c += 2) for (let k = 0; k < 5; k++) gaps.push([c * 10 + k, 0.01, -1]);
  const g = collect(M.buildModel(payload(gaps)).tracks[0], 0, 1000, 100);
  assert.equal(g.length, 50);
  assert.ok(g.every((e) => e.w >= 1 && e.w < 2));
});

test("a wide event after a run of tiny ones is still drawn on its own", () => {
  const m = M.buildModel(
    payload([
      [0, 0.01, -1],
      [0.02, 0.01, -1],
      [0.05, 50, 1],
    ]),
  );
  const r = collect(m.tracks[0], 0, 100, 100);
  assert.equal(r.length, 2);
  assert.equal(r[1].i, 2);
  assert.ok(r[1].w >= 49);
});

test("highlight follows the focus line, also inside merged runs", () => {
  const evs: Ev[] = [];
  for (let k = 0; k < 1000; k++) evs.push([k, 0.1, k === 500 ? 1 : 0]);
  const m = M.buildModel(payload(evs, { focusSrc: 1 }));
  const r = collect(m.tracks[0], 0, 1000, 10); // 100 µs per px: all merged
  assert.equal(r.filter((e) => e.hl).length, 1);
  assert.equal(r.find((e) => e.hl)?.x, 5);
  assert.equal(r.find((e) => e.hl)?.w, 1); // one column, drawn over the plain run
  assert.deepEqual(
    r.map((e) => e.hl),
    [false, true],
  );
  assert.ok(r[0].x === 0 && r[0].w >= 10);
  M.setHighlight(m, -1);
  assert.equal(collect(m.tracks[0], 0, 1000, 10).filter((e) => e.hl).length, 0);
});

test("hit test finds the event under a time, within slack", () => {
  const m = M.buildModel(
    payload([
      [0, 10, 0],
      [20, 10, 1],
    ]),
  );
  assert.equal(M.hitTest(m.tracks[0], 25, 0), 1);
  assert.equal(M.hitTest(m.tracks[0], 15, 0), -1);
  assert.equal(M.hitTest(m.tracks[0], 11, 2), 0);
  const d = M.describe(m, 1);
  assert.deepEqual([d.name, d.file, d.line], ["aten::add", "a.py", 4]);
});

test("events given out of order are sorted per track", () => {
  const m = M.buildModel(
    payload([
      [40, 5, 0],
      [0, 5, 0],
      [20, 5, 0],
    ]),
  );
  assert.deepEqual(Array.from(m.tracks[0].start), [0, 20, 40]);
  assert.deepEqual(Array.from(m.tracks[0].index), [1, 2, 0]);
});

test("the view opens on the focus window and zoom keeps the point under the mouse", () => {
  const m = M.buildModel(
    payload(
      [
        [0, 10, 0],
        [1000, 10, 1],
      ],
      { focus: { start: 1000, end: 1010 } },
    ),
  );
  const v = M.initialView(m);
  assert.ok(v.ta < 1000 && v.tb > 1010 && v.tb - v.ta <= 20);
  const z = M.zoom({ ta: 0, tb: 100 }, 0.5, 25, m);
  assert.equal(z.tb - z.ta, 50);
  assert.equal((25 - z.ta) / (z.tb - z.ta), 0.25);
});

test("ticks step by 1, 2 or 5 and durations read naturally", () => {
  assert.deepEqual(M.ticks(0, 1000, 1000, 100), [0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]);
  assert.equal(M.ticks(0, 1000, 500, 100)[1], 200);
  assert.equal(M.formatUs(12.34), "12.3 µs");
  assert.equal(M.formatUs(1500), "1.5 ms");
  assert.equal(M.formatUs(0.25), "250 ns");
});

test("the timeline's durations read as the server writes them (the shared sample table)", () => {
  const samples = JSON.parse(
    readFileSync(join(process.cwd(), "tests", "data", "figure_samples.json"), "utf8"),
  );
  const rows = samples.time_us as [number | null, string][];
  assert.deepEqual(
    rows.map(([value]) => [value, M.formatUs(value)]),
    rows,
  );
});

test("a backward event names the forward line that caused it", () => {
  const p = payload([
    [0, 10, 0],
    [20, 10, 0],
  ]);
  (p.events as Record<string, number[]>).phase = [0, 1];
  const m = M.buildModel(p);
  const fwd = M.describe(m, 0);
  const bwd = M.describe(m, 1);
  assert.equal(fwd.phase, null);
  assert.deepEqual([bwd.phase, bwd.file, bwd.line], ["backward", "a.py", 3]);
  // an older payload (no phase column) reads as forward
  assert.equal(M.describe(M.buildModel(payload([[0, 10, 0]])), 0).phase, null);
});
