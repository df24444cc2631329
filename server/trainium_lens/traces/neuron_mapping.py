"""TorchNeuron's op → runtime-execution map, ``framework_mapping_<timestamp>.json``.

What it is (docs/neuron.md, "The exact join"): TorchNeuron's ``NeuronProfiler``
writes it into its output folder when runtime profiling and PyTorch profiling run
together (not under ``NEURON_LAUNCH_BLOCKING=1``). Its schema, version 1::

    {"version": 1,
     "data": [{"nrta_seq_id": <int>,
               "framework_op_exec_ids": [{"seq_nr": <int64>, "th_id": <uint64>,
                                          "stream_id": <int>}, ...]}, ...]}

One entry per runtime execution (``nrta_seq_id``, the runtime's own count of
executions), listing every op it ran (several when TorchNeuron concatenated ops).
``seq_nr`` is the autograd sequence counter *as the op was submitted* and
``th_id`` PyTorch's own thread counter (``RecordFunction``'s, the profiler's
``FunctionEvent.thread``), not the OS thread id: the rules that turn those keys into
ops are in ``neuron_join.py``.

A file that does not follow the schema is refused whole (``NeuronProfileError``,
one line naming the file and the entry): a half-read map would place device time
silently wrong, and the join then falls back to time windows and says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainium_lens.traces.neuron_export import TIME_UNITS, Export, NeuronProfileError

PATTERN = "framework_mapping_*.json"
VERSIONS = (1,)  # the schema versions read (TorchNeuron's source, docs/neuron.md)
MAX_BYTES = 512 * 1024 * 1024  # one entry per execution: a map this large is not one


@dataclass(frozen=True)
class OpKey:
    seq_nr: int  # at::sequence_number::peek() when the op was submitted
    th_id: int  # RecordFunction::currentThreadId(): PyTorch's counter, 1 for the first thread
    stream_id: int = 0


@dataclass
class Execution:
    seq_id: int  # the runtime's nrta_seq_id
    start_ns: int
    end_ns: int

    @property
    def ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)


@dataclass
class Mapping:
    executions: dict[int, list[OpKey]]  # nrta_seq_id -> the ops it ran, in the file's order
    files: list[str]


def find(folder: str | Path) -> list[Path]:
    """Every map under ``folder`` (one per profiled process / export), sorted."""
    root = Path(folder)
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob(PATTERN) if p.is_file())


def _int(value: Any, what: str) -> int:
    # bool is an int in Python, and a float that happens to be whole is not an id
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} is {value!r}, not an integer")
    return value


def _entry(item: Any, k: int) -> tuple[int, list[OpKey]]:
    if not isinstance(item, dict):
        raise ValueError(f"data[{k}] is not an object")
    seq_id = _int(item.get("nrta_seq_id"), f"data[{k}].nrta_seq_id")
    ops = item.get("framework_op_exec_ids")
    if not isinstance(ops, list):
        raise ValueError(f"data[{k}].framework_op_exec_ids is not a list")
    keys = []
    for j, op in enumerate(ops):
        where = f"data[{k}].framework_op_exec_ids[{j}]"
        if not isinstance(op, dict):
            raise ValueError(f"{where} is not an object")
        th_id = _int(op.get("th_id"), f"{where}.th_id")
        if th_id < 0:
            raise ValueError(f"{where}.th_id is {th_id}: a thread counter is unsigned")
        keys.append(
            OpKey(
                _int(op.get("seq_nr"), f"{where}.seq_nr"),
                th_id,
                _int(op.get("stream_id", 0), f"{where}.stream_id"),
            )
        )
    return seq_id, keys


def read_file(path: str | Path) -> dict[int, list[OpKey]]:
    path = Path(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise NeuronProfileError(f"{path}: {path.stat().st_size} bytes: too large for an op map")
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NeuronProfileError(f"cannot read {path}: {exc}") from None
    try:
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        version = doc.get("version")
        if version not in VERSIONS:
            raise ValueError(f"version {version!r}; this reader knows {', '.join(map(str, VERSIONS))}")
        data = doc.get("data")
        if not isinstance(data, list):
            raise ValueError('no "data" list')
        out: dict[int, list[OpKey]] = {}
        for k, item in enumerate(data):
            seq_id, keys = _entry(item, k)
            if seq_id in out and out[seq_id] != keys:
                raise ValueError(f"data[{k}]: nrta_seq_id {seq_id} listed twice with different ops")
            out[seq_id] = keys
    except ValueError as exc:
        raise NeuronProfileError(f"{path}: not a TorchNeuron framework_mapping file: {exc}") from None
    return out


def read(folder: str | Path) -> Mapping | None:
    """The maps under ``folder`` as one (None: TorchNeuron wrote none there). Two
    files naming one execution differently are refused: they are not one process's."""
    files = find(folder)
    if not files:
        return None
    merged: dict[int, list[OpKey]] = {}
    for path in files:
        for seq_id, keys in read_file(path).items():
            if seq_id in merged and merged[seq_id] != keys:
                raise NeuronProfileError(
                    f"{path}: nrta_seq_id {seq_id} maps to other ops than in another map under {folder}"
                )
            merged[seq_id] = keys
    return Mapping(merged, [str(p) for p in files])


# -- the executions the map names, from the processed profile ----------------------

# Where the runtime's execution id sits in the processed profile is NOT documented
# (docs/neuron.md, "Not confirmed here"): TorchNeuron's source says the runtime's
# system trace carries nrta_seq_id on its execution events. The reader looks for it
# as a column of ExecutionInfo (documented: one row per execution, with its start and
# end); a profile without it is joined by time, and the result says why.
EXECUTION_TABLE = "ExecutionInfo"
SEQ_COLUMNS = ("nrta_seq_id",)


def executions(folder: str | Path) -> tuple[list[Execution], str]:
    """(executions with their runtime id and span, "") or ([], why there are none)."""

    export = Export(folder)
    if not export.has(EXECUTION_TABLE):
        return [], f"the device profile has no {EXECUTION_TABLE} table"
    cols = export.columns(EXECUTION_TABLE, ("execution_start_ts", "execution_end_ts"), SEQ_COLUMNS)
    seq = next((c for c in SEQ_COLUMNS if c in cols), None)
    if seq is None:
        return [], f"its {EXECUTION_TABLE} has no runtime execution id ({', '.join(SEQ_COLUMNS)})"
    start = export.scale(EXECUTION_TABLE, "execution_start_ts", TIME_UNITS, "nanoseconds")
    end = export.scale(EXECUTION_TABLE, "execution_end_ts", TIME_UNITS, "nanoseconds")
    out = [
        Execution(int(s_id), int(a or 0) * start, int(b or 0) * end)
        for s_id, a, b in zip(cols[seq], cols["execution_start_ts"], cols["execution_end_ts"], strict=True)
        if s_id is not None
    ]
    return out, ""
