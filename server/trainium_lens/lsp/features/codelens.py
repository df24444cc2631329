"""Code lenses above every marked function.

"▶ Profile on Trainium" always; once the function has a run, its headline
("2.36 ms neuron · 6 dispatches · 2 findings", the clock always named) and,
with two runs, "Compare with previous"; "Timeline" (and "Neuron Explorer" for a
Neuron run) opened on the function's hottest line. While a run is in flight the first
lens says so.

A notebook cell with runs of its own (``%%trainium_lens``) gets the headline,
"Timeline" and "Compare with previous" on the magic's line; a Python code cell
without the magic gets "▶ Profile Cell" on its first line: the client's command,
which puts ``%%trainium_lens`` on top and runs the cell in the notebook's own kernel
(the server decides which cells offer it; only the client can edit and run a
notebook: docs/notebooks.md, "Profile Cell").

A script (a file with ``if __name__ == "__main__":``) gets "▶ Profile Script on
Trainium" on that line: the client's *Profile Script…* command, which finds the
launch.json configuration's args, env and cwd and asks ``trainiumLens.runScript``.
"""

from __future__ import annotations

from lsprotocol import types

from trainium_lens.lsp import command_ids
from trainium_lens.lsp.present import format as fmt
from trainium_lens.lsp.runs import DocumentRuns
from trainium_lens.lsp.state import CELL_SCHEME, SCRIPT, LensServer
from trainium_lens.model.result import Result

SHOW = command_ids.SHOW_RESULTS
PROFILE_SCRIPT = command_ids.PROFILE_SCRIPT


def lenses(ls: LensServer, uri: str) -> list[types.CodeLens]:
    from trainium_lens.harness.markers import find_marked

    runs = ls.document_runs(uri)
    if runs is None:
        return []
    if uri.startswith(CELL_SCHEME + ":"):
        return _profile_cell_lens(ls, uri) + _cell_lenses(ls, uri, runs)
    lines, _ = ls.doc_lines(uri)
    try:
        marked = find_marked("\n".join(lines))
    except SyntaxError:
        return []  # mid-edit: the lenses come back once the file parses
    histories = runs.index.functions(runs.file)
    busy = {fn for r in ls.running.values() if r.file == runs.file for fn in r.functions}
    out = _script_lens(ls, uri, "\n".join(lines), busy)
    for m in marked:
        line = m.marker_line - 1
        where = types.Range(
            start=types.Position(line=line, character=0), end=types.Position(line=line, character=0)
        )
        arg = {"uri": uri, "function": m.name}
        title = f"⏳ Profiling on {ls.settings.host}…" if m.name in busy else "▶ Profile on Trainium"
        out.append(
            types.CodeLens(
                range=where, command=types.Command(title=title, command=command_ids.PROFILE, arguments=[arg])
            )
        )
        out.extend(_history_lenses(ls, uri, where, arg, histories.get(m.name, [])))
    return out


def _history_lenses(
    ls: LensServer, uri: str, where: types.Range, arg: dict, history: list[Result]
) -> list[types.CodeLens]:
    """The headline of the latest run, its Timeline (and Neuron Explorer), and with two
    runs "Compare with previous"."""
    if not history:
        return []
    out = [
        types.CodeLens(
            range=where,
            command=types.Command(title=fmt.headline(history[-1]), command=SHOW, arguments=[arg]),
        )
    ]
    out.extend(_trace_lenses(ls, uri, history[-1], where))
    if len(history) >= 2:
        out.append(
            types.CodeLens(
                range=where,
                command=types.Command(
                    title="Compare with previous", command=command_ids.COMPARE, arguments=[arg]
                ),
            )
        )
    return out


def _cell_lenses(ls: LensServer, uri: str, runs: DocumentRuns) -> list[types.CodeLens]:
    """A notebook cell has no marker and no main guard (and its ``%%`` line does not
    parse): the runs of the cell itself (``%%trainium_lens``'s results name the cell by
    its text, their function line the magic's) get their lenses on the magic's line."""
    out = []
    for name, history in runs.index.functions(runs.file).items():
        line = max(0, history[-1].function.line - 1)
        where = types.Range(
            start=types.Position(line=line, character=0), end=types.Position(line=line, character=0)
        )
        out.extend(_history_lenses(ls, uri, where, {"uri": uri, "function": name}, history))
    return out


def _profile_cell_lens(ls: LensServer, uri: str) -> list[types.CodeLens]:
    """ "▶ Profile Cell" on the first line of a cell with code to profile: not one whose
    first line is already a cell magic (ours, with its runs' lenses, or another's: IPython
    runs one cell magic per cell), nor one of only magics, shell lines and comments
    (``%load_ext trainium_lens`` itself)."""
    lines, _ = ls.doc_lines(uri)
    code = [s for s in (line.strip() for line in lines) if s and not s.startswith(("#", "%", "!"))]
    first = next((s for s in (line.strip() for line in lines) if s), "")
    if not code or first.startswith("%%"):
        return []
    where = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0))
    command = types.Command(
        title="▶ Profile Cell", command=command_ids.PROFILE_CELL, arguments=[{"uri": uri}]
    )
    return [types.CodeLens(range=where, command=command)]


def _script_lens(ls: LensServer, uri: str, source: str, busy: set[str]) -> list[types.CodeLens]:
    line = _main_line(source)
    if line is None:
        return []
    where = types.Range(
        start=types.Position(line=line - 1, character=0), end=types.Position(line=line - 1, character=0)
    )
    title = "⏳ Profiling the script…" if SCRIPT in busy else "▶ Profile Script on Trainium"
    return [
        types.CodeLens(
            range=where, command=types.Command(title=title, command=PROFILE_SCRIPT, arguments=[{"uri": uri}])
        )
    ]


def _trace_lenses(ls: LensServer, uri: str, result: Result, where: types.Range) -> list[types.CodeLens]:
    """ "Timeline" (and "Neuron Explorer" for a Neuron run) above a profiled
    function, opened on its hottest line."""
    annotations = ls.annotations(uri)
    mine = [a for a in annotations.lines if a.result.run_id == result.run_id] if annotations else []
    if not mine:
        return []
    hot = max(mine, key=lambda a: a.time_us)
    arg = {"uri": uri, "line": hot.line}
    out = [
        types.CodeLens(
            range=where,
            command=types.Command(
                title=f"Timeline (line {hot.line + 1})", command=command_ids.OPEN_TIMELINE, arguments=[arg]
            ),
        )
    ]
    if result.artifacts.neuron_profile_dir:
        out.append(
            types.CodeLens(
                range=where,
                command=types.Command(
                    title="Neuron Explorer", command=command_ids.OPEN_EXPLORER, arguments=[arg]
                ),
            )
        )
    return out


def _main_line(source: str) -> int | None:
    """The 1-based ``if __name__ == "__main__":`` line, None without one (or mid-edit)."""
    import ast

    from trainium_lens.model.script import main_guard_line

    try:
        return main_guard_line(ast.parse(source))
    except (SyntaxError, ValueError):
        return None


def register(server: LensServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))
    def code_lens(ls: LensServer, params: types.CodeLensParams) -> list[types.CodeLens]:
        return lenses(ls, params.text_document.uri)
