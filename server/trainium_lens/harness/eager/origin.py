"""Where a line's torch calls came from: the line itself, or library code it called.

The line labeler credits every torch call to the innermost *user* frame on the
stack. ``x = self.act(x)`` in a user file whose ``act`` is transformers'
``NewGELUActivation`` gets the eight ops that module dispatches, though the
user line itself made one Python call. Advice to "fuse these dispatches" is
useless there (the ops are in a file the user does not edit), so the labeler
notes, per torch call, whether a frame of other non-user code sat between the
user line and torch, and which module that was (the outermost such frame: the
one the user line called). torch's own Python (``nn.Module.__call__``,
``F.*``, ``torch.overrides``), the harness and the standard library's call
plumbing (``functools``, ``contextlib``) do not count: an ``nn.Linear`` call is
the line's own op.

Per line the result gets ``via_library`` (the share of its torch calls that
went through library code) and ``library_modules`` (those modules, most calls
first); ``analysis/findings/analyze.py`` reads them.
"""

from __future__ import annotations

from types import FrameType

# Modules whose frames are part of "calling torch", not library code of their own.
_TRANSPARENT = ("torch", "torch_xla", "torch_neuronx", "trainium_lens", "functools", "contextlib", "typing")


class Origins:
    def __init__(self) -> None:
        self.calls: dict[str, int] = {}  # innermost label name -> torch calls
        self.library: dict[str, dict[str, int]] = {}  # name -> {library module: calls through it}
        self._module: dict[object, str] = {}  # code -> library module, "" for transparent code

    def module_of(self, frame: FrameType) -> str:
        """The library module of a non-user frame, "" for torch's and the like."""
        code = frame.f_code
        found = self._module.get(code)
        if found is None:
            name = str(frame.f_globals.get("__name__") or "")
            top = name.split(".", 1)[0]
            found = self._module[code] = "" if top in _TRANSPARENT else (name or code.co_filename)
        return found

    def note(self, name: str, module: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if module:
            per = self.library.setdefault(name, {})
            per[module] = per.get(module, 0) + 1

    def clear(self) -> None:
        self.calls.clear()
        self.library.clear()

    def snapshot(self) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
        return dict(self.calls), {k: dict(v) for k, v in self.library.items()}


def add_origins(lines: list[dict], labels: dict, snapshot: tuple[dict, dict]) -> None:
    """Set each result line's ``via_library`` and ``library_modules``."""
    calls, library = snapshot
    by_place: dict[tuple, tuple[int, dict[str, int]]] = {}
    for name, n in calls.items():
        if name in labels:
            by_place[labels[name]] = (n, library.get(name, {}))
    for line in lines:
        found = by_place.get((line["file"], line["line"], line["function"]))
        if found is None:
            continue
        n, modules = found
        line["via_library"] = sum(modules.values()) / n if n else 0.0
        line["library_modules"] = sorted(modules, key=lambda m: (-modules[m], m))
