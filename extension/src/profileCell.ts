// *Profile Cell* (the server's code lens on a notebook's code cells, or the palette):
// `%%trainium_lens` on the cell's first line, a `%load_ext trainium_lens` cell above it
// when no cell above loads the extension, then VS Code's own `notebook.cell.execute`
// on them: the notebook's selected kernel (the Jupyter extension's controller,
// whatever it is), or VS Code's kernel picker when none is selected. No private
// kernel API: the cell runs as the user's Shift+Enter runs it (docs/notebooks.md).
import * as vscode from "vscode";
import { LOAD, planProfileCell } from "./cellPlan";

function cellOf(uri: string | undefined): vscode.NotebookCell | undefined {
  if (!uri) {
    const editor = vscode.window.activeNotebookEditor; // the palette: the selected cell
    return editor && editor.notebook.cellAt(editor.selection.start);
  }
  for (const nb of vscode.workspace.notebookDocuments)
    for (const cell of nb.getCells()) if (cell.document.uri.toString() === uri) return cell;
  return undefined;
}

export async function profileCell(arg?: { uri?: string }): Promise<void> {
  const cell = cellOf(arg?.uri);
  if (!cell) {
    void vscode.window.showWarningMessage("Trainium Lens: select a code cell of a notebook first.");
    return;
  }
  const notebook = cell.notebook;
  let plan;
  try {
    plan = planProfileCell(
      notebook
        .getCells()
        .map((c) => ({ code: c.kind === vscode.NotebookCellKind.Code, text: c.document.getText() })),
      cell.index,
    );
  } catch (e) {
    void vscode.window.showWarningMessage(`Trainium Lens: ${(e as Error).message}`);
    return;
  }
  if (plan.prefix) {
    const edit = new vscode.WorkspaceEdit();
    edit.insert(cell.document.uri, new vscode.Position(0, 0), plan.prefix);
    if (!(await vscode.workspace.applyEdit(edit))) return;
  }
  const index = cell.index; // read again: the edit keeps it, the insert below moves it
  if (plan.insertLoad) {
    const edit = new vscode.WorkspaceEdit();
    const load = new vscode.NotebookCellData(vscode.NotebookCellKind.Code, LOAD, cell.document.languageId);
    edit.set(notebook.uri, [vscode.NotebookEdit.insertCells(index, [load])]);
    if (!(await vscode.workspace.applyEdit(edit))) return;
  }
  // the load cell (when inserted) and the cell, in order, in the notebook's own kernel
  const start = plan.insertLoad ? index : cell.index;
  await vscode.commands.executeCommand("notebook.cell.execute", {
    ranges: [{ start, end: cell.index + 1 }],
    document: notebook.uri,
  });
}
