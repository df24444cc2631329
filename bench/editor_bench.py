"""The editor's overhead: command → hints in a real VS Code, against the CLI.

    .venv/bin/python bench/editor_bench.py [--runs 3]

Baseline: ``trainium-lens profile examples/rmsnorm.py rms_norm_naive`` (the same
job on the local CPU backend), timed from the shell's point of view (process
start to exit), in a fresh copy of the workspace each time.

Editor: a fresh code-server session per run (scripts/setup-e2e.sh must have run)
with the built .vsix, the server already up (its code lens shown); the clock
starts at the click on "Profile on Trainium" in the context menu and stops when
the first inlay hint is in the editor's DOM (tests/e2e/driver.mjs, polling every
50 ms). A fresh session per run means every figure is a first run, as the CLI's.

Prints a markdown table for bench/README.md ("Editor").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.test_vscode import EXAMPLE, FUNCTION, CodeServer, build_vsix, prepare  # noqa: E402

CLI = ROOT / ".venv" / "bin" / "trainium-lens"


def cli_run(tmp: Path) -> float:
    work = tmp / f"cli-{time.monotonic_ns()}"
    (work / "examples").mkdir(parents=True)
    shutil.copy(ROOT / EXAMPLE, work / EXAMPLE)
    start = time.perf_counter()
    subprocess.run(
        [str(CLI), "profile", EXAMPLE, FUNCTION, "--backend", "cpu"],
        cwd=work,
        check=True,
        capture_output=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    return (time.perf_counter() - start) * 1000


def editor_run(tmp: Path, vsix: Path) -> dict:
    session = Path(tempfile.mkdtemp(dir=tmp))
    workspace, settings = prepare(session)
    settings = {**settings, "trainiumLens.python": sys.executable}
    (workspace / ".vscode" / "settings.json").write_text(json.dumps(settings))
    server = CodeServer(session, workspace)
    server.install(vsix)
    source = (workspace / EXAMPLE).read_text().splitlines()
    config = {
        "url": server.start(),
        "file": EXAMPLE,
        "defText": f"def {FUNCTION}(",
        "lineTexts": {str(i + 1): t.strip() for i, t in enumerate(source) if t.strip()},
        "settingsPath": str(workspace / ".vscode" / "settings.json"),
        "settings": settings,
        "shots": str(session),
        "phases": ["profile"],
    }
    (session / "config.json").write_text(json.dumps(config))
    try:
        done = subprocess.run(
            [
                "node",
                str(ROOT / "tests/e2e/driver.mjs"),
                str(session / "config.json"),
                str(session / "out.json"),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        server.stop()
    out = json.loads((session / "out.json").read_text())
    if done.returncode != 0:
        sys.exit(f"the driver failed: {out.get('failure')}\n" + "\n".join(out.get("log", [])))
    return out["timings"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    vsix = build_vsix()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        cli, hints, panel = [], [], []
        for i in range(args.runs):  # interleaved, so load from others hits both alike
            cli.append(cli_run(tmp))
            timings = editor_run(tmp, vsix)
            hints.append(timings["commandToHintsMs"])
            panel.append(timings["commandToPanelMs"])
            print(
                f"run {i + 1}: cli {cli[-1]:.0f} ms, editor hints {hints[-1]:.0f} ms, "
                f"panel {panel[-1]:.0f} ms",
                file=sys.stderr,
            )
    base = statistics.median(cli)
    print("| path | runs (ms) | median ms | vs CLI |")
    print("| --- | --- | ---: | ---: |")
    for label, xs in (
        ("CLI: `trainium-lens profile` (baseline)", cli),
        ("editor: click → first inlay hint", hints),
        ("editor: click → results panel", panel),
    ):
        med = statistics.median(xs)
        print(f"| {label} | {', '.join(f'{x:.0f}' for x in xs)} | {med:.0f} | {med / base:.2f}× |")


if __name__ == "__main__":
    main()
