"""Code lenses above every marked function.

"▶ Profile on Trainium" always; once the function has a run, its headline
("2.36 ms neuron · 6 dispatches · 2 findings", the clock always named) and,
with two runs, "Compare with previous"; "Timeline" (and "Neuron Explorer" for a
Neuron run) opened on the function's hottest line. While a run is in flight the first
lens says so.

A script (a file with ``if __name__ == "__main__":``) gets "▶ Profile Script on
Trainium" on that line: the client's *Profile Script…* command, which finds the
launch.json configuration's args, env and cwd and asks ``trainiumLens.runScript``.
"""

from __future__ import annotations

from lsprotocol import types

from trainium_lens.lsp.features import timeline
from trainium_lens.lsp.features.compare import COMMAND as COMPARE
from trainium_lens.lsp.features.profile import COMMAND as PROFILE
from trainium_lens.lsp.features.script import SCRIPT, main_line
from trainium_lens.lsp.present import format as fmt
from trainium_lens.lsp.state import LensServer

SHOW = "trainiumLens.showResults"  # the extension's results panel; a lens needs a command
PROFILE_SCRIPT = "trainiumLens.profileScript"  # the extension's Profile Script… (reads launch.json)


def lenses(ls: LensServer, uri: str) -> list[types.CodeLens]:
    from trainium_lens.harness.markers import find_marked

    runs = ls.document_runs(uri)
    if runs is None:
        return []
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
            types.CodeLens(range=where, command=types.Command(title=title, command=PROFILE, arguments=[arg]))
        )
        history = histories.get(m.name, [])
        if history:
            out.append(
                types.CodeLens(
                    range=where,
                    command=types.Command(title=fmt.headline(history[-1]), command=SHOW, arguments=[arg]),
                )
            )
            out.extend(timeline.code_lenses(ls, uri, history[-1], where))
        if len(history) >= 2:
            out.append(
                types.CodeLens(
                    range=where,
                    command=types.Command(title="Compare with previous", command=COMPARE, arguments=[arg]),
                )
            )
    return out


def _script_lens(ls: LensServer, uri: str, source: str, busy: set[str]) -> list[types.CodeLens]:
    line = main_line(source)
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


def register(server: LensServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))
    def code_lens(ls: LensServer, params: types.CodeLensParams) -> list[types.CodeLens]:
        return lenses(ls, params.text_document.uri)
