"""The optimizer's measured implementation as an edit of its constructor call.

The optimizer finding names what the harness measured fastest on copies of the
run's parameters (``fused=True`` or ``foreach=True``,
``analysis/findings/optimizer.py``). The edit sets that keyword on the one call
of the optimizer's class in the file that stepped it (``torch.optim.AdamW(...)``
or ``AdamW(...)``), replacing a ``fused=``/``foreach=`` already there. No edit
where the file holds no such call, or more than one (which one ran is not
known), or the call passes ``**kwargs`` (a keyword could be given twice).
"""

from __future__ import annotations

import ast

from trainium_lens.analysis.fixes.source import edit_of, segment
from trainium_lens.model.result import Edit

FLAGS = ("fused", "foreach")


def optimizer_edit(text: str, file: str, cls: str, config: str, function: str) -> Edit | None:
    """``config`` is the trial's (``"fused=True"``, ``"foreach=True"``)."""
    flag, _, value = config.partition("=")
    if flag not in FLAGS or value != "True":
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _name(n.func) == cls]
    if len(calls) != 1:
        return None
    call = calls[0]
    if any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    title = f"{cls}(..., {flag}=True)"
    present = [k for k in call.keywords if k.arg in FLAGS]
    if len(present) > 1:
        return None
    if present:  # foreach=True → fused=True: only that keyword changes
        return edit_of(text, file, present[0], present[0], f"{flag}=True", title, function)
    last = (list(call.args) + [k.value for k in call.keywords])[-1:] or None
    if last is None:  # ``AdamW()``: no parameters given, nothing to write beside
        return None
    node = last[0]
    keyword = next((k for k in call.keywords if k.value is node), None)
    anchor = keyword or node  # the last argument, kept as written
    return edit_of(text, file, anchor, anchor, f"{segment(text, anchor)}, {flag}=True", title, function)


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None
