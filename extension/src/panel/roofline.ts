// The results panel's roofline chart and memory view (pure: SVG and HTML strings
// from the run data's `roofline`, built by the server's lsp/present/roofline_chart.py).
// Log-log chart: x = arithmetic intensity (FLOP per byte moved), y = achieved
// FLOP/s; the roof is the bandwidth diagonal up to each dtype's compute ceiling.
// Every point is a line (forward or backward): click it (or Enter) to reveal it.
// No inline styles (the panel's CSP forbids them): SVG presentation attributes
// and classes from panel.css only.
import { nbytes, pct, shownText, si, timeUs } from "./figures";

export interface RoofPoint {
  file: string;
  line: number;
  text?: string;
  phase: string;
  dtype: string;
  flops: number;
  bytes: number;
  time_us: number;
  flops_per_s: number;
  bytes_per_s: number;
  intensity: number | null;
  pct_of_peak: number;
  bound: string;
  verdict: string;
}

export interface RoofData {
  roof: {
    device: string;
    source: string;
    measured: boolean;
    flops: { dtype: string; flops_per_s: number }[];
    bytes_per_s: number;
  } | null;
  points: RoofPoint[];
  mfu: { mfu: number; flops: number; time_us: number; basis: string; dtype: string } | null;
  work: { source: string; note: string } | null;
  memory: {
    available: boolean;
    device: string;
    peak_bytes: number;
    peak_phase: string;
    held_before_bytes: number | null;
    saved_bytes: number | null;
    note: string | null;
    lines: {
      file: string;
      line: number;
      text?: string;
      peak_bytes: number;
      saved_bytes: number;
      saved_activation_bytes: number;
      alloc_bytes: number;
    }[];
  } | null;
}

type Esc = (text: unknown) => string;

const W = 560;
const H = 300;
const M = { left: 64, right: 96, top: 12, bottom: 40 };

interface Scale {
  x: (v: number) => number;
  y: (v: number) => number;
  x0: number;
  x1: number;
  y0: number;
  y1: number;
}

function decades(lo: number, hi: number): [number, number] {
  return [Math.floor(Math.log10(lo)), Math.ceil(Math.log10(hi))];
}

/** The chart's axes: every point, the ridge points and the ceilings fit. */
export function chartScale(data: RoofData): Scale | undefined {
  const pts = data.points.filter((p) => p.flops > 0 && p.intensity && p.flops_per_s > 0);
  if (!pts.length) return undefined;
  const xs = pts.map((p) => p.intensity as number);
  const ys = pts.map((p) => p.flops_per_s);
  const roof = data.roof;
  if (roof && roof.bytes_per_s > 0) {
    for (const f of roof.flops) {
      xs.push(f.flops_per_s / roof.bytes_per_s);
      ys.push(f.flops_per_s);
    }
  }
  const [x0, x1] = decades(Math.min(...xs) / 2, Math.max(...xs) * 2);
  const [y0, y1] = decades(Math.min(...ys) / 2, Math.max(...ys) * 2);
  const pw = W - M.left - M.right;
  const ph = H - M.top - M.bottom;
  return {
    x: (v) => M.left + ((Math.log10(v) - x0) / (x1 - x0)) * pw,
    y: (v) => M.top + ph - ((Math.log10(v) - y0) / (y1 - y0)) * ph,
    x0,
    x1,
    y0,
    y1,
  };
}

function n(v: number): string {
  return v.toFixed(1);
}

function roofLines(data: RoofData, s: Scale, esc: Esc): string {
  const roof = data.roof;
  if (!roof || roof.bytes_per_s <= 0) return "";
  const out: string[] = [];
  const xLo = 10 ** s.x0;
  const xHi = 10 ** s.x1;
  // the server lists the function's dominant dtype first: its ceiling is drawn solid
  roof.flops.forEach((f, i) => {
    const ridge = f.flops_per_s / roof.bytes_per_s;
    const start = Math.max(xLo, 10 ** s.y0 / roof.bytes_per_s);
    const bwY = Math.max(start * roof.bytes_per_s, 10 ** s.y0);
    const path =
      `M${n(s.x(start))},${n(s.y(bwY))} L${n(s.x(ridge))},${n(s.y(f.flops_per_s))} ` +
      `L${n(s.x(xHi))},${n(s.y(f.flops_per_s))}`;
    out.push(`<path class="roof${i ? " secondary" : ""}" d="${path}" fill="none"/>`);
    out.push(
      `<text class="roof-label" x="${n(s.x(xHi) + 4)}" y="${n(s.y(f.flops_per_s) + 4)}">` +
        `${esc(f.dtype)} ${esc(shownText(f, "flops_per_s", (v) => si(v, "FLOP/s")))}</text>`,
    );
  });
  return out.join("");
}

