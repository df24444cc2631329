// The panel's figures: the server's text wherever it sent one (the `shown` map it puts
// beside each object's numeric fields: server/trainium_lens/model/figures.py), and the
// same rule, digit for digit, for the few figures only the client computes (a share of
// a total it sums, a chart's axis ticks). tests/data/figure_samples.json holds sample
// values with their text; the Python tests and extension/test/figures.test.ts both
// assert it, so this file cannot drift from the server's.

export const MISSING = "–";

type Num = number | null | undefined;

function missing(v: Num): v is null | undefined {
  return v === null || v === undefined || !Number.isFinite(v);
}

// toFixed / toPrecision round a tie up on the exact double, as the server's Decimal does.
function round3(v: number): number {
  return v === 0 ? 0 : Number(v.toPrecision(3));
}

function strip(text: string): string {
  return text.includes(".") ? text.replace(/0+$/, "").replace(/\.$/, "") : text;
}

/** "2.5", "12.3", "403", "0.0123", "12345": three significant figures, no exponent. */
export function number(v: number): string {
  if (v < 0) return "-" + number(-v);
  const r = round3(v);
  if (r === 0) return "0";
  if (r >= 1000) return v.toFixed(0);
  if (r >= 100) return r.toFixed(0);
  const exponent = parseInt(r.toExponential(2).split("e")[1], 10);
  return strip(r.toFixed(2 - exponent));
}

const TIME_UNITS: [number, string][] = [
  [1e6, "s"],
  [1e3, "ms"],
  [1, "µs"],
];

// below a picosecond: a subtraction's float residue, read as zero (model/figures.py ZERO_US)
const ZERO_US = 1e-6;

/** A time given in µs: "4 ns", "2.5 µs", "1.16 ms", "2.4 s", "0 µs". */
export function timeUs(us: Num): string {
  if (missing(us)) return MISSING;
  if (Math.abs(us) < ZERO_US) return "0 µs";
  if (us < 0) return "-" + timeUs(-us);
  for (const [scale, unit] of TIME_UNITS) {
    if (round3(us / scale) >= 1) return `${number(us / scale)} ${unit}`;
  }
  return `${number(us * 1000)} ns`;
}

const SI: [number, string][] = [
  [1e15, "P"],
  [1e12, "T"],
  [1e9, "G"],
  [1e6, "M"],
  [1e3, "k"],
];

/** "12.6 MFLOP", "190 GFLOP/s", "18.4 GB/s". */
export function si(value: Num, unit: string): string {
  if (missing(value)) return MISSING;
  const sign = value < 0 ? "-" : "";
  const v = Math.abs(value);
  for (const [scale, prefix] of SI) {
    if (round3(v / scale) >= 1) return `${sign}${number(v / scale)} ${prefix}${unit}`;
  }
  return `${sign}${number(v)} ${unit}`;
}

const BIN: [number, string][] = [
  [2 ** 40, "TiB"],
  [2 ** 30, "GiB"],
  [2 ** 20, "MiB"],
  [2 ** 10, "KiB"],
];

/** "12 B", "192 KiB", "4 MiB". */
export function nbytes(value: Num): string {
  if (missing(value)) return MISSING;
  const sign = value < 0 ? "-" : "";
  const v = Math.abs(value);
  for (const [scale, unit] of BIN) {
    if (round3(v / scale) >= 1) return `${sign}${number(v / scale)} ${unit}`;
  }
  return `${sign}${v.toFixed(0)} B`;
}

/** A percentage given in percent: "41%", "4.2%", "<0.1%", "0%". */
export function pct(value: Num): string {
  if (missing(value)) return MISSING;
  if (value < 0) return "-" + pct(-value);
  if (value === 0) return "0%";
  if (value < 0.05) return "<0.1%";
  if (Number(value.toFixed(1)) >= 10) return `${value.toFixed(0)}%`;
  return `${strip(value.toFixed(1))}%`;
}

export function share(part: number, whole: number): string {
  return whole > 0 ? pct((100 * part) / whole) : MISSING;
}

/** "12", "2.33": per-step counts are averages; whole ones print whole. */
export function count(value: Num): string {
  if (missing(value)) return MISSING;
  if (Math.abs(value - Math.round(value)) < 1e-6) return String(Math.round(value));
  return number(value);
}

export function ratio(value: Num): string {
  return missing(value) ? MISSING : `${number(value)}×`;
}

/** The kinds of figure, by the names the sample table uses. */
export const KINDS: Record<string, (v: Num) => string> = {
  time_us: timeUs,
  bytes: nbytes,
  flops: (v) => si(v, "FLOP"),
  flops_rate: (v) => si(v, "FLOP/s"),
  bandwidth: (v) => si(v, "B/s"),
  pct,
  count,
  ratio,
};

/** An object of the payload that carries the server's text for its figures. */
export interface Shown {
  shown?: Record<string, string>;
}

/**
 * The server's text for `obj[key]`; `fallback` formats it only where the server sent
 * none (a payload built by hand in a test, or a value the client computed).
 */
export function shownText(obj: object | null | undefined, key: string, fallback: (v: Num) => string): string {
  const text = (obj as Shown | null | undefined)?.shown?.[key];
  if (typeof text === "string") return text;
  const value = (obj as Record<string, unknown> | null | undefined)?.[key];
  return fallback(typeof value === "number" ? value : null);
}
