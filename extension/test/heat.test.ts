import assert from "node:assert/strict";
import { test } from "node:test";
import { HEAT_BUCKETS, bucketLines, bucketOf, gutterSvg, unreliableLines } from "../src/heat";

test("bucketOf: 0 means nothing drawn, 1..5 by intensity", () => {
  assert.deepEqual(
    [0, -1, Number.NaN, 0.001, 0.2, 0.21, 0.5, 0.99, 1, 7].map(bucketOf),
    [0, 0, 0, 1, 1, 2, 3, 5, 5, 5],
  );
});

test("bucketLines: every bucket present, stale/out-of-range/duplicate lines dropped", () => {
  const buckets = bucketLines(
    [
      { line: 9, intensity: 1 },
      { line: 4, intensity: 0.3 },
      { line: 2, intensity: 0.95 },
      { line: 5, intensity: 1, stale: true },
      { line: 4, intensity: 1 }, // duplicate: the first wins
      { line: 40, intensity: 1 }, // past the end of the document
      { line: 6, intensity: 0 },
      { line: -1, intensity: 1 },
    ],
    20,
  );
  assert.equal(buckets.length, HEAT_BUCKETS + 1);
  assert.deepEqual(buckets, [[], [], [4], [], [], [2, 9]]);
});

test("bucketLines of nothing clears every bucket", () => {
  assert.deepEqual(bucketLines([]), [[], [], [], [], [], []]);
});

test("gutterSvg: a data URI whose bar widens with the bucket", () => {
  const width = (b: number) =>
    Number(/width="(\d+)" height="16" fill/.exec(decodeURIComponent(gutterSvg(b, "#ff5a1f")))![1]);
  assert.ok(gutterSvg(3, "#ff5a1f").startsWith("data:image/svg+xml;utf8,"));
  assert.ok(width(1) < width(3) && width(3) < width(5));
});

test("a noisy run's lines are drawn apart from the heat, never as hot or cool", () => {
  const lines = [
    { line: 3, intensity: 1, unreliable: true },
    { line: 1, intensity: 0.5, unreliable: true },
    { line: 7, intensity: 0.5 },
    { line: 5, intensity: 1, unreliable: true, stale: true },
    { line: 30, intensity: 1, unreliable: true },
  ];
  assert.deepEqual(unreliableLines(lines, 20), [1, 3]);
  assert.deepEqual(bucketLines(lines, 20), [[], [], [], [7], [], []]);
  assert.deepEqual(unreliableLines([{ line: 2, intensity: 1 }]), []);
});