function axes(s: Scale): string {
  const out: string[] = [];
  for (let d = s.x0; d <= s.x1; d++) {
    const x = n(s.x(10 ** d));
    out.push(`<line class="grid" x1="${x}" x2="${x}" y1="${M.top}" y2="${H - M.bottom}"/>`);
    out.push(
      `<text class="tick" x="${x}" y="${H - M.bottom + 14}" text-anchor="middle">${si(10 ** d, "")}</text>`,
    );
  }
  for (let d = s.y0; d <= s.y1; d++) {
    const y = n(s.y(10 ** d));
    out.push(`<line class="grid" x1="${M.left}" x2="${W - M.right}" y1="${y}" y2="${y}"/>`);
    out.push(
      `<text class="tick" x="${M.left - 4}" y="${n(s.y(10 ** d) + 4)}" text-anchor="end">${si(10 ** d, "")}</text>`,
    );
  }
  out.push(
    `<text class="axis" x="${(M.left + W - M.right) / 2}" y="${H - 6}" text-anchor="middle">arithmetic intensity (FLOP per byte, bytes estimated)</text>`,
    `<text class="axis" x="12" y="${(M.top + H - M.bottom) / 2}" text-anchor="middle" transform="rotate(-90 12 ${(M.top + H - M.bottom) / 2})">achieved FLOP/s</text>`,
  );
  return out.join("");
}

function pointTitle(p: RoofPoint): string {
  return (
    `line ${p.line} (${p.phase}): ${(p.text ?? "").trim()}\n` +
    `${shownText(p, "flops", (v) => si(v, "FLOP"))} in ${shownText(p, "time_us", timeUs)} = ` +
    `${shownText(p, "flops_per_s", (v) => si(v, "FLOP/s"))}, ${shownText(p, "bytes", nbytes)} moved, ` +
    `${shownText(p, "pct_of_peak", pct)} of peak (${p.bound}), ${p.verdict}`
  );
}

/** The roofline chart as an SVG string; "" when no line has FLOPs. */
export function rooflineSvg(data: RoofData, esc: Esc): string {
  const s = chartScale(data);
  if (!s) return "";
  const pts = data.points
    .filter((p) => p.flops > 0 && p.intensity && p.flops_per_s > 0)
    .map(
      (p) =>
        `<circle class="reveal point ${esc(p.verdict)}${p.phase === "backward" ? " backward" : ""}" tabindex="0" role="button" ` +
        `data-file="${esc(p.file)}" data-line="${esc(p.line)}" cx="${n(s.x(p.intensity as number))}" ` +
        `cy="${n(s.y(p.flops_per_s))}" r="6"><title>${esc(pointTitle(p))}</title></circle>` +
        `<text class="point-label" x="${n(s.x(p.intensity as number) + 8)}" y="${n(s.y(p.flops_per_s) - 6)}">${esc(p.line)}${p.phase === "backward" ? "ᵇ" : ""}</text>`,
    );
  return (
    `<svg id="roofline-chart" class="roofline" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" ` +
    `aria-label="roofline: achieved FLOP/s against arithmetic intensity per line">` +
    axes(s) +
    roofLines(data, s, esc) +
    pts.join("") +
    `</svg>`
  );
}

function bar(fraction: number, cls: string): string {
  const w = Math.max(0, Math.min(1, fraction)) * 160;
  return `<svg class="bar" width="160" height="10" viewBox="0 0 160 10"><rect class="${cls}" x="0" y="0" width="${n(w)}" height="10"/></svg>`;
}

function reveal(file: string, line: number, esc: Esc): string {
  return `class="reveal" tabindex="0" data-file="${esc(file)}" data-line="${esc(line)}"`;
}

