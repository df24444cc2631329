"""STAND-IN for what TorchNeuron's profiler writes beside its traces (no Trainium,
no TorchNeuron here): ``framework_mapping_<YYYYMMDD_HHMMSS_mmm>.json`` in the schema
TorchNeuron's source gives (docs/neuron.md, "The exact join"), and the host side it
is joined with: torch's Chrome trace ``cpu_op`` events as torch writes them (``ts``
and ``dur`` in µs, ``tid`` the OS thread, ``args`` ``External id`` and ``Sequence
number``) with the harness's tags (``Source line``, ``Phase``, ``Torch thread``).

A real torch trace shows what the sequence numbers look like (checked on CPU torch
2.13 here): the op at the autograd level records the number its node takes
(``aten::relu`` 2), its kernel op inside it records none (``aten::clamp_min``), and
ops under ``no_grad`` record none. TorchNeuron reads the counter at submission,
inside the kernel, after the node took its number: so ``relu``'s execution is
keyed 3. ``submitted`` below applies that rule to build a map that agrees with a
trace; what a device really writes is what docs/support.md's check collects.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OS_TID = 48213  # an OS thread id: never the key the map uses


def write_mapping(
    folder: Path, entries: list[tuple[int, list[tuple[int, int, int]]]], stamp: str = "20261130_101500_123"
) -> Path:
    """``entries``: (nrta_seq_id, [(seq_nr, th_id, stream_id)]) in the file's schema, version 1."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = {
        "version": 1,
        "data": [
            {
                "nrta_seq_id": seq_id,
                "framework_op_exec_ids": [{"seq_nr": s, "th_id": t, "stream_id": st} for s, t, st in ops],
            }
            for seq_id, ops in entries
        ],
    }
    path = folder / f"framework_mapping_{stamp}.json"
    path.write_text(json.dumps(doc, indent=1))
    return path


def op(
    name: str,
    ts_us: float,
    dur_us: float,
    line: int | None,
    *,
    seq: int | None = None,
    thread: int | None = 1,
    phase: str | None = None,
    file: str = "/w/train.py",
    tid: int = OS_TID,
    xid: int = 0,
) -> dict[str, Any]:
    """One ``cpu_op`` event as torch writes it, tagged as the harness tags it."""
    args: dict[str, Any] = {"External id": xid, "Record function id": 0}
    if seq is not None:
        args["Sequence number"] = seq
        args["Fwd thread id"] = 0
    if line is not None:
        args["Source line"] = f"{file}:{line}"
    if phase:
        args["Phase"] = phase
    if thread is not None:
        args["Torch thread"] = thread
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": ts_us,
        "dur": dur_us,
        "args": args,
    }


def trace(*events: dict[str, Any]) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "traceEvents": [{**e, "args": {**e["args"], "External id": k + 1}} for k, e in enumerate(events)],
    }


def label(file: str, line: int, func: str, ts_us: float, dur_us: float, tid: int = OS_TID) -> dict[str, Any]:
    """One user-line range as the harness records it (``<file>(<line>): <function>``)."""
    name = f"{file}({line}): {func}"
    return {
        "ph": "X",
        "cat": "user_annotation",
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": ts_us,
        "dur": dur_us,
        "args": {},
    }
