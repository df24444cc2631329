import assert from "node:assert/strict";
import { test } from "node:test";
import {
  RunData,
  ResultDoc,
  currentLine,
  formatCell,
  genericTable,
  sortedFindings,
  sortedOps,
} from "../src/panel/format";
import { contentSecurityPolicy, escapeHtml, makeNonce, renderBody, renderPage } from "../src/panel/html";

const result: ResultDoc = {
  run_id: "20261129-101500-3f2a-0",
  backend: "cpu",
  clock: "cpu",
  host: "local",
  function: { file: "examples/rmsnorm.py", name: "rms_norm_naive", line: 20 },
  totals: { self_time_us: 1000, wall_us_median: 1500, steps: 5 },
  ops: [
    { name: "aten::pow", calls: 1, self_time_us: 200 },
    { name: "aten::mul", calls: 2, self_time_us: 500 },
    { name: "aten::mean", calls: 1, self_time_us: 300 },
  ],
  lines: [
    {
      file: "examples/rmsnorm.py",
      line: 22,
      self_time_us: 300,
      calls: 2,
      text: "    v = x.pow(2).mean(-1, keepdim=True)",
      ops: [],
    },
    {
      file: "examples/rmsnorm.py",
      line: 23,
      self_time_us: 700,
      calls: 2.5,
      text: "    return x * torch.rsqrt(v) * w <script>",
      ops: [{ name: "aten::mul", calls: 2, self_time_us: 500 }],
    },
  ],
  findings: [
    { kind: "x", severity: "info", file: "examples/rmsnorm.py", line: 22, message: "later" },
    {
      kind: "dispatches",
      severity: "warning",
      file: "examples/rmsnorm.py",
      line: 23,
      message: "3 dispatches <b>",
    },
  ],
};

test("ops sorted by self time, findings by severity", () => {
  assert.deepEqual(
    sortedOps(result).map((o) => o.name),
    ["aten::mul", "aten::mean", "aten::pow"],
  );
  assert.deepEqual(
    sortedFindings(result).map((f) => f.severity),
    ["warning", "info"],
  );
});

test("the body: op table hottest first, lines clickable, user text escaped", () => {
  const html = renderBody({ result });
  const ops = html.slice(html.indexOf('<table id="ops">'));
  assert.ok(ops.indexOf("aten::mul") < ops.indexOf("aten::mean"));
  assert.match(html, /<tr class="reveal" tabindex="0" data-file="examples\/rmsnorm.py" data-line="23">/);
  assert.ok(!html.includes("<script>") && html.includes("&lt;script&gt;"));
  assert.ok(html.includes("3 dispatches &lt;b&gt;"));
  assert.match(html, /CPU self time/); // a CPU run never reads as device time
  assert.ok(!/device time/.test(html));
  assert.match(html, />70%</); // line 23's share of the function
});

test("a script's run reads per step, a marked function's per call", () => {
  assert.match(renderBody({ result }), /CPU self time per call/);
  const script = renderBody({ result: { ...result, script: { steps: [3, 5] } } });
  assert.match(script, /CPU self time per step/);
  assert.ok(!script.includes("per call"));
});

test("no result: a hint instead of empty tables", () => {
  assert.match(renderBody({ result: null }), /Profile on Trainium/);
});

test("the page: strict CSP with the nonce, no inline or remote script", () => {
  const nonce = makeNonce((n) => new Uint8Array(n).map((_, i) => i * 7));
  assert.equal(nonce.length, 32);
  const assets = {
    cspSource: "https://x.vscode-cdn.net",
    nonce,
    scriptUri: "https://x/panel.js",
    styleUri: "https://x/panel.css",
  };
  const page = renderPage({ result }, assets);
  const csp = contentSecurityPolicy(assets);
  assert.match(csp, /^default-src 'none'/);
  assert.ok(csp.includes(`script-src 'nonce-${nonce}'`));
  assert.ok(!csp.includes("unsafe"));
  assert.equal((page.match(/<script/g) ?? []).length, 1);
  assert.ok(page.includes(`<script nonce="${nonce}" src="https://x/panel.js"></script>`));
});

