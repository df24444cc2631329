"""The user's source as a run measured it, for the edits a fix writes
(``analysis/fixes``): the profiled file is read before the run starts, so an
edit made while it runs cannot end up in an edit built for the old code (the
edit would then not hold, and ``fix`` refuses it)."""

from __future__ import annotations

from pathlib import Path

from trainium_lens.harness.markers import read_source


class SourceReader:
    def __init__(self, workspace: Path, early: set[str]):
        self.workspace = Path(workspace)
        self.texts: dict[str, str | None] = {rel: self._read(rel) for rel in early}

    def _read(self, rel: str) -> str | None:
        path = self.workspace / rel
        try:
            path.resolve().relative_to(self.workspace.resolve())
        except ValueError:
            return None  # outside the workspace (an included package's file): not the user's to edit
        try:
            return read_source(path)
        except (OSError, UnicodeDecodeError, SyntaxError):
            return None

    def __call__(self, rel: str) -> str | None:
        if rel not in self.texts:
            self.texts[rel] = self._read(rel)
        return self.texts[rel]
