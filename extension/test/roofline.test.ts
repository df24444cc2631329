import assert from "node:assert/strict";
import { test } from "node:test";
import { escapeHtml } from "../src/panel/html";
import { RoofData, chartScale, rooflineSection, rooflineSvg } from "../src/panel/roofline";

const data: RoofData = {
  roof: {
    device: "Test CPU <b>",
    source: "measured on this host",
    measured: true,
    flops: [
      { dtype: "float32", flops_per_s: 1e11 },
      { dtype: "bfloat16", flops_per_s: 2e11 },
    ],
    bytes_per_s: 1e10,
  },
  points: [
    {
      file: "m.py",
      line: 7,
      text: "y = a @ a",
      phase: "forward",
      dtype: "float32",
      flops: 5e6,
      bytes: 1e3,
      time_us: 100,
      flops_per_s: 5e10,
      bytes_per_s: 1e7,
      intensity: 5000,
      pct_of_peak: 50,
      bound: "compute",
      verdict: "compute-bound",
    },
    {
      file: "m.py",
      line: 7,
      text: "y = a @ a",
      phase: "backward",
      dtype: "float32",
      flops: 1e7,
      bytes: 2e3,
      time_us: 400,
      flops_per_s: 2.5e10,
      bytes_per_s: 5e6,
      intensity: 5000,
      pct_of_peak: 25,
      bound: "compute",
      verdict: "compute-bound",
    },
    {
      file: "m.py",
      line: 8,
      text: "z = torch.tanh(y) <script>",
      phase: "forward",
      dtype: "float32",
      flops: 0,
      bytes: 5e5,
      time_us: 100,
      flops_per_s: 0,
      bytes_per_s: 5e9,
      intensity: 0,
      pct_of_peak: 50,
      bound: "memory",
      verdict: "memory-bound",
    },
  ],
  mfu: { mfu: 0.3, flops: 1.5e7, time_us: 500, basis: "unprofiled wall time", dtype: "float32" },
  work: { source: "shapes", note: "" },
  memory: {
    available: true,
    device: "cpu",
    peak_bytes: 4 * 2 ** 20,
    peak_phase: "backward",
    held_before_bytes: null,
    saved_bytes: 3 * 2 ** 20,
    note: null,
    lines: [
      {
        file: "m.py",
        line: 7,
        text: "y = a @ a",
        peak_bytes: 2 ** 20,
        saved_bytes: 3 * 2 ** 20,
        saved_activation_bytes: 2 ** 20,
        alloc_bytes: 2 ** 20,
      },
    ],
  },
};

test("the chart's axes hold every point and the ridge points", () => {
  const s = chartScale(data)!;
  assert.ok(s.x0 <= Math.log10(5000) && s.x1 >= Math.log10(5000));
  assert.ok(s.x0 <= Math.log10(10) && s.y1 >= Math.log10(2e11)); // ridge of float32 = 10 FLOP/B
  const x = s.x(5000);
  assert.ok(x > s.x(10) && s.y(5e10) < s.y(2.5e10)); // more FLOP/s is higher up
});

test("one clickable point per line and phase with FLOPs, under the roof", () => {
  const svg = rooflineSvg(data, escapeHtml);
  const points = [...svg.matchAll(/<circle class="reveal point ([^"]+)"[^>]*data-line="(\d+)"/g)];
  assert.deepEqual(
    points.map((m) => [m[2], m[1]]),
    [
      ["7", "compute-bound"],
      ["7", "compute-bound backward"],
    ],
  );
  assert.equal((svg.match(/<path class="roof/g) ?? []).length, 2); // a ceiling per dtype
  assert.ok(svg.includes("float32 100 GFLOP/s") && svg.includes("bfloat16 200 GFLOP/s"));
  assert.ok(!svg.includes("style="), "no inline styles: the panel's CSP forbids them");
});

test("the section: roof and source, MFU, bandwidth-only lines, memory; stored text escaped", () => {
  const html = rooflineSection(data, "CPU self time", escapeHtml);
  assert.ok(html.includes("Test CPU &lt;b&gt;: measured on this host"));
  assert.ok(html.includes("Function MFU <b>30%</b> of the float32 peak"));
  assert.ok(html.includes('<table id="bandwidth">') && html.includes("torch.tanh(y) &lt;script&gt;"));
  assert.ok(html.includes('<table id="memory">') && html.includes("Peak <b>4 MiB</b>"));
  assert.ok(!html.includes("<script>"));
});

test("no roof, no memory, nothing measured", () => {
  const noRoof = rooflineSection({ ...data, roof: null, mfu: null }, "CPU self time", escapeHtml);
  assert.ok(noRoof.includes("No peak known for this device"));
  const unavailable = rooflineSection(
    { ...data, points: [], memory: { ...data.memory!, available: false, note: "not available here" } },
    "x",
    escapeHtml,
  );
  assert.ok(unavailable.includes("not available here"));
  assert.equal(rooflineSection(null, "x", escapeHtml), "");
});