/** The roofline section (chart, bandwidth-only lines, MFU) and the memory view. */
export function rooflineSection(data: RoofData | null | undefined, clock: string, esc: Esc): string {
  if (!data || (!data.points.length && !data.memory)) return "";
  const parts: string[] = [];
  const roof = data.roof;
  const head =
    roof === null
      ? `<p class="muted">No peak known for this device: FLOPs and bytes without a % of peak.</p>`
      : `<p class="muted">Roof: ${roof.flops.map((f) => `${esc(f.dtype)} ${esc(shownText(f, "flops_per_s", (v) => si(v, "FLOP/s")))}`).join(", ")}; ` +
        `${esc(shownText(roof, "bytes_per_s", (v) => si(v, "B/s")))} — ${esc(roof.device)}: ${esc(roof.source)}</p>`;
  const mfu = data.mfu
    ? `<p>Function MFU <b>${esc(pct(100 * data.mfu.mfu))}</b> of the ${esc(data.mfu.dtype)} peak: ` +
      `${esc(shownText(data.mfu, "flops", (v) => si(v, "FLOP")))} per call over the ${esc(data.mfu.basis)}.</p>`
    : "";
  const svg = rooflineSvg(data, esc);
  const byteOnly = data.points.filter((p) => !(p.flops > 0) && p.bytes > 0);
  const rows = byteOnly
    .sort((a, b) => b.time_us - a.time_us)
    .map(
      (p) =>
        `<tr ${reveal(p.file, p.line, esc)}><td class="num">${p.line}</td><td>${esc(p.phase)}</td>` +
        `<td class="num">${esc(shownText(p, "bytes", nbytes))}</td><td class="num">${esc(shownText(p, "bytes_per_s", (v) => si(v, "B/s")))}</td>` +
        `<td>${bar(p.pct_of_peak / 100, "bw")} ${esc(shownText(p, "pct_of_peak", pct))}</td><td>${esc(p.verdict)}</td>` +
        `<td><code>${esc((p.text ?? "").trim())}</code></td></tr>`,
    );
  if (data.points.length) {
    parts.push(
      `<h2>Roofline <span class="muted">per line, ${esc(clock)}; click a point</span></h2>` +
        head +
        mfu +
        (svg ? `<div class="chart">${svg}</div>` : `<p class="muted">No line did matmul-like work.</p>`) +
        (rows.length
          ? `<h3>Lines without FLOPs <span class="muted">(bytes/s against the bandwidth)</span></h3>` +
            `<table id="bandwidth"><thead><tr><th>line</th><th>phase</th><th>bytes</th><th>bytes/s</th><th>% of BW</th><th>verdict</th><th>source</th></tr></thead><tbody>${rows.join("")}</tbody></table>`
          : ""),
    );
  }
  const mem = data.memory;
  if (mem) {
    if (!mem.available) {
      parts.push(`<h2>Memory</h2><p class="muted">${esc(mem.note ?? "not available")}</p>`);
    } else {
      const top = Math.max(1, ...mem.lines.map((l) => Math.max(l.peak_bytes, l.saved_bytes)));
      const memRows = mem.lines.map(
        (l) =>
          `<tr ${reveal(l.file, l.line, esc)}><td class="num">${l.line}</td>` +
          `<td class="num">${esc(shownText(l, "peak_bytes", nbytes))}</td><td>${bar(l.peak_bytes / top, "live")}</td>` +
          `<td class="num">${esc(shownText(l, "saved_bytes", nbytes))}</td><td class="num">${esc(shownText(l, "saved_activation_bytes", nbytes))}</td>` +
          `<td><code>${esc((l.text ?? "").trim())}</code></td></tr>`,
      );
      parts.push(
        `<h2>Memory <span class="muted">${esc(mem.device)}</span></h2>` +
          `<p>Peak <b>${esc(shownText(mem, "peak_bytes", nbytes))}</b> above the step's start, in the ${esc(mem.peak_phase)}` +
          (mem.held_before_bytes !== null
            ? ` · ${esc(shownText(mem, "held_before_bytes", nbytes))} held before it`
            : "") +
          (mem.saved_bytes !== null
            ? ` · ${esc(shownText(mem, "saved_bytes", nbytes))} saved for backward`
            : "") +
          `</p>` +
          `<table id="memory"><thead><tr><th>line</th><th>live at peak</th><th></th><th>saved for bwd</th><th>of which activations</th><th>source</th></tr></thead>` +
          `<tbody>${memRows.join("")}</tbody></table>`,
      );
    }
  }
  return parts.join("\n");
}
