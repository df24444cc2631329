"""Per-line device time from a processed Neuron device profile (Trn1, torch-xla).

Written against the Neuron Explorer docs (docs/xla.md, "Device time on Trn1"), not run on
hardware: ``neuron-explorer view -n X.neff -s Y.ntff --output-file DIR`` writes
Parquet tables (schema 7.4, SDK 2.31):

* ``Instruction``: ``start_ts``, ``end_ts``, ``duration_ns``, ``engine``,
  ``opcode``, ``hlo_name`` (e.g. ``dot.1``), ``stack_frame_ids`` (a list: a fused
  instruction carries several), ``layer``, ``bir_id``;
* ``StackFrame {id, file_location_id, parent_frame_id}``,
  ``StackFrameFileLocation {id, file_name_id, function_name_id, line_number}``,
  ``StackFrameFileName {id, name}``, ``StackFrameFunctionName {id, name}``;
  ids are 1-based, 0 means none.

The legacy JSON (``--output-format json``) has ``"instruction": [{"timestamp",
"duration", "label", "hlo_name": "%add.1 = add(...)", "opcode", ...}]`` with no
stack frames: its instructions reach lines through the HLO module's own metadata
(``hlo_lines``, instruction name → (file, line), e.g. from the harness's
optimized HLO), as do Parquet instructions whose ``stack_frame_ids`` are empty.

Engines run in parallel, so a line's time is the **union** of its instructions'
intervals (per engine and overall), never the sum of durations. A fused
instruction whose frames reach several lines is credited to one of them (the
rule is in ``line_times``) and listed as covering the others, so per engine the
lines' times and the unattributed time add up to the engine's busy time.

Assumptions a real profile may break are checked, and a mismatch fails with a
one-line ``NeuronProfileError``: the schema version (when the file states one),
the tables and columns above. pyarrow is imported only to read Parquet.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainium_lens.harness.intervals import union_length
from trainium_lens.harness.stacks import user_places

KNOWN_SCHEMAS = ("7.4",)
TABLES = (
    "Instruction",
    "StackFrame",
    "StackFrameFileLocation",
    "StackFrameFileName",
    "StackFrameFunctionName",
)
INSTRUCTION_COLUMNS = ("start_ts", "end_ts", "engine", "opcode", "hlo_name", "stack_frame_ids")
_HLO_TEXT = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=")
LIBRARY_PARTS = (
    "site-packages/",
    "dist-packages/",
    "/torch/",
    "/torch_xla/",
    "/torch_neuronx/",
    "/lib/python3",
)


class NeuronProfileError(ValueError):
    """A device profile this reader cannot use; the message says why in one line."""


@dataclass
class Instruction:
    start_ns: int
    end_ns: int
    engine: str
    opcode: str
    hlo_name: str  # the bare instruction name (``add.1``), whatever style the file used
    frame_ids: list[int] = field(default_factory=list)


@dataclass
class Frame:
    file: str
    function: str
    line: int
    parent: int  # 0: outermost


@dataclass
class LineTime:
    file: str
    line: int
    time_ns: int = 0  # union of its instructions' intervals, all engines
    engines: dict[str, int] = field(default_factory=dict)  # union per engine
    instructions: int = 0  # credited to this line
    hlo_names: list[str] = field(default_factory=list)  # credited to this line
    total_ns: int = 0  # union of every instruction whose user stack passes this line
    covered: list[str] = field(default_factory=list)  # fused here, credited to another line
    per_hlo: dict[str, int] = field(default_factory=dict)  # credited instructions: union per name


@dataclass
class Profile:
    instructions: list[Instruction]
    frames: dict[int, Frame]
    schema: str | None = None


def hlo_name(value: Any) -> str:
    """``dot.1`` (Parquet) or ``%add.1 = add(...)`` (legacy JSON) → ``dot.1`` / ``add.1``."""
    text = str(value or "").strip()
    m = _HLO_TEXT.match(text)
    return m.group(1) if m else text.lstrip("%")


def _check_schema(version: Any, where: str) -> str | None:
    if version is None:
        return None
    text = version.decode() if isinstance(version, bytes) else str(version)
    if text not in KNOWN_SCHEMAS:
        raise NeuronProfileError(
            f"{where}: Neuron profile schema {text} is not one this reader knows "
            f"({', '.join(KNOWN_SCHEMAS)}); check the numbers against "
            f"neuron-explorer before trusting them"
        )
    return text


# -- Parquet -------------------------------------------------------------------------


def _pyarrow() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise NeuronProfileError(
            "reading a Neuron Parquet profile needs pyarrow: pip install pyarrow"
        ) from None
    return pq


def _table_path(folder: Path, name: str) -> Path:
    for candidate in (folder / f"{name}.parquet", folder / name):
        if candidate.exists():
            return candidate
    raise NeuronProfileError(
        f"{folder}: no {name} table ({name}.parquet): not a neuron-explorer "
        f"Parquet export, or a schema this reader does not know"
    )


def _rows(folder: Path, name: str, columns: Iterable[str]) -> tuple[list[dict], dict]:
    pq = _pyarrow()
    table = pq.read_table(_table_path(folder, name))
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise NeuronProfileError(
            f"{folder}: table {name} lacks column(s) {', '.join(missing)} "
            f"(has {', '.join(table.column_names)})"
        )
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    return table.to_pylist(), meta


def read_parquet(folder: str | Path) -> Profile:
    folder = Path(folder)
    rows, meta = _rows(folder, "Instruction", INSTRUCTION_COLUMNS)
    schema = _check_schema(meta.get("schema_version") or meta.get("version"), str(folder))
    names = {r["id"]: r["name"] for r in _rows(folder, "StackFrameFileName", ("id", "name"))[0]}
    funcs = {r["id"]: r["name"] for r in _rows(folder, "StackFrameFunctionName", ("id", "name"))[0]}
    locs = {
        r["id"]: r
        for r in _rows(
            folder, "StackFrameFileLocation", ("id", "file_name_id", "function_name_id", "line_number")
        )[0]
    }
    frames = {}
    for r in _rows(folder, "StackFrame", ("id", "file_location_id", "parent_frame_id"))[0]:
        loc = locs.get(r["file_location_id"])
        if loc is None:
            raise NeuronProfileError(
                f"{folder}: stack frame {r['id']} names file location "
                f"{r['file_location_id']}, which is not in the table"
            )
        frames[r["id"]] = Frame(
            names.get(loc["file_name_id"], "?"),
            funcs.get(loc["function_name_id"], "?"),
            int(loc["line_number"]),
            int(r["parent_frame_id"] or 0),
        )
    instructions = [
        Instruction(
            int(r["start_ts"]),
            int(r["end_ts"]),
            str(r["engine"]),
            str(r["opcode"]),
            hlo_name(r["hlo_name"]),
            [int(i) for i in (r["stack_frame_ids"] or []) if i],
        )
        for r in rows
    ]
    return Profile(instructions, frames, schema)


# -- legacy JSON ---------------------------------------------------------------------


def read_json(path: str | Path) -> Profile:
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise NeuronProfileError(f"cannot read {path}: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("instruction"), list):
        raise NeuronProfileError(f'{path}: no "instruction" list: not a neuron-explorer JSON export')
    schema = _check_schema(doc.get("schema_version") or doc.get("version"), str(path))
    out = []
    for i, rec in enumerate(doc["instruction"]):
        try:
            start, dur = int(rec["timestamp"]), int(rec["duration"])
        except (KeyError, TypeError, ValueError):
            raise NeuronProfileError(f"{path}: instruction {i} lacks a numeric timestamp/duration") from None
        out.append(
            Instruction(
                start,
                start + dur,
                str(rec.get("label") or rec.get("engine") or "?"),
                str(rec.get("opcode", "")),
                hlo_name(rec.get("hlo_name")),
            )
        )
    return Profile(out, {}, schema)


def read(path: str | Path) -> Profile:
    """A folder of Parquet tables, or a legacy JSON file."""
    path = Path(path)
    return read_parquet(path) if path.is_dir() else read_json(path)


# -- lines ---------------------------------------------------------------------------


def is_library(file: str) -> bool:
    return any(part in file.replace("\\", "/") for part in LIBRARY_PARTS)


def user_frames(
    frames: dict[int, Frame], frame_id: int, is_user: Callable[[str], bool]
) -> list[tuple[str, int]]:
    """The user frames of a stack, innermost first (walking parent ids outwards)."""

    def frame(frame_id: int) -> tuple[tuple[str, int] | None, int] | None:
        found = frames.get(frame_id)
        if found is None:
            return None
        return ((found.file, found.line) if is_user(found.file) else None), found.parent

    return user_places(frame_id, frame)


def user_frame(
    frames: dict[int, Frame], frame_id: int, is_user: Callable[[str], bool]
) -> tuple[str, int] | None:
    """The first frame in user code, walking from the innermost frame outwards."""
    found = user_frames(frames, frame_id, is_user)
    return found[0] if found else None


def union_ns(intervals: Iterable[tuple[int, int]]) -> int:
    """Nanoseconds covered by the intervals, overlaps once (engines run in parallel)."""
    return int(union_length(intervals))


def _per_engine(items: Iterable[Instruction]) -> dict[str, int]:
    engines: dict[str, list[tuple[int, int]]] = {}
    for ins in items:
        engines.setdefault(ins.engine, []).append((ins.start_ns, ins.end_ns))
    return {e: union_ns(v) for e, v in sorted(engines.items())}


def _per_name(items: Iterable[Instruction]) -> dict[str, int]:
    names: dict[str, list[tuple[int, int]]] = {}
    for ins in items:
        names.setdefault(ins.hlo_name, []).append((ins.start_ns, ins.end_ns))
    return {n: union_ns(v) for n, v in sorted(names.items())}


@dataclass
class LineReport:
    """``line_times``' answer. Reconciliation: an engine runs one instruction at a
    time, so per engine the lines' times plus ``unattributed_engines`` equal
    ``busy_engines`` (each instruction is credited to one line)."""

    lines: list[LineTime]
    busy_ns: int  # union of every instruction, all engines
    busy_engines: dict[str, int]
    unattributed_ns: int  # union of the instructions no user line reaches
    unattributed_engines: dict[str, int]
    opcodes: dict[str, str] = field(default_factory=dict)  # instruction name → its opcode


def line_times(
    profile: Profile,
    hlo_lines: dict[str, tuple[str, int]] | None = None,
    is_user: Callable[[str], bool] | None = None,
) -> LineReport:
    """Per user line the union of the intervals of the instructions credited to it.

    Credit (one line per instruction, so the figures reconcile): each of the
    instruction's stack frames (a fused instruction carries several) is walked to
    its first user frame; the line most of them reach gets the time, ties going to
    the frame listed first. The other lines are *covered* (listed, no time). Every
    user frame of its stacks gets it as *total* (a helper's callers)."""

    def default_user(f: str) -> bool:
        return not is_library(f)

    user = is_user or default_user
    credited: dict[tuple[str, int], list[Instruction]] = {}
    totals: dict[tuple[str, int], list[tuple[int, int]]] = {}  # intervals through each line
    covered: dict[tuple[str, int], set[str]] = {}
    lost: list[Instruction] = []
    walked: dict[int, list[tuple[str, int]]] = {}  # per frame id: many instructions share a stack

    def stack_of(frame_id: int) -> list[tuple[str, int]]:
        found = walked.get(frame_id)
        if found is None:
            found = walked[frame_id] = user_frames(profile.frames, frame_id, user)
        return found

    for ins in profile.instructions:
        stacks = [s for s in map(stack_of, ins.frame_ids) if s]
        if not stacks and hlo_lines and ins.hlo_name in hlo_lines:
            stacks = [[hlo_lines[ins.hlo_name]]]
        if not stacks:
            lost.append(ins)
            continue
        firsts = [s[0] for s in stacks]
        place = max(firsts, key=lambda p: (firsts.count(p), -firsts.index(p)))
        credited.setdefault(place, []).append(ins)
        for other in set(firsts) - {place}:
            covered.setdefault(other, set()).add(ins.hlo_name)
        span = (ins.start_ns, ins.end_ns)
        for where in {p for s in stacks for p in s}:
            totals.setdefault(where, []).append(span)
    out = []
    for place in set(credited) | set(covered) | set(totals):
        items = credited.get(place, [])
        out.append(
            LineTime(
                place[0],
                place[1],
                union_ns((i.start_ns, i.end_ns) for i in items),
                _per_engine(items),
                len(items),
                sorted({i.hlo_name for i in items}),
                union_ns(totals.get(place, [])),
                sorted(covered.get(place, set())),
                _per_name(items),
            )
        )
    out.sort(key=lambda t: (-t.time_ns, t.file, t.line))
    everything = profile.instructions
    return LineReport(
        out,
        union_ns((i.start_ns, i.end_ns) for i in everything),
        _per_engine(everything),
        union_ns((i.start_ns, i.end_ns) for i in lost),
        _per_engine(lost),
        {i.hlo_name: i.opcode for i in everything},
    )
