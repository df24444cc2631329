"""Which findings carry their fix as an edit (``Finding.edit``), built from the
source the run measured: the RMSNorm pattern (``rmsnorm.py``) and the
optimizer's implementation (``optimizer.py``). Every other finding offers none:
its fix cannot be written safely from what the run saw."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from trainium_lens.analysis.findings.ops import direct_ops, op_base
from trainium_lens.analysis.findings.patterns import PATTERNS, judged
from trainium_lens.analysis.fixes.optimizer import optimizer_edit
from trainium_lens.analysis.fixes.rmsnorm import rms_norm_edit
from trainium_lens.analysis.noise import FIX_OFFERED
from trainium_lens.model.result import Edit, Finding, Result

Reader = Callable[[str], "str | None"]  # a workspace-relative file → its text (None: unreadable)
OPTIMIZER_KINDS = ("optimizer_loop", "optimizer_choice")
_CONFIG = re.compile(r"^(?P<cls>\w+)\(\.\.\., (?P<config>\w+=True)\)")
MEASURE = " `trainium-lens fix` measures it as an edit on this backend."


def with_edits(result: Result, findings: list[Finding], read: Reader) -> list[Finding]:
    """``findings`` with an ``edit`` on each whose fix can be written safely."""
    texts: dict[str, str | None] = {}

    def text_of(file: str) -> str | None:
        if file not in texts:
            texts[file] = read(file)
        return texts[file]

    rms = {(f.file, f.line): lines for f, lines in _rms_norm_lines(result)}
    out = []
    for f in findings:
        edit = None
        if f.kind == "fused_op" and (f.file, f.line) in rms:
            text = text_of(f.file)
            if text is not None:
                edit = rms_norm_edit(text, f.file, rms[(f.file, f.line)], result.function.name)
        elif f.kind in OPTIMIZER_KINDS:
            edit = _optimizer(result, f, text_of)
        if edit is not None:
            f = dataclasses.replace(f, edit=edit, message=f.message + MEASURE)
        out.append(f)
    return out


def rederived(result: Result, finding: Finding, text: str) -> Edit | None:
    """The edit the builder makes of ``finding`` from ``text`` (its file as it is now),
    or None: a stored result is untrusted, so ``fix`` measures and applies only the
    edit Trainium Lens itself writes of that source, never a stored replacement."""
    if finding.edit is None:
        return None
    file = finding.edit.file
    bare = dataclasses.replace(finding, edit=None)
    if finding.kind == FIX_OFFERED:
        # a noisy run withholds the finding and offers its edit (analysis/noise.py): built
        # again as the finding it stands for (a candidate: the RMSNorm's; else the
        # optimizer's, whose fix the edit's title names)
        bare = dataclasses.replace(
            bare, kind="fused_op" if finding.candidate else OPTIMIZER_KINDS[0], fix=finding.edit.title
        )
    (out,) = with_edits(result, [bare], lambda rel: text if rel == file else None)
    return out.edit


def _rms_norm_lines(result: Result) -> list[tuple[Finding, list[int]]]:
    """The RMSNorm findings with the lines that dispatched its own ops (a cast line
    before it, ``x.to(torch.float32)``, belongs to no edit)."""
    (pattern,) = [p for p in PATTERNS if p.name == "rms_norm"]
    wanted = frozenset().union(*pattern.needs)
    found = []
    for f, stats in judged(result):
        if f.candidate != pattern.fix:
            continue
        lines = [s.line for s in stats if {op_base(o.name) for o in direct_ops(s, result)} & wanted]
        if lines:
            found.append((f, lines))
    return found


def _optimizer(result: Result, f: Finding, text_of: Callable[[str], str | None]) -> Edit | None:
    match = _CONFIG.match(f.fix or "")
    if match is None:
        return None
    for file in dict.fromkeys([f.file, result.function.file]):
        text = text_of(file)
        if text is None:
            continue
        edit = optimizer_edit(text, file, match["cls"], match["config"], result.function.name)
        if edit is not None:
            return edit
    return None