test("variants and diff tables from the server's comparison shapes", () => {
  const comparison = {
    clock: "cpu",
    reference: "rms_norm_naive",
    rows: [
      {
        variant: "rms_norm_naive",
        run_id: "r0",
        line: 20,
        time_us: 2355,
        speedup: 1,
        verdict: "reference",
        extra: { nested: 1 },
      },
      { variant: "rms_norm_fused", run_id: "r1", line: 30, time_us: 403, speedup: 5.84, verdict: "ok" },
    ],
  };
  const t = genericTable(comparison)!;
  assert.deepEqual(t.columns, ["variant", "run_id", "line", "time_us", "speedup", "verdict"]);
  assert.equal(formatCell("time_us", 403), "403 µs");
  assert.equal(formatCell("speedup", 5.84), "5.84×");
  const html = renderBody({ result, comparison, diff: { lines: [{ after_line: 23, delta_us: -20 }] } });
  assert.match(html, /<table id="comparison">.*data-line="30"/s);
  assert.match(html, /<table id="diff">.*data-line="23"/s);
  assert.equal(genericTable(null), undefined);
  assert.equal(genericTable({ rows: [] }), undefined);
});

test("currentLine follows a profiled line the user moved", () => {
  const data: RunData = {
    result,
    lines: [
      { line: 23, current: 30, stale: false },
      { line: 22, current: null, stale: true },
    ],
  };
  assert.equal(currentLine(data, "examples/rmsnorm.py", 23), 30);
  assert.equal(currentLine(data, "examples/rmsnorm.py", 22), 21);
  assert.equal(currentLine(data, "other.py", 23), 22);
});

test("escapeHtml covers attributes too", () => {
  assert.equal(escapeHtml(`"'<&>`), "&quot;&#39;&lt;&amp;&gt;");
});

test("a training step: forward and backward columns, lines by forward + backward", () => {
  const train: ResultDoc = {
    ...result,
    totals: {
      self_time_us: 2000,
      steps: 5,
      forward_time_us: 800,
      backward_time_us: 1100,
      optimizer_time_us: 100,
    },
    lines: [
      {
        file: "examples/t.py",
        line: 5,
        self_time_us: 500,
        text: "h = self.c_fc(x)",
        backward_self_time_us: 100,
        backward_ops: [],
      },
      {
        file: "examples/t.py",
        line: 6,
        self_time_us: 300,
        text: "y = attn(h)",
        backward_self_time_us: 900,
        backward_ops: [
          { name: "aten::mm", calls: 2, self_time_us: 600, node: "AddmmBackward0" },
          { name: "aten::mm", calls: 1, self_time_us: 300, node: "MmBackward0" },
        ],
      },
    ],
  };
  const html = renderBody({ result: train });
  assert.match(html, /forward <b>800 µs<\/b> · backward <b>1.1 ms<\/b> · optimizer <b>100 µs<\/b>/);
  const lines = html.slice(html.indexOf('<table id="lines">'));
  assert.match(lines, /<th>fwd<\/th><th>bwd<\/th><th>backward ops<\/th>/);
  assert.ok(lines.indexOf("attn(h)") < lines.indexOf("self.c_fc(x)")); // 1.2 ms before 0.6 ms
  assert.match(lines, /<td class="muted">aten::mm<\/td>/); // named once
  // a forward-only (or schema-1) result keeps the old columns
  assert.doesNotMatch(renderBody({ result }), /backward ops/);
});

