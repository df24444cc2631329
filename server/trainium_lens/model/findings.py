"""A result's findings and the fixes written as edits of the user's source
(docs/fixes.md). Parts of the result document (``model/result.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Edit:
    """A fix written as a precise edit of the user's source (``analysis/fixes/``):
    replace ``[start_line:start_col, end_line:end_col)`` (1-based lines, 0-based
    columns, as Python's ``ast`` counts them) of ``file`` by ``replacement``.
    ``original`` is the text the range held when the edit was built: an edit
    whose range no longer holds it is refused (the file was edited since)."""

    file: str  # workspace-relative, as the result's files are
    start_line: int
    start_col: int
    end_line: int
    end_col: int
    replacement: str = field(metadata={"text": True})  # source text: its lines kept
    original: str = field(metadata={"text": True})
    title: str  # "torch.nn.functional.rms_norm", "AdamW(..., fused=True)": what it changes
    function: str  # the marked function a measurement runs (the result's)


@dataclass
class Finding:
    kind: str  # "dispatches" | "h2d_copy" | "cpu_fallback" | "no_device_time" | "compile_in_steps" | ...
    severity: str  # "error" | "warning" | "info" | "hint"
    file: str
    line: int
    message: str
    # advice that does not claim a speed-up, or one this run measured (the optimizer's)
    fix: str | None = None
    # schema 3, optional: a change named but not measured in this run ("torch.rms_norm"):
    # the message says it is untested; ``trainium-lens fix`` measures it when ``edit`` is set
    candidate: str | None = None
    edit: Edit | None = None  # schema 3, optional: the fix as an edit (docs/fixes.md)
