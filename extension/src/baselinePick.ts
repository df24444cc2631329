// "Compare with Baseline": the rows of the picker, from the server's
// `trainiumLens/history` reply (pure: tested under node --test).
import { shownText, timeUs } from "./panel/figures";

export interface HistoryRun {
  run_id: string;
  created_at: string;
  commit?: string | null;
  dirty?: boolean;
  branch?: string | null;
  backend: string;
  host: string;
  clock: string;
  step_us: number;
  shown?: Record<string, string>; // the server's text for step_us
}

export interface HistoryReply {
  file?: string | null;
  function?: string | null;
  runs?: HistoryRun[];
}

export interface BaselineItem {
  label: string;
  description: string;
  detail: string;
  runId: string;
}

/** "3f2a9c1+dirty", or "no commit" for a run outside git. */
export function commitLabel(run: HistoryRun): string {
  if (!run.commit) return "no commit";
  return run.commit.slice(0, 7) + (run.dirty ? "+dirty" : "");
}

/** Every run but the newest (the one compared), newest first. */
export function baselineItems(reply: HistoryReply | undefined | null): BaselineItem[] {
  const runs = reply?.runs ?? [];
  return runs.slice(1).map((run) => ({
    label: `${run.created_at.replace("T", " ").slice(0, 16)} UTC · ${commitLabel(run)}`,
    description: `${shownText(run, "step_us", timeUs)} ${run.clock}`,
    detail: `${run.backend}@${run.host}${run.branch ? ` · ${run.branch}` : ""} · ${run.run_id}`,
    runId: run.run_id,
  }));
}
