"""STAND-IN for Neuron Explorer's ``neuron-explorer`` binary (aws-neuronx-tools cannot
exist here): ``install_standin`` puts a small script named ``neuron-explorer`` first on
PATH. It implements the two calls the harness makes (docs/neuron.md):
``view -n NEFF -s NTFF --output-file DIR`` and ``view --session-dir DIR --output-file
OUT``, writing the Parquet tables of the documented schema
(``tests/support/neuron_fixtures.py``) from the JSON the stand-in NTFF holds:
``{"schema", "files", "frames", "instructions", "executions", "drop", "fail", "format"}``
(``format`` ``json``: the legacy JSON export, written to the output path as a file).
Every call is logged (one JSON argv per line) to the path ``install_standin`` returns.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

STANDIN = '''\
#!{python}
"""STAND-IN for neuron-explorer: `view -n NEFF -s NTFF --output-file DIR` and
`view --session-dir DIR --output-file OUT` only. The NTFF holds JSON naming the
instructions; the tables are written by tests/support/neuron_fixtures.py in the
layout of the schema it names (7.4.0 or 12.0.1, from the schema reference)."""
import glob, json, os, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from tests.support import neuron_fixtures as fx
args = sys.argv[1:]
with open({log!r}, "a") as fh:
    fh.write(json.dumps(args) + "\\n")
opt = lambda flag: args[args.index(flag) + 1]
if "--session-dir" in args:
    ntff = sorted(glob.glob(os.path.join(opt("--session-dir"), "**", "*.ntff"), recursive=True))[0]
else:
    ntff = opt("-s")
spec = json.load(open(ntff))
if spec.get("fail"):
    sys.exit("ERROR: " + spec["fail"])
if spec.get("format") == "json":  # the legacy export (--output-format json, up to SDK 2.33)
    records = [{{"timestamp": i[0], "duration": i[1] - i[0], "label": i[2], "opcode": "OP",
                "hlo_name": "%" + i[3] + " = f32[4] op()"}} for i in spec["instructions"]]
    with open(opt("--output-file"), "w") as fh:
        json.dump({{"instruction": records}}, fh)
    sys.exit(0)
profile = {{
    "files": spec["files"],
    "frames": spec["frames"],  # [file index (1-based), line, parent frame id]
    "instructions": [i + [{{}}] if len(i) == 5 else i for i in spec["instructions"]],
    "executions": spec.get("executions", []),
}}
fx.write(Path(opt("--output-file")), profile, spec.get("schema", "7.4.0"), tuple(spec.get("drop", [])))
'''


def install_standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    exe = bin_dir / "neuron-explorer"
    log = tmp_path / "explorer-calls.jsonl"
    exe.write_text(STANDIN.format(python=sys.executable, log=str(log), root=str(ROOT)))
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log
