"""A processed Neuron device profile (Parquet or legacy JSON) → device instructions
with their stack frames and work figures. ``neuron_lines.line_times`` turns them
into per-line figures.

Facts and their sources: docs/neuron.md. In short: ``neuron-explorer view
--output-file DIR`` writes one Parquet file per table (Trn1 and Trn2/Trn3 alike;
schema 7.4.0 in SDK 2.31, 12.0.1 in SDK 2.33). The tables read here:

* ``Instruction``: ``start_ts``, ``end_ts`` (or ``duration_ns``), ``engine`` (needed);
  ``opcode``, ``hlo_name``, ``stack_frame_ids`` (the frames an instruction maps to:
  several after fusion; a string such as ``[101, 102]`` in 7.4.0, a list read the
  same way), and the work columns ``raw_flops``, ``adjusted_flops``,
  ``hbm_read_bytes``, ``hbm_write_bytes``, ``spill_save_bytes``,
  ``spill_reload_bytes`` (optional: a work figure the export lacks is reported as
  absent, never as zero);
* ``StackFrame {id, file_location_id, parent_frame_id}`` →
  ``StackFrameFileLocation {id, file_name_id, function_name_id, line_number}`` →
  ``StackFrameFileName {id, name}`` (+ ``StackFrameFunctionName``); ids are
  one-based (stored as strings in 7.4.0), 0 means none;
* ``ExecutionInfo`` (optional): the NEFF of each execution the profile holds, to
  check how many steps a session profile spans.

Columns go through ``neuron_export.Export``, which reads the export's own
``SchemaFields`` and ``Metadata.profile_schema_version``: any schema version is
read, and a profile is refused only when a column it needs is missing (the error
names it). The legacy JSON (``--output-format json``, up to SDK 2.33) has
``"instruction": [{"timestamp", "duration", "label", "hlo_name": "%add.1 = ..."}]``
and no stack frames: its instructions reach lines through the host's HLO names.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainium_lens.traces.neuron_export import (
    SIZE_UNITS,
    TIME_UNITS,
    Export,
    NeuronProfileError,
    has_tables,
)

__all__ = ["NeuronProfileError", "Instruction", "Frame", "Profile", "read", "read_all", "hlo_name"]

# Per-instruction work, in this order wherever a tuple of them is kept.
WORK = (
    "raw_flops",
    "adjusted_flops",
    "hbm_read_bytes",
    "hbm_write_bytes",
    "spill_save_bytes",
    "spill_reload_bytes",
)
_HLO_TEXT = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=")
_ID_TOKEN = re.compile(r"[^\s,\[\]\"']+")


@dataclass
class Instruction:
    start_ns: int
    end_ns: int
    engine: str
    opcode: str
    hlo_name: str  # the bare instruction name (``add.1``), whatever style the file used
    frame_ids: list[int] = field(default_factory=list)
    work: tuple[int, ...] = ()  # one per ``Profile.work_fields``


@dataclass
class Frame:
    file: str
    function: str
    line: int
    parent: int  # 0: outermost


@dataclass
class Profile:
    instructions: list[Instruction]
    frames: dict[int, Frame]
    schema: str | None = None  # Metadata.profile_schema_version (None: not stated)
    work_fields: tuple[str, ...] = ()  # the WORK columns this profile carries
    executions: list[str] = field(default_factory=list)  # NEFF per execution, in order


def hlo_name(value: Any) -> str:
    """``dot.1`` (Parquet) or ``%add.1 = add(...)`` (legacy JSON) → ``dot.1`` / ``add.1``."""
    text = str(value or "").strip()
    m = _HLO_TEXT.match(text)
    return m.group(1) if m else text.lstrip("%")


class _Ids:
    """Frame ids as ints (the stack walk's currency): a one-based index as stored
    (int or string) is itself; anything else gets a stable id of its own."""

    def __init__(self) -> None:
        self.other: dict[str, int] = {}

    def __call__(self, value: Any) -> int:
        text = str(value).strip() if value is not None else ""
        if not text:
            return 0
        if text.isdigit():
            return int(text)
        return self.other.setdefault(text, (1 << 48) + len(self.other))


def _frame_list(value: Any, ids: _Ids, memo: dict[str, list[int]]) -> list[int]:
    """``stack_frame_ids`` as stored: a list, or a string such as ``[101, 102, 103]``."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [i for i in map(ids, value) if i]
    text = str(value)
    found = memo.get(text)
    if found is None:
        found = memo[text] = [i for i in map(ids, _ID_TOKEN.findall(text)) if i]
    return found


# -- Parquet -------------------------------------------------------------------------


def read_parquet(folder: str | Path) -> Profile:
    export = Export(folder)
    table = "Instruction"
    cols = export.columns(
        table,
        ("start_ts", "engine"),
        ("end_ts", "duration_ns", "opcode", "hlo_name", "stack_frame_ids", *WORK),
    )
    if "end_ts" not in cols and "duration_ns" not in cols:
        raise NeuronProfileError(export.missing(table, "end_ts") + " (nor duration_ns)")
    if "stack_frame_ids" not in cols and "hlo_name" not in cols:
        raise NeuronProfileError(export.missing(table, "stack_frame_ids") + " (nor hlo_name)")
    ns = {c: export.scale(table, c, TIME_UNITS, "nanoseconds") for c in ("start_ts", "end_ts", "duration_ns")}
    work_fields = tuple(c for c in WORK if c in cols)
    for c in work_fields:
        if "bytes" in c:
            export.scale(table, c, SIZE_UNITS, "")  # a size in a unit not converted: refuse
    starts = [int(v or 0) * ns["start_ts"] for v in cols["start_ts"]]
    if "end_ts" in cols:
        ends = [int(v or 0) * ns["end_ts"] for v in cols["end_ts"]]
    else:
        ends = [s + int(d or 0) * ns["duration_ns"] for s, d in zip(starts, cols["duration_ns"], strict=True)]
    n = len(starts)
    blank = [None] * n
    opcodes, names = cols.get("opcode", blank), cols.get("hlo_name", blank)
    frame_col = cols.get("stack_frame_ids", blank)
    work_cols = [cols[c] for c in work_fields]
    ids = _Ids()
    memo: dict[str, list[int]] = {}
    instructions = [
        Instruction(
            starts[i],
            ends[i],
            str(cols["engine"][i]),
            str(opcodes[i] or ""),
            hlo_name(names[i]),
            _frame_list(frame_col[i], ids, memo),
            tuple(int(w[i] or 0) for w in work_cols),
        )
        for i in range(n)
    ]
    frames = _frames(export, ids) if any(i.frame_ids for i in instructions) else {}
    return Profile(instructions, frames, export.version, work_fields, _executions(export))


def _frames(export: Export, ids: _Ids) -> dict[int, Frame]:
    """The stack-frame tables, needed once an instruction names a frame."""
    names = export.columns("StackFrameFileName", ("id", "name"))
    files = {ids(k): str(v) for k, v in zip(names["id"], names["name"], strict=True)}
    funcs: dict[int, str] = {}
    if export.has("StackFrameFunctionName"):  # names only; not needed for a line
        got = export.columns("StackFrameFunctionName", ("id", "name"))
        funcs = {ids(k): str(v) for k, v in zip(got["id"], got["name"], strict=True)}
    locs = export.columns(
        "StackFrameFileLocation", ("id", "file_name_id", "line_number"), ("function_name_id",)
    )
    fn_ids = locs.get("function_name_id", [None] * len(locs["id"]))
    where = {
        ids(k): (files.get(ids(f), "?"), funcs.get(ids(g), "?"), int(line or 0))
        for k, f, g, line in zip(locs["id"], locs["file_name_id"], fn_ids, locs["line_number"], strict=True)
    }
    table = export.columns("StackFrame", ("id", "file_location_id", "parent_frame_id"))
    frames = {}
    for k, loc, parent in zip(table["id"], table["file_location_id"], table["parent_frame_id"], strict=True):
        found = where.get(ids(loc))
        if found is None:
            raise NeuronProfileError(
                f"{export.where}: stack frame {k} names file location {loc}, which is not in "
                f"StackFrameFileLocation"
            )
        frames[ids(k)] = Frame(found[0], found[1], found[2], ids(parent))
    return frames


def _executions(export: Export) -> list[str]:
    if not export.has("ExecutionInfo"):
        return []
    cols = export.columns("ExecutionInfo", ("execution_index",), ("neff_name",))
    names = cols.get("neff_name", [None] * len(cols["execution_index"]))
    return [
        str(name or "")
        for _i, name in sorted(zip(cols["execution_index"], names, strict=True), key=lambda r: r[0])
    ]


# -- legacy JSON ---------------------------------------------------------------------


def read_json(path: str | Path) -> Profile:
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise NeuronProfileError(f"cannot read {path}: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("instruction"), list):
        raise NeuronProfileError(f'{path}: no "instruction" list: not a neuron-explorer JSON export')
    version = doc.get("profile_schema_version") or doc.get("schema_version") or doc.get("version")
    records = doc["instruction"]
    # the same work names as the Parquet columns, where a JSON export carries them
    work_fields = tuple(c for c in WORK if any(isinstance(r, dict) and c in r for r in records))
    out = []
    for i, rec in enumerate(records):
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
                work=tuple(int(rec.get(c) or 0) for c in work_fields),
            )
        )
    return Profile(out, {}, str(version) if version else None, work_fields)


# -- entry points --------------------------------------------------------------------


def read_all(path: str | Path) -> list[Profile]:
    """Every device profile under ``path``: a folder of Parquet tables, a folder of
    such folders (a session processed whole: one per device profile), or a JSON file."""
    path = Path(path)
    if not path.is_dir():
        return [read_json(path)]
    if has_tables(path):
        return [read_parquet(path)]
    found = sorted(p for p in path.rglob("*") if p.is_dir() and has_tables(p))
    # a session exported as JSON: one device_profile_model_<id>.json per compiled model
    jsons = sorted(p for p in path.rglob("device_profile*.json") if p.is_file())
    if not found and not jsons:
        raise NeuronProfileError(
            f"{path}: no Instruction table (Instruction.parquet) and no JSON profile: not a "
            f"neuron-explorer export"
        )
    return [read_parquet(p) for p in found] or [read_json(p) for p in jsons]


def read(path: str | Path) -> Profile:
    """One device profile: a folder of Parquet tables, or a legacy JSON file."""
    path = Path(path)
    if path.is_dir() and not has_tables(path):
        raise NeuronProfileError(
            f"{path}: no Instruction table (Instruction.parquet): not a neuron-explorer Parquet export"
        )
    return read_all(path)[0]
