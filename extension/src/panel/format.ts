// Numbers and rows for the results panel (pure: tested under node --test).
import { MISSING, Shown, count, ratio, shownText, timeUs } from "./figures";
import type { RoofData } from "./roofline";
// The result's fields are documented in server/trainium_lens/model/result.py; every
// time is per step (per call of the profiled function), on the run's clock.

export interface OpRow extends Shown {
  name: string;
  calls: number;
  self_time_us: number;
  total_time_us?: number;
  self_cpu_us?: number;
}

export interface LineRow extends Shown {
  file: string;
  line: number;
  self_time_us: number;
  total_time_us?: number;
  calls?: number;
  self_time_us_min?: number;
  self_time_us_max?: number;
  text?: string;
  ops?: { name: string; calls: number; self_time_us: number }[];
  // schema 2 (training steps): the backward this line's forward caused
  backward_self_time_us?: number;
  backward_total_time_us?: number;
  recompute_time_us?: number;
  backward_ops?: { name: string; calls: number; self_time_us: number; node?: string }[];
}

export interface FindingRow {
  kind: string;
  severity: string;
  file: string;
  line: number;
  message: string;
  fix?: string | null;
}

// A rank of a job with several (`--nproc`, `--hosts`, `--slurm`, `run -- torchrun|srun`):
// `node`, `node_rank`, `local_rank` only when the ranks ran on several nodes.
export interface RankRow extends Shown {
  rank: number;
  self_time_us: number;
  wall_us_median?: number | null;
  wait_us?: number;
  collective_us?: number;
  node?: string;
  node_rank?: number;
  local_rank?: number;
}

export interface ResultDoc extends Shown {
  run_id: string;
  created_at?: string;
  backend: string;
  clock: string;
  host: string;
  function: { file: string; name: string; line: number };
  totals: Shown & {
    self_time_us: number;
    wall_us_median?: number | null;
    steps?: number;
    dispatches?: number;
    forward_time_us?: number;
    backward_time_us?: number;
    optimizer_time_us?: number;
    recompute_time_us?: number;
  };
  ops?: OpRow[];
  lines?: LineRow[];
  findings?: FindingRow[];
  ranks?: RankRow[];
  unattributed_us?: number;
  // a `run` of an unmodified script (model/run_info.py ScriptRun): its figures are per step
  script?: { steps?: number[] } | null;
  // schema 3: against the unprofiled wall (or the device-side span), analysis/reconcile.py
  reconciliation?:
    | (Shown & {
        reference: string;
        reference_us: number;
        ratio: number;
        tolerance: number;
        within: boolean;
        note?: string;
        // the figure shown, fitted to the wall, where the ratio is of the unfitted one
        shown_us?: number | null;
      })
    | null;
}

/**
 * `0.88× the unprofiled wall (within ±25%)`, and where the rest of the wall went or
 * why the ratio is off when the server says (its note); null for a result without one.
 */
export function reconciledText(r: ResultDoc): string | null {
  const rec = r.reconciliation;
  if (!rec || !Number.isFinite(rec.ratio)) return null;
  const ref = rec.reference === "device_span" ? "device-side span" : "unprofiled wall";
  const pct = Math.round(rec.tolerance * 100);
  const tol = r.clock === "cpu" ? `±${pct}%` : `at most +${pct}%`;
  const note = rec.note ? `; ${rec.note}` : "";
  // the figure shown meets the wall by its fit: the ratio is the unfitted figure's (model/fit.py)
  const unfitted = rec.shown_us !== undefined && rec.shown_us !== null ? "unfitted " : "";
  // within the ratio's tolerance yet not reconciled: the figure shown or the host's speed did not hold
  const held = r.clock === "cpu" && Math.abs(rec.ratio - 1) <= rec.tolerance;
  const verdict = rec.within ? `within ${tol}` : held ? `within ${tol}, not reconciled` : `outside ${tol}`;
  return `${unfitted}${shownText(rec, "ratio", ratio)} the ${ref} (${verdict}${note})`;
}

/** What one figure is of (model/result.py `Result.unit`): a call, or a script's step. */
export function unitOf(r: ResultDoc): string {
  return r.script ? "step" : "call";
}

/** The run was judged noisy (analysis/noise.py): its figures are unreliable. */
export function noisyFinding(r: ResultDoc): FindingRow | undefined {
  return (r.findings ?? []).find((f) => f.kind === "noisy_measurement");
}

export interface RunData {
  result?: ResultDoc | null;
  // the roofline chart's points and the memory view (server: lsp/present/roofline_chart.py)
  roofline?: RoofData | null;
  comparison?: unknown;
  diff?: unknown;
  // where each profiled line (1-based, as in the result) sits in the editor now (0-based)
  lines?: { line: number; current: number | null; stale: boolean }[];
  // the server's words for a figure the fit to the wall supplied most of (model/fit.py)
  mostly_fit?: string | null;
}