test("the header says how the figures reconcile, and a noisy run says they are unreliable", () => {
  const clean: ResultDoc = {
    ...result,
    reconciliation: { reference: "wall", reference_us: 1500, ratio: 0.88, tolerance: 0.25, within: true },
  };
  assert.match(renderBody({ result: clean }), /profiled 0\.88× the unprofiled wall \(within ±25%\)/);
  assert.ok(!renderBody({ result: clean }).includes('id="unreliable"'));
  // a fitted figure: the ratio is the unfitted one's, and a mostly fitted one says so (server's words)
  const fitted: ResultDoc = {
    ...result,
    reconciliation: { ...clean.reconciliation!, ratio: 1.36, within: false, shown_us: 21.4 },
  };
  const words =
    "mostly fitted to the wall: 36% of the 21.4 µs per call (host time between ops bounded by the wall -7.63 µs); unfitted 29 µs";
  const page = renderBody({ result: fitted, mostly_fit: words });
  assert.match(page, /profiled unfitted 1\.36× the unprofiled wall \(outside ±25%/);
  assert.match(page, /id="mostly-fit"[^>]*>⚠ mostly fitted to the wall: 36% of the 21\.4 µs/);
  assert.ok(!renderBody({ result: clean }).includes('id="mostly-fit"'));
  // a device clock far under the wall says where the rest went (the server's note)
  const lazy: ResultDoc = {
    ...result,
    clock: "xla-cpu",
    reconciliation: {
      ...clean.reconciliation!,
      ratio: 0.16,
      note: "the other 84% of the wall is host work: tracing the lazy graph",
    },
  };
  assert.match(
    renderBody({ result: lazy }),
    /0\.16× the unprofiled wall \(within at most \+25%; the other 84% of the wall is host work: tracing/,
  );
  const noisy: ResultDoc = {
    ...clean,
    findings: [
      {
        kind: "noisy_measurement",
        severity: "warning",
        file: "examples/rmsnorm.py",
        line: 20,
        message: "Noisy measurement: other processes used 0.9 cores <b>",
      },
    ],
  };
  const html = renderBody({ result: noisy });
  assert.match(
    html,
    /id="unreliable"[^>]*>⚠ Unreliable figures: Noisy measurement: other processes used 0\.9 cores &lt;b&gt;/,
  );
  const device: ResultDoc = {
    ...result,
    clock: "cuda",
    reconciliation: {
      reference: "device_span",
      reference_us: 90,
      ratio: 1.4,
      tolerance: 0.25,
      within: false,
    },
  };
  assert.match(renderBody({ result: device }), /1\.4× the device-side span \(outside at most \+25%\)/);
});

test("a job across nodes: a ranks table with each rank's node, the slowest marked", () => {
  const job: ResultDoc = {
    ...result,
    ranks: [
      {
        rank: 1,
        self_time_us: 300,
        collective_us: 100,
        wait_us: 90,
        wall_us_median: 900,
        node: "node1",
        node_rank: 0,
        local_rank: 1,
      },
      {
        rank: 0,
        self_time_us: 310,
        collective_us: 200,
        wait_us: 150,
        wall_us_median: 905,
        node: "node1",
        node_rank: 0,
        local_rank: 0,
      },
      {
        rank: 2,
        self_time_us: 700,
        collective_us: 50,
        wait_us: 0,
        wall_us_median: 910,
        node: "node<2>",
        node_rank: 1,
        local_rank: 0,
      },
    ],
  };
  const html = renderBody({ result: job });
  const ranks = html.slice(
    html.indexOf('<table id="ranks">'),
    html.indexOf("</table>", html.indexOf('<table id="ranks">')),
  );
  assert.match(html, /<h2>Ranks <span class="muted">3 ranks; lines above show the median rank, on 2 nodes/);
  assert.match(
    ranks,
    /<th>node<\/th><th>node rank<\/th><th>local<\/th><th>rank<\/th><th>self<\/th><th>compute<\/th>/,
  );
  const rows = ranks.split("<tr").slice(2); // after the header row
  const cells = (row: string) => [...row.matchAll(/<td[^>]*>([^<]*)<\/td>/g)].map((m) => m[1]);
  assert.deepEqual(
    rows.map((row) => cells(row).slice(0, 4)),
    [
      ["node1", "0", "0", "0"],
      ["node1", "0", "1", "1"],
      ["node&lt;2&gt;", "1", "0", "2"],
    ],
  );
  assert.match(rows[2], /^ class="slowest"><td>node&lt;2&gt;<\/td>/); // escaped, and the straggler
  assert.match(rows[2], /<td class="num">650 µs<\/td>/); // compute: self outside collectives
  // one rank, or ranks on one node: no node columns
  assert.doesNotMatch(renderBody({ result }), /id="ranks"/);
  const oneNode = {
    ...job,
    ranks: job.ranks!.map((k) => ({ rank: k.rank, self_time_us: k.self_time_us, wait_us: k.wait_us })),
  };
  assert.doesNotMatch(renderBody({ result: oneNode }), /<th>node<\/th>/);
});
