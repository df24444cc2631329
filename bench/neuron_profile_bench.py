"""Reading a large Neuron device profile (Parquet, the documented schema) into
per-line device time: ``neuron_profile.read`` + ``line_times``.

    python bench/neuron_profile_bench.py --make DIR   # write the synthetic profile once
    python bench/neuron_profile_bench.py DIR          # read it (time this whole process)

The profile is synthetic (no Trainium here): INSTRUCTIONS instructions on four
engines, each with one or two stack frames out of FRAMES user stacks of depth
DEPTH (library frames innermost, as torch-xla records them).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

INSTRUCTIONS, FRAMES, DEPTH = 300_000, 2_000, 24


def make(folder: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    files = ["/home/u/proj/model.py", "/opt/venv/lib/python3.10/site-packages/torch/nn/functional.py"]
    pq.write_table(pa.table({"id": [1, 2], "name": files}), folder / "StackFrameFileName.parquet")
    pq.write_table(pa.table({"id": [1], "name": ["f"]}), folder / "StackFrameFunctionName.parquet")
    ids, locs, parents = [], [], []
    for s in range(FRAMES):  # stack s: DEPTH frames, the outer half in user code
        for d in range(DEPTH):
            fid = s * DEPTH + d + 1
            ids.append(fid)
            locs.append(fid)
            parents.append(fid + 1 if d + 1 < DEPTH else 0)
    n = len(ids)
    pq.write_table(
        pa.table(
            {
                "id": ids,
                "file_name_id": [2 if (i - 1) % DEPTH < DEPTH // 2 else 1 for i in ids],
                "function_name_id": [1] * n,
                "line_number": [10 + i % 500 for i in ids],
            }
        ),
        folder / "StackFrameFileLocation.parquet",
    )
    pq.write_table(
        pa.table({"id": ids, "file_location_id": locs, "parent_frame_id": parents}),
        folder / "StackFrame.parquet",
    )
    starts = [i * 10 for i in range(INSTRUCTIONS)]
    frames = [
        [(i % FRAMES) * DEPTH + 1] + ([((i * 7) % FRAMES) * DEPTH + 1] if i % 3 == 0 else [])
        for i in range(INSTRUCTIONS)
    ]
    table = pa.table(
        {
            "start_ts": pa.array(starts, pa.int64()),
            "end_ts": pa.array([s + 25 for s in starts], pa.int64()),
            "duration_ns": pa.array([25] * INSTRUCTIONS, pa.int64()),
            "engine": [("pe", "act", "pool", "dve")[i % 4] for i in range(INSTRUCTIONS)],
            "opcode": ["OP"] * INSTRUCTIONS,
            "hlo_name": [f"fusion.{i % 900}" for i in range(INSTRUCTIONS)],
            "stack_frame_ids": pa.array(frames, pa.list_(pa.int64())),
            "layer": [""] * INSTRUCTIONS,
            "bir_id": pa.array([0] * INSTRUCTIONS, pa.int64()),
        }
    ).replace_schema_metadata({"schema_version": "7.4"})
    pq.write_table(table, folder / "Instruction.parquet")


def main() -> None:
    if sys.argv[1] == "--make":
        make(Path(sys.argv[2]))
        return
    from trainium_lens.traces import neuron_profile as npf

    t0 = time.perf_counter()
    profile = npf.read(sys.argv[1])
    t1 = time.perf_counter()
    report = npf.line_times(profile)
    t2 = time.perf_counter()
    print(
        f"read {t1 - t0:.2f} s, line_times {t2 - t1:.2f} s: {len(profile.instructions)} instructions, "
        f"{len(report.lines)} lines, busy {report.busy_ns} ns"
    )


if __name__ == "__main__":
    main()
