// Line heat from the server (`trainiumLens/heat`), grouped into a few intensity
// buckets so the editor reuses one decoration type per bucket for every line.
// Pure logic: no `vscode` here (heatDecorations.ts draws it).

export const HEAT_BUCKETS = 5;

export interface HeatLine {
  line: number; // 0-based
  intensity: number; // 0..1, share of the hottest line or of the function's time
  stale?: boolean; // the line changed since the run: its figure no longer applies
  unreliable?: boolean; // the run was judged noisy: drawn apart, not as heat
}

export interface HeatParams {
  uri: string;
  version?: number | null;
  lines: HeatLine[];
}

/** 0 for no heat (nothing drawn), else 1..HEAT_BUCKETS. */
export function bucketOf(intensity: number): number {
  if (!Number.isFinite(intensity) || intensity <= 0) return 0;
  return Math.min(HEAT_BUCKETS, Math.max(1, Math.ceil(intensity * HEAT_BUCKETS)));
}

/**
 * Line numbers per bucket (index 0 unused). Every bucket gets an array, empty ones
 * included, so that setting all of them replaces the previous heat in one pass:
 * lines that cooled down, went stale or disappeared lose their decoration.
 */
export function bucketLines(lines: HeatLine[], lineCount = Number.POSITIVE_INFINITY): number[][] {
  const buckets: number[][] = Array.from({ length: HEAT_BUCKETS + 1 }, () => []);
  const seen = new Set<number>();
  for (const { line, intensity, stale, unreliable } of lines) {
    if (stale || unreliable || !Number.isInteger(line) || line < 0 || line >= lineCount || seen.has(line))
      continue;
    const b = bucketOf(intensity);
    if (b === 0) continue;
    seen.add(line);
    buckets[b].push(line);
  }
  for (const b of buckets) b.sort((x, y) => x - y);
  return buckets;
}

/**
 * Lines of a run judged noisy (its figures are unreliable): tinted apart from the
 * heat, whatever their intensity. Stale, out-of-range and repeated lines dropped.
 */
export function unreliableLines(lines: HeatLine[], lineCount = Number.POSITIVE_INFINITY): number[] {
  const out = new Set<number>();
  for (const { line, stale, unreliable, intensity } of lines) {
    if (!unreliable || stale || !Number.isInteger(line) || line < 0 || line >= lineCount) continue;
    if (!(intensity > 0)) continue;
    out.add(line);
  }
  return [...out].sort((x, y) => x - y);
}

/** The gutter mark of a bucket: a bar whose width grows with the heat (an SVG data URI). */
export function gutterSvg(bucket: number, rgb: string): string {
  const width = 2 + bucket; // 3..7 px of a 16 px gutter column
  const alpha = (0.35 + 0.13 * bucket).toFixed(2);
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 16 16">` +
    `<rect x="${16 - width}" y="0" width="${width}" height="16" fill="${rgb}" fill-opacity="${alpha}"/></svg>`;
  return `data:image/svg+xml;utf8,${encodeURIComponent(svg)}`;
}
