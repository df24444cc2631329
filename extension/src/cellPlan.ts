// What *Profile Cell* does to a notebook, decided without `vscode` (tested under
// node --test): the cell's new first line, and whether `%load_ext trainium_lens`
// must come first. The cell magic exists only once the extension is loaded in the
// kernel (IPython loads no extension by itself: docs/notebooks.md, "Profile Cell").

export const MAGIC = "%%trainium_lens";
export const LOAD = "%load_ext trainium_lens";

/** One cell as the plan needs it: code or not, and its text. */
export interface PlanCell {
  code: boolean;
  text: string;
}

export interface CellPlan {
  /** the cell's text to insert at its top (empty: it already starts with the magic) */
  prefix: string;
  /** a `%load_ext trainium_lens` cell goes right above the cell, and runs before it */
  insertLoad: boolean;
}

const LOADS = /^\s*%load_ext\s+(?:\S+\s+)*trainium_lens(?:\s|$)/m;

/** Does `text`'s first non-blank line open a cell magic, `%%…`? */
export function firstMagic(text: string): string | undefined {
  const first = text.split(/\r?\n/).find((l) => l.trim());
  return first?.trim().startsWith("%%") ? first.trim().split(/\s/)[0] : undefined;
}

/**
 * The plan for cell `index`: the magic on top (unless it is there), and a load cell
 * above it unless a code cell above already loads the extension (the user's own, run
 * as they run their setup cells: it is never re-run behind their back).
 */
export function planProfileCell(cells: PlanCell[], index: number): CellPlan {
  const cell = cells[index];
  if (!cell?.code) throw new Error(`cell ${index} is not a code cell`);
  const magic = firstMagic(cell.text);
  if (magic && magic !== MAGIC)
    throw new Error(`the cell already runs under ${magic}: IPython runs one cell magic per cell`);
  const loaded = cells.slice(0, index).some((c) => c.code && LOADS.test(c.text));
  return { prefix: magic ? "" : `${MAGIC}\n`, insertLoad: !loaded };
}