/** The editor line (0-based) to reveal for a result line: where it moved to, if it did. */
export function currentLine(data: RunData, file: string, line: number): number {
  if (data.result && data.result.function.file === file) {
    const placed = data.lines?.find((l) => l.line === line);
    if (placed && typeof placed.current === "number") return placed.current;
  }
  return line - 1;
}

/** What `self_time_us` measures on this clock: never call a CPU figure device time. */
export function clockLabel(clock: string): string {
  switch (clock) {
    case "neuron":
      return "Neuron device time";
    case "cuda":
      return "CUDA kernel time";
    case "cpu":
      return "CPU self time";
    default:
      return `${clock} time`;
  }
}

/** The `key_averages()` view: ATen ops by self time, hottest first. */
export function sortedOps(result: ResultDoc): OpRow[] {
  return [...(result.ops ?? [])].sort(
    (a, b) => b.self_time_us - a.self_time_us || a.name.localeCompare(b.name),
  );
}

/** Forward + backward + recompute self time: what a line costs a step. */
export function lineTime(l: LineRow): number {
  return l.self_time_us + (l.backward_self_time_us ?? 0) + (l.recompute_time_us ?? 0);
}

/** Did the run measure a backward (a training step)? Schema-1 results: no. */
export function hasBackward(result: ResultDoc): boolean {
  return (result.totals.backward_time_us ?? 0) > 0 || (result.totals.recompute_time_us ?? 0) > 0;
}

export function sortedLines(result: ResultDoc): LineRow[] {
  return [...(result.lines ?? [])].sort((a, b) => lineTime(b) - lineTime(a) || a.line - b.line);
}

const SEVERITY_ORDER: Record<string, number> = { error: 0, warning: 1, info: 2, hint: 3 };

export function sortedFindings(result: ResultDoc): FindingRow[] {
  return [...(result.findings ?? [])].sort(
    (a, b) => (SEVERITY_ORDER[a.severity] ?? 9) - (SEVERITY_ORDER[b.severity] ?? 9) || a.line - b.line,
  );
}

/**
 * A generic table from the comparison or diff document, whatever its exact shape:
 * the first array of objects found under `rows`/`variants`/`lines` (or the value
 * itself), with the union of their scalar keys as columns.
 */
export function genericTable(
  doc: unknown,
): { columns: string[]; rows: Record<string, unknown>[] } | undefined {
  let rows: unknown = doc;
  if (doc && typeof doc === "object" && !Array.isArray(doc)) {
    const d = doc as Record<string, unknown>;
    rows = d.rows ?? d.variants ?? d.lines ?? d.results;
  }
  if (!Array.isArray(rows) || rows.length === 0 || typeof rows[0] !== "object" || rows[0] === null)
    return undefined;
  const columns: string[] = [];
  for (const row of rows as Record<string, unknown>[]) {
    for (const [k, v] of Object.entries(row)) {
      if ((v === null || typeof v !== "object") && !columns.includes(k)) columns.push(k);
    }
  }
  return { columns, rows: rows as Record<string, unknown>[] };
}

/**
 * A cell of a generic table: the server's text for the figure (its `shown` map), else
 * the value as a plain number; times (keys ending in `_us`) in readable units.
 */
export function formatCell(key: string, value: unknown, row?: Shown): string {
  const text = row?.shown?.[key];
  if (typeof text === "string") return text;
  if (value === null || value === undefined) return MISSING;
  if (typeof value === "number") {
    if (key.endsWith("_us")) return timeUs(value);
    if (key.endsWith("ratio") || key === "speedup") return ratio(value);
    return count(value);
  }
  return String(value);
}

/** Column titles for generic tables: `self_time_us` → "self time". */
export function columnTitle(key: string): string {
  return key.replace(/_us$/, "").replace(/_/g, " ");
}

/** Ranks in order, and the one whose compute (self time outside collectives) is highest:
 * the straggler's candidate, as analysis/findings/ranks.py picks it; none for one rank. */
export function rankRows(r: ResultDoc): { rows: RankRow[]; slowest: number | null; nodes: boolean } {
  const rows = [...(r.ranks ?? [])].sort((a, b) => a.rank - b.rank);
  if (rows.length < 2) return { rows: [], slowest: null, nodes: false };
  const compute = (x: RankRow) => x.self_time_us - (x.collective_us ?? 0);
  const slowest = rows.reduce((a, b) => (compute(b) > compute(a) ? b : a)).rank;
  return { rows, slowest, nodes: rows.some((x) => typeof x.node === "string" && x.node !== "") };
}
