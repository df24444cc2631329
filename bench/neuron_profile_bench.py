"""Reading a large Neuron device profile (Parquet, the documented schema) into
per-line device time and work: ``neuron_profile.read`` + ``neuron_lines.line_times``.

    python bench/neuron_profile_bench.py --make DIR [--layout old|12.0.1]   # write it once
    python bench/neuron_profile_bench.py DIR                              # read it (time the process)
    python bench/neuron_profile_bench.py DIR --module OLD.py              # the same with another reader

The profile is synthetic (no Trainium here): INSTRUCTIONS instructions on four
engines with the six work columns, each with one or two stack frames out of FRAMES
user stacks of depth DEPTH (library frames innermost, as torch-xla records them).
``--layout old`` writes what the first reader could read too (int frame ids in a
list column, the schema in the Parquet key-value metadata), so the two readers can
be timed on the same file; ``--layout 12.0.1`` writes the 12.0.1 layout of
tests/support/neuron_fixtures.py (string ids, ``stack_frame_ids`` a list of strings,
``Instruction`` split in two files, ``SchemaFields`` and ``Metadata`` tables).
``--module`` loads a reader module from a file (e.g. the first version, extracted
with ``git show layout:server/trainium_lens/traces/neuron_profile.py``).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

INSTRUCTIONS, FRAMES, DEPTH = 300_000, 2_000, 24
WORK = (
    "raw_flops",
    "adjusted_flops",
    "hbm_read_bytes",
    "hbm_write_bytes",
    "spill_save_bytes",
    "spill_reload_bytes",
)


def _profile() -> dict:
    files = ["/home/u/proj/model.py", "/opt/venv/lib/python3.10/site-packages/torch/nn/functional.py"]
    frames = []
    for s in range(FRAMES):  # stack s: DEPTH frames, the inner half in library code
        for d in range(DEPTH):
            fid = s * DEPTH + d + 1
            frames.append([2 if d < DEPTH // 2 else 1, 10 + fid % 500, fid + 1 if d + 1 < DEPTH else 0])
    instructions = []
    for i in range(INSTRUCTIONS):
        ids = [(i % FRAMES) * DEPTH + 1] + ([((i * 7) % FRAMES) * DEPTH + 1] if i % 3 == 0 else [])
        work = dict(zip(WORK, (i % 97 * 1024, i % 97 * 2048, 4096, 2048, i % 5, i % 7), strict=True))
        instructions.append(
            [i * 10, i * 10 + 25, ("pe", "act", "pool", "dve")[i % 4], f"fusion.{i % 900}", ids, work]
        )
    return {"files": files, "frames": frames, "instructions": instructions}


def make_old(folder: Path, profile: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    files, frames, ins = profile["files"], profile["frames"], profile["instructions"]
    ids = list(range(1, len(frames) + 1))
    pq.write_table(pa.table({"id": [1, 2], "name": files}), folder / "StackFrameFileName.parquet")
    pq.write_table(pa.table({"id": [1], "name": ["f"]}), folder / "StackFrameFunctionName.parquet")
    pq.write_table(
        pa.table(
            {
                "id": ids,
                "file_name_id": [f[0] for f in frames],
                "function_name_id": [1] * len(ids),
                "line_number": [f[1] for f in frames],
            }
        ),
        folder / "StackFrameFileLocation.parquet",
    )
    pq.write_table(
        pa.table({"id": ids, "file_location_id": ids, "parent_frame_id": [f[2] for f in frames]}),
        folder / "StackFrame.parquet",
    )
    cols = {
        "start_ts": pa.array([i[0] for i in ins], pa.int64()),
        "end_ts": pa.array([i[1] for i in ins], pa.int64()),
        "duration_ns": pa.array([i[1] - i[0] for i in ins], pa.int64()),
        "engine": [i[2] for i in ins],
        "opcode": ["OP"] * len(ins),
        "hlo_name": [i[3] for i in ins],
        "stack_frame_ids": pa.array([i[4] for i in ins], pa.list_(pa.int64())),
        "layer": [""] * len(ins),
        "bir_id": pa.array([0] * len(ins), pa.int64()),
        **{w: pa.array([i[5][w] for i in ins], pa.int64()) for w in WORK},
    }
    pq.write_table(
        pa.table(cols).replace_schema_metadata({"schema_version": "7.4"}), folder / "Instruction.parquet"
    )


def main() -> None:
    if sys.argv[1] == "--make":
        layout = sys.argv[sys.argv.index("--layout") + 1] if "--layout" in sys.argv else "old"
        if layout == "old":
            make_old(Path(sys.argv[2]), _profile())
        else:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
            from tests.support import neuron_fixtures as fx

            fx.write(Path(sys.argv[2]), _profile(), layout)
        return
    t0 = time.perf_counter()
    if "--module" in sys.argv:  # another reader (read + line_times in one module)
        path = sys.argv[sys.argv.index("--module") + 1]
        spec = importlib.util.spec_from_file_location("reader_under_test", path)
        assert spec and spec.loader
        reader = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = reader  # dataclasses look their module up
        spec.loader.exec_module(reader)
        profile = reader.read(sys.argv[1])
        t1 = time.perf_counter()
        report = reader.line_times(profile)
    else:
        from trainium_lens.traces import neuron_lines, neuron_profile

        profile = neuron_profile.read(sys.argv[1])
        t1 = time.perf_counter()
        report = neuron_lines.line_times(profile)
    t2 = time.perf_counter()
    print(
        f"read {t1 - t0:.2f} s, line_times {t2 - t1:.2f} s: {len(profile.instructions)} instructions, "
        f"{len(report.lines)} lines, busy {report.busy_ns} ns"
    )


if __name__ == "__main__":
    main()
