"""``trainiumLens.compareWithPrevious``: the two latest runs of a function compared
per line, or, with no function named, the table of the file's variants
(``present/compare.py`` makes both)."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from trainium_lens.lsp import command_ids
from trainium_lens.lsp.present.compare import diff, diff_markdown, file_variants, variants, variants_markdown
from trainium_lens.lsp.state import LensServer

COMMAND = command_ids.COMPARE


def compare_command(ls: LensServer, args: tuple) -> dict:
    arg = args[0] if len(args) == 1 and isinstance(args[0], dict) else {}
    uri, function = arg.get("uri"), arg.get("function")
    runs = ls.document_runs(uri) if isinstance(uri, str) else None
    if runs is None:
        message = f"{COMMAND} takes one argument {{uri, function?}} naming a workspace file"
        ls.show(f"Trainium Lens: {message}", types.MessageType.Error)
        return {"error": message}
    runs.index.refresh()
    histories = runs.index.functions(runs.file)
    if not function and len(histories) == 1:
        function = next(iter(histories))
    if function:
        history = histories.get(function, [])
        if len(history) < 2:
            message = (
                f"{function} has {len(history)} run{'s' if len(history) != 1 else ''}: "
                f"profile it again to compare"
            )
            ls.show(f"Trainium Lens: {message}", types.MessageType.Info)
            return {"error": message}
        before, after = history[-2], history[-1]
        return {"function": function, "diff": diff(before, after), "markdown": diff_markdown(before, after)}
    results = file_variants(histories)
    if len(results) < 2:
        message = f"{runs.file} has no runs to compare yet: profile its functions first"
        ls.show(f"Trainium Lens: {message}", types.MessageType.Info)
        return {"error": message}
    return {"comparison": variants(results), "markdown": variants_markdown(results)}


def register(server: LensServer) -> None:
    @server.command(COMMAND)
    def compare_with_previous(ls: LensServer, *args: Any) -> dict:
        return compare_command(ls, args)
