"""Prove a fix before it is applied: the original and the rewritten function run as
variants of one batch (``analysis/variants.py``), on the run's host and backend,
on the same inputs, and the fix holds only when it is faster on the true clock
and its output is the original's within the dtype's tolerance.

How: two copies of the profiled file go into a scratch folder under the
workspace's ``.trainium-lens/fixes/`` — ``before.py`` as the run measured it,
``after.py`` with the edit — and a driver file marks two functions that call
each copy's function, with one ``inputs=`` function (the original's, called
once: both variants get the same tensors) and one ``compare=`` group. Each copy
is imported after ``torch.manual_seed(0)``, so a model or optimizer built at
import time starts from the same weights in both. The harness times each
variant without the profiler (the unprofiled walls) and records its first
call's output against the first variant's. A training step runs whole
(forward, backward, optimizer), as the user wrote it. The user's file is never
written here; the scratch folder is removed whatever happens (one a killed
``fix`` left, named by its pid, by the next one), and is never made through a
link (a committed ``.trainium-lens/fixes -> elsewhere`` is refused). The copies
keep the file's encoding (``model/files.py``), so they read as the file does.

A stored edit is untrusted (a repository can commit a result): the file it names
is read only when it is a regular file inside the workspace, bounded
(``current_text``), so ``/dev/zero``, ``/dev/stdin`` or a FIFO is refused unread.
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from trainium_lens.analysis.fixes.attach import rederived
from trainium_lens.analysis.fixes.source import apply, holds
from trainium_lens.analysis.variants import BASIS_DEVICE, compare_variants
from trainium_lens.engine import runner
from trainium_lens.errors import Cancelled, LensError, UsageError
from trainium_lens.harness.pairs import FASTER, GAIN, SAME, SLOWER, UNDECIDED, judge
from trainium_lens.model import figures
from trainium_lens.model.codec import ResultError
from trainium_lens.model.files import decode_source, source_bytes
from trainium_lens.model.job import make_job
from trainium_lens.model.paths import UnsafePath, in_workspace_folder
from trainium_lens.model.result import Edit, Finding, Result, read_regular
from trainium_lens.targets.base import EventSink, Target

MIN_GAIN = GAIN  # faster by less is within what two runs of the same code differ by here
MIN_TIMING_CALLS = 50  # unprofiled calls per variant: a steadier median than the run's default 20
PAIRED_S = 30  # the bound on the rounds in turn (paired_s=): then "not measurable on this host now"
NOT_MEASURABLE = "not measurable"
SCRATCH = ".trainium-lens/fixes"
COPIES = ("before.py", "after.py", "lens_fix.py")  # a scratch folder's files: shipped to a host
MAX_SOURCE_BYTES = 16 << 20  # a source file an edit may name: far above any real one


@dataclass
class Measured:
    """One fix measured: what the CLI prints and ``--json`` writes."""

    n: int  # 1-based, in the run's order of fixes
    file: str
    line: int  # the finding's line
    edit_line: int  # where the edit starts
    title: str
    backend: str
    speedup: float | None  # before / after on ``basis``; None: not measured
    before_us: float | None
    after_us: float | None
    basis: str | None  # "paired unprofiled wall" | "device time"
    outputs_equal: bool | None
    max_abs_diff: float | None
    held: bool
    text: str  # the one-line verdict
    applied: bool = False
    error: str | None = None
    # the paired verdict (cpu clock, harness/pairs.py): "faster" | "slower" | "same" |
    # "not measurable"; the speedup's interval at 99 %, the pairs and seconds it took
    verdict: str | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    pairs: int = 0
    paired_s: float | None = None
    precise: bool = False  # the interval within ±15 % of the speedup: its size is one figure

    def to_dict(self) -> dict:
        return asdict(self)


def current_text(workspace: Path, edit: Edit) -> str:
    """The file's text now; a ``UsageError`` (one line) if it is not a regular file
    inside the workspace, or no longer holds the edit."""
    path = workspace / edit.file
    try:
        if Path(edit.file).is_absolute() or ".." in Path(edit.file).parts:
            raise UnsafePath(f"{edit.file} is not a path inside the workspace")
        in_workspace_folder(path, workspace, "")
        text = decode_source(read_regular(path, MAX_SOURCE_BYTES))
    except (UnsafePath, ResultError) as exc:
        raise UsageError(f"the stored edit names {edit.file!r}: {exc}; not read") from None
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise UsageError(f"cannot read {edit.file}: {exc}") from None
    if not holds(text, edit):
        raise UsageError(
            f"{edit.file} changed since the run (lines {edit.start_line}–{edit.end_line} no longer hold "
            f"what was measured): profile it again, then fix"
        )
    return text


def checked_edit(workspace: Path, result: Result, finding: Finding) -> Edit:
    """``finding``'s edit when it is the one the builder (``analysis/fixes``) writes of
    the file as it is now; a ``UsageError`` (one line) otherwise: a stored replacement
    (a repository can commit a result) runs during the measurement and lands in the
    file, so only an edit Trainium Lens derives itself is ever measured or applied."""
    edit = finding.edit
    assert edit is not None
    text = current_text(workspace, edit)
    if rederived(result, finding, text) != edit:
        raise UsageError(
            f"the fix stored for {edit.file}:{edit.start_line} ({edit.title}) is not the edit Trainium Lens "
            f"builds from the file as it is: not measured (profile it again)"
        )
    return edit


def driver(result: Result, edit: Edit, folder: Path, source_dir: Path, paired_s: int = PAIRED_S) -> str:
    """The driver file: two marked functions, one per copy. Its paths are its own
    folder's and the profiled file's folder relative to it, so it runs wherever the
    workspace is copied (a host's work dir: ``measure`` ships the folder with the job)."""
    p = result.function.protocol
    timing = max(p.timing_calls, MIN_TIMING_CALLS)
    # on the cpu clock the verdict is the unprofiled walls': one profiled step is enough
    wait, active = (0, 1) if result.backend == "cpu" else (p.wait, p.active)
    options = (
        f"wait={wait} warmup={max(p.warmup, 1)} active={active} timing_calls={timing} compare=lens_fix"
        f" paired_s={paired_s}"
    )
    inputs = result.function.inputs
    head = [
        '"""Written by trainium-lens fix: the function before and after one edit, as variants."""',
        "import importlib.util",
        "import os",
        "import sys",
        "",
        "import torch",
        "",
        "_HERE = os.path.dirname(os.path.abspath(__file__))",
        "# the user's own imports resolve as in the run",
        f"sys.path.insert(0, os.path.normpath(os.path.join(_HERE, {os.path.relpath(source_dir, folder)!r})))",
        "",
        "",
        "def _load(path, name):",
        "    torch.manual_seed(0)  # the same weights for a model built at import",
        "    spec = importlib.util.spec_from_file_location(name, path)",
        "    module = importlib.util.module_from_spec(spec)",
        "    sys.modules[name] = module",
        "    spec.loader.exec_module(module)",
        "    return module",
        "",
        "",
        "_before = _load(os.path.join(_HERE, 'before.py'), 'lens_fix_before')",
        "_after = _load(os.path.join(_HERE, 'after.py'), 'lens_fix_after')",
        "",
    ]
    name = result.function.name
    for variant, module in (("before", "_before"), ("after", "_after")):
        marker = options
        if inputs:
            # each copy builds its own inputs (the harness seeds before each call, so they
            # start alike): an edit may be in the inputs function itself (the optimizer's
            # constructor), and a training step must not start from the other one's state
            head += ["", f"def lens_inputs_{variant}():", f"    return {module}.{inputs}()", ""]
            marker += f" inputs=lens_inputs_{variant}"
        head += [
            "",
            f"# trainium: profile {marker}",
            f"def {variant}(*args, **kwargs):",
            f"    return {module}.{name}(*args, **kwargs)",
            "",
        ]
    return "\n".join(head)


def measure(
    result: Result,
    edit: Edit,
    n: int,
    line: int,
    workspace: Path,
    target: Target,
    on_event: EventSink | None = None,
    cancel: threading.Event | None = None,
    timeout: float | None = None,
    profile: Callable = runner.profile,
    paired_s: int = PAIRED_S,
) -> Measured:
    """Run the original and the edited function as variants; never writes the user's file."""
    text = current_text(workspace, edit)
    base = dict(
        n=n, file=edit.file, line=line, edit_line=edit.start_line, title=edit.title, backend=result.backend
    )
    if edit.file != result.function.file:
        return _failed(base, f"the edit is in {edit.file}, not in the profiled file: not measured")
    folder = scratch_folder(workspace)
    try:
        source = workspace / edit.file
        (folder / "before.py").write_bytes(source_bytes(text, source, edit.file))
        (folder / "after.py").write_bytes(source_bytes(apply(text, edit), source, edit.file))
        (folder / "lens_fix.py").write_text(
            driver(result, edit, folder, (workspace / result.function.file).parent, paired_s),
            encoding="utf-8",
        )
        job = make_job(folder / "lens_fix.py", backend=result.backend, workspace=workspace)
        job.ships = [f"{PurePosixPath(job.file).parent}/{name}" for name in COPIES]
        try:
            results = profile(job, target, on_event, cancel, timeout, None)
        except (UsageError, Cancelled):
            raise  # the user's request, or the user stopped it: nothing to report as the fix's
        except LensError as err:  # the rewritten code failed (or the run did): reported, not applied
            return _failed(base, " ".join(str(err).split()))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return _verdict(base, results)


def scratch_folder(workspace: Path) -> Path:
    """A new folder of its own under ``<workspace>/.trainium-lens/fixes/``, never made
    through a link: a committed ``.trainium-lens`` or ``fixes`` link is refused."""
    for part in (workspace / ".trainium-lens", workspace / SCRATCH):
        if part.is_symlink():
            raise UsageError(f"{part} is a symbolic link: fix writes its copies only in the workspace")
    scratch = workspace / SCRATCH
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        in_workspace_folder(scratch, workspace, SCRATCH)
    except UnsafePath as exc:
        raise UsageError(f"{exc}: fix writes its copies only in the workspace") from None
    _sweep(scratch)
    folder = scratch / f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    folder.mkdir()
    return folder


def _sweep(scratch: Path) -> None:
    """Remove the copies a ``fix`` that was killed (``kill -9``: no ``finally`` ran) left:
    each folder is named by the pid that made it, and one whose process is gone goes.
    A link is removed, never followed; anything not named so is left alone."""
    for entry in scratch.iterdir():
        pid, _, rest = entry.name.partition("-")
        if not (pid.isdigit() and rest) or _alive(int(pid)):
            continue
        if entry.is_symlink() or not entry.is_dir():
            entry.unlink(missing_ok=True)
        else:
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process, or not a pid: not ours to judge
    return True


def _failed(base: dict, why: str) -> Measured:
    return Measured(
        **base,
        speedup=None,
        before_us=None,
        after_us=None,
        basis=None,
        outputs_equal=None,
        max_abs_diff=None,
        held=False,
        text=f"not measured: {why}",
        error=why,
    )


def _verdict(base: dict, results: list[Result]) -> Measured:
    by = {r.function.name: r for r in results}
    if set(by) != {"before", "after"}:
        return _failed(base, "the measurement returned no result for both versions")
    cmp = compare_variants([by["before"], by["after"]])
    ref, row = cmp.rows
    equal = row.verdict == "ok" if row.verdict in ("ok", "differs", "shape differs") else None
    check = _output_check(row.verdict, equal, row.max_abs_diff, row.tolerance)
    backend = base["backend"]
    if cmp.speedup_basis == BASIS_DEVICE:
        return _device_verdict(base, ref.time_us, row.time_us, equal, row.max_abs_diff, check)
    totals, after = by["before"].totals, by["after"].totals
    v = judge(after.paired_ratios)
    st = by["after"].stability
    seconds = st.paired_s if st is not None else None
    before_us, after_us = totals.paired_wall_us_median, after.paired_wall_us_median
    verdict = NOT_MEASURABLE if v.verdict == UNDECIDED else v.verdict
    held = bool(v.verdict == FASTER and equal)
    if v.ratio is None:
        timing = f"no paired figure on {backend}: not measurable on this host now"
    else:
        ci = (
            f"99% interval {_x(v.low)}–{_x(v.high)}"
            if v.low is not None and v.high is not None
            else "too few pairs for an interval"
        )
        per = (
            f"{figures.time_us(before_us)} → {figures.time_us(after_us)} per call, paired medians; "
            if before_us and after_us
            else ""
        )
        took = f" in {seconds:.3g} s" if seconds else ""
        measured = f"({per}{ci}, {v.pairs} pairs{took})"
        wide = (
            ""
            if v.precise or v.low is None or v.high is None
            else f", by {_x(v.low)}–{_x(v.high)} (median {_x(v.ratio)}; its size not measurable to ±15% "
            f"on this host now)"
        )
        words = {
            FASTER: f"{_x(v.ratio)} faster" if not wide else f"faster{wide}",
            SLOWER: f"{_x(1 / v.ratio)} slower" if not wide else f"slower{wide}",
            SAME: f"the same within ±{(MIN_GAIN - 1) * 100:.0f}% ({_x(v.ratio)})",
            UNDECIDED: f"not measurable on this host now ({_x(v.ratio)}, undecided)",
        }
        timing = f"{words[v.verdict]} on {backend} {measured}"
    why = ""
    if not held:
        if v.verdict == FASTER and not equal:
            why = "; outputs differ: not applied" if equal is False else "; not applied"
        elif v.verdict == UNDECIDED:
            why = "; nothing applied"
        else:
            why = "; not faster: not applied" if v.verdict == SAME else "; slower: not applied"
    return Measured(
        **base,
        speedup=v.ratio,
        before_us=before_us,
        after_us=after_us,
        basis="paired unprofiled wall",
        outputs_equal=equal,
        max_abs_diff=row.max_abs_diff,
        held=held,
        text=f"{timing}, {check}{why}",
        verdict=verdict,
        speedup_low=v.low,
        speedup_high=v.high,
        pairs=v.pairs,
        paired_s=seconds,
        precise=v.precise,
    )


def _x(value: float) -> str:
    """A paired ratio to two places: ``1.02×`` (three significant digits would print ``1×``
    for 1.0016, and the verdict's edge is at 1.05)."""
    return f"{value:.2f}×"


def _output_check(verdict: str, equal: bool | None, diff: float | None, tolerance: float | None) -> str:
    if equal is None:
        return "outputs not compared (no tensor returned)" if verdict == "n/a" else f"outputs {verdict}"
    if equal:
        return f"outputs equal (max |diff| {diff:.1g})" if diff is not None else "outputs equal"
    return f"outputs differ (max |diff| {diff:.2g}, tolerance {tolerance or 0:.2g})"


def _device_verdict(
    base: dict, before_us: float, after_us: float, equal: bool | None, diff: float | None, check: str
) -> Measured:
    """cuda/neuron: device time, which other processes' load on the host does not reach."""
    speed = before_us / after_us if before_us and after_us else None
    backend = base["backend"]
    if speed is None:
        timing, verdict = f"no figure to compare on {backend}", NOT_MEASURABLE
    else:
        word, factor = ("faster", speed) if speed >= 1 else ("slower", 1 / speed)
        per = f"({figures.time_us(before_us)} → {figures.time_us(after_us)} per call, device time)"
        timing = f"{figures.ratio(factor)} {word} on {backend} {per}"
        verdict = FASTER if speed >= MIN_GAIN else (SLOWER if speed <= 1 / MIN_GAIN else SAME)
    held = bool(verdict == FASTER and equal)
    why = (
        ""
        if held
        else ("; outputs differ: not applied" if verdict == FASTER else "; not faster: not applied")
    )
    return Measured(
        **base,
        speedup=speed,
        before_us=before_us,
        after_us=after_us,
        basis="device time",
        outputs_equal=equal,
        max_abs_diff=diff,
        held=held,
        text=f"{timing}, {check}{why}",
        verdict=verdict,
    )
