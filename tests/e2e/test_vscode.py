"""The extension in a real VS Code: code-server in headless Chromium (playwright-core).

Builds the .vsix, installs it into a fresh code-server, opens a copy of
examples/rmsnorm.py, and lets ``driver.mjs`` do what a user does: the server
cannot start (bad interpreter path, then missing dependencies) and says so; with
a bare interpreter and the bundled libraries it runs; then right-click
``rms_norm_naive`` → "Profile on Trainium". Everything the page shows is checked
against the result the engine stored in the workspace's ``.trainium-lens/runs/``.

Needs ``scripts/setup-e2e.sh`` (run by scripts/test.sh). Screenshots and the
driver's observations go to ``test-results/e2e/``; a passing session also copies
the ones the docs show to ``docs/images/`` (DOC_SHOTS), so README's picture is
always the current version's.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from trainium_lens.model.figures import time_us
from trainium_lens.model.result import Result, load

ROOT = Path(__file__).resolve().parents[2]
E2E = ROOT / ".e2e"
CODE_SERVER = E2E / "code-server" / "node_modules" / ".bin" / "code-server"
NODE24 = E2E / "node24" / "bin"
RESULTS = ROOT / "test-results" / "e2e"
EXAMPLE = "examples/rmsnorm.py"
TRAIN_EXAMPLE = "examples/train_step.py"
TRAIN_FUNCTION = "train_step_fused"
SCRIPTS = ROOT / "tests" / "data" / "scripts"
SCRIPT = "tinylm/train.py"
#: A training step whose optimizer finding carries its fix as an edit (AdamW(..., fused=True)).
FIX_FILE = "optim_step.py"
#: launch.json as a user has it: the script, its arguments, its folder.
LAUNCH = {
    "version": "0.2.0",
    "configurations": [
        {
            "name": "tiny training run",
            "type": "debugpy",
            "request": "launch",
            "program": "${workspaceFolder}/tinylm/train.py",
            "args": ["--steps", "14", "--log-every", "7"],
            "cwd": "${workspaceFolder}/tinylm",
        }
    ],
}
DOC_IMAGES = ROOT / "docs" / "images"
#: The screenshots README.md and docs/editor.md show: this run's → docs/images/NAME.
DOC_SHOTS = {
    "editor-and-panel.png": "editor.png",  # hints, heat, code lens and the results panel
    "hover.png": "editor-hover.png",  # the hover on the hottest line
    "roofline-panel.png": "roofline-panel.png",  # the training step's roofline chart
}


def line_number(path: Path, needle: str, after: str = "") -> int:
    """1-based line of ``needle`` (the first after the line holding ``after``)."""
    seen = not after
    for number, text in enumerate(path.read_text().splitlines(), 1):
        seen = seen or after in text
        if seen and needle in text:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


FUNCTION = "rms_norm_naive"
MISSING_PYTHON = "/nonexistent/bin/python3"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not CODE_SERVER.exists() or not shutil.which("chromium"),
        reason="run scripts/setup-e2e.sh first (code-server, chromium)",
    ),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@functools.cache
def build_vsix() -> Path:
    """The .vsix, built once per test session."""
    done = subprocess.run(
        ["bash", "scripts/package-vsix.sh"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    return ROOT / done.stdout.strip().splitlines()[-1]


class CodeServer:
    """code-server in its own process group, so that stopping it stops the
    extension host and the language server too."""

    def __init__(self, tmp: Path, workspace: Path, workspace_trust: bool = False):
        self.tmp, self.workspace = tmp, workspace
        # Off unless a test is about it: otherwise every folder opens in Restricted Mode.
        self.workspace_trust = workspace_trust
        self.port = free_port()
        self.env = {
            **os.environ,
            "PATH": f"{NODE24}{os.pathsep}{os.environ['PATH']}",
            "XDG_CONFIG_HOME": str(tmp / "xdg-config"),
            "XDG_DATA_HOME": str(tmp / "xdg-data"),
            "OMP_NUM_THREADS": "1",
        }
        self.dirs = ["--user-data-dir", str(tmp / "user-data"), "--extensions-dir", str(tmp / "extensions")]
        self.proc: subprocess.Popen | None = None

    def install(self, vsix: Path) -> Path:
        subprocess.run(
            [str(CODE_SERVER), *self.dirs, "--install-extension", str(vsix)],
            env=self.env,
            check=True,
            capture_output=True,
            timeout=120,
        )
        (installed,) = (self.tmp / "extensions").glob("trainium-lens.trainium-lens-*")
        return installed

    def start(self) -> str:
        self.log = open(self.tmp / "code-server.log", "w")
        self.proc = subprocess.Popen(
            [
                str(CODE_SERVER),
                "--bind-addr",
                f"127.0.0.1:{self.port}",
                "--auth",
                "none",
                "--disable-telemetry",
                "--disable-update-check",
                *([] if self.workspace_trust else ["--disable-workspace-trust"]),
                *self.dirs,
                "--vscode-option",
                "enable-smoke-test-driver",
                str(self.workspace),
            ],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2).read()
                return f"http://127.0.0.1:{self.port}/?folder={self.workspace}"
            except OSError:
                time.sleep(0.3)
        log = (self.tmp / "code-server.log").read_text()
        raise RuntimeError(f"code-server did not come up: {log[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.log.close()


def prepare(tmp: Path) -> tuple[Path, dict]:
    workspace = tmp / "workspace"
    (workspace / "examples").mkdir(parents=True)
    shutil.copy(ROOT / EXAMPLE, workspace / EXAMPLE)
    shutil.copy(ROOT / TRAIN_EXAMPLE, workspace / TRAIN_EXAMPLE)
    # an unmodified training script, and the launch configuration a user runs it with
    shutil.copytree(SCRIPTS / "tinylm", workspace / "tinylm")
    shutil.copy(ROOT / "tests" / "data" / FIX_FILE, workspace / FIX_FILE)
    (workspace / ".vscode").mkdir()
    (workspace / ".vscode" / "launch.json").write_text(json.dumps(LAUNCH, indent=1))
    # An SSH config for the host picker: an Include with a glob, a wildcard entry
    # (not a host one can pick), two aliases of one block.
    ssh = tmp / "ssh"
    (ssh / "conf.d").mkdir(parents=True)
    (ssh / "config").write_text(
        "Host *\n  ServerAliveInterval 30\n"
        f"Include {ssh}/conf.d/*\n"
        "Host trn-e2e trn-e2e-alias\n  HostName 127.0.0.1\n  User ubuntu\n"
    )
    (ssh / "conf.d" / "inf2").write_text("Host inf2-e2e\n  HostName inf2.example\n")
    user = tmp / "user-data" / "User"
    user.mkdir(parents=True)
    (user / "settings.json").write_text(
        json.dumps(
            {
                "workbench.startupEditor": "none",
                "chat.disableAIFeatures": True,
                "workbench.secondarySideBar.defaultVisibility": "hidden",
                "workbench.tips.enabled": False,
                "extensions.ignoreRecommendations": True,
                "telemetry.telemetryLevel": "off",
                "editor.inlayHints.enabled": "on",
                "window.commandCenter": False,
                # no repaint but what the test does: a blinking cursor and the workbench's
                # animations kept headless Chromium's software renderer busy throughout
                "editor.cursorBlinking": "solid",
                "workbench.reduceMotion": "on",
                # machine-scoped: a workspace cannot point ssh at a config of its choosing
                "trainiumLens.sshConfig": str(ssh / "config"),
            }
        )
    )
    # 12 measured steps, not the default 10: the run shows the workspace's settings reached
    # the job (every figure the tests compare comes from the result itself; 50 steps of the
    # training step cost the session ~20 s of CPU for nothing it checks)
    settings = {"trainiumLens.hintThreshold": 0, "trainiumLens.backend": "cpu", "trainiumLens.active": 12}
    (workspace / ".vscode" / "settings.json").write_text(
        json.dumps({**settings, "trainiumLens.python": MISSING_PYTHON})
    )
    return workspace, settings


def stored_run(tmp: Path) -> tuple[Path, Result]:
    """prepare()'s workspace in TMP, holding a real CPU run of FUNCTION in EXAMPLE
    made and stored by the CLI (what the editor shows without running anything)."""
    workspace, _settings = prepare(tmp)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "server"),
        "OMP_NUM_THREADS": "1",
        "TRAINIUM_LENS_CACHE": str(tmp / "cache"),
    }
    out = tmp / "run.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "trainium_lens",
            "profile",
            str(workspace / EXAMPLE),
            FUNCTION,
            "--workspace",
            str(workspace),
            "--active",
            "3",
            "--json",
            str(out),
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=240,
    )
    return workspace, load(out)


def hottest_line(result: Result) -> int:
    """The line of EXAMPLE with the most self time."""
    return max((s for s in result.lines if s.file == EXAMPLE), key=lambda s: s.self_time_us).line


def installed_server(home: Path, workspace: Path, workspace_trust: bool = False) -> tuple[CodeServer, Path]:
    """A code-server in HOME on WORKSPACE with the .vsix installed; (it, the extension's folder)."""
    server = CodeServer(home, workspace, workspace_trust=workspace_trust)
    return server, server.install(build_vsix())


#: A whole UI session is tried again once: a click that code-server drops on this
#: 2-core machine (a menu still settling) fails a session without saying anything
#: about the product. The first attempt's failure is printed, never hidden.
ATTEMPTS = 2


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """One VS Code session through every step; the driver's observations."""
    for shot in DOC_SHOTS:  # an earlier run's picture is never published as this one's
        (RESULTS / shot).unlink(missing_ok=True)
    obs, workspace = drive(tmp_path_factory, "vscode", "driver.mjs", "observed.json", _start_session)
    runs = sorted((workspace / ".trainium-lens" / "runs").glob("*.json"))
    obs["results"] = [load(p) for p in runs]
    publish_screenshots()
    return obs


def publish_screenshots() -> None:
    """The passing session's pictures become the docs' (docs/images/): the README
    never shows an older version than the one this run tested."""
    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
    for shot, name in DOC_SHOTS.items():
        if (RESULTS / shot).is_file():
            shutil.copyfile(RESULTS / shot, DOC_IMAGES / name)


def _start_session(tmp: Path) -> tuple[CodeServer, dict]:
    workspace, settings = prepare(tmp)
    # A bare interpreter: a fresh venv has the standard library and nothing else.
    bare = tmp / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    server, installed = installed_server(tmp, workspace)
    return server, {
        "defText": f"def {FUNCTION}(",
        "settingsPath": str(workspace / ".vscode" / "settings.json"),
        "settings": settings,
        "barePython": str(bare / "bin" / "python"),
        "goodPython": sys.executable,
        "libsDir": str(installed / "extension" / "dist" / "libs"),
        "pickHost": "trn-e2e",
        "phases": ["errors", "host", "profile", "train", "roofline", "script", "fix"],
        "fixFile": FIX_FILE,
        "fixDefText": "def train_step(",
        "fixDefLine": line_number(ROOT / "tests" / "data" / FIX_FILE, "def train_step("),
        "fixFindingLine": line_number(ROOT / "tests" / "data" / FIX_FILE, "optimizer.step()"),
        "fixCallText": "torch.optim.AdamW(",
        "scriptFile": SCRIPT,
        "scriptMainLine": line_number(SCRIPTS / SCRIPT, 'if __name__ == "__main__":'),
        "trainFile": TRAIN_EXAMPLE,
        "trainDefText": f"def {TRAIN_FUNCTION}(",
        "trainLine": line_number(ROOT / TRAIN_EXAMPLE, "model.qkv(h)", f"def {TRAIN_FUNCTION}("),
    }


def drive(
    tmp_path_factory, name: str, script: str, observed: str, start: Callable[[Path], tuple[CodeServer, dict]]
) -> tuple[dict, Path]:
    """A code-server session driven by tests/e2e/SCRIPT, tried up to ATTEMPTS times,
    each in a fresh folder (NAME, numbered): ``start(folder)`` gives the installed
    server (not started) and the driver's config beyond what every driver gets (the
    url, EXAMPLE and its lines, where the screenshots go). The observations go to
    RESULTS/OBSERVED. Returns the passing attempt's observations and workspace;
    fails with every attempt's report."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    failures = []
    for attempt in range(1, ATTEMPTS + 1):
        home = tmp_path_factory.mktemp(name)
        server, extra = start(home)
        source = (server.workspace / EXAMPLE).read_text().splitlines()
        config = {
            "url": server.start(),
            "file": EXAMPLE,
            "lineTexts": {str(i + 1): text.strip() for i, text in enumerate(source) if text.strip()},
            "shots": str(RESULTS),
            **extra,
        }
        done, obs = run_driver(script, home, config, RESULTS / observed, server)
        if done.returncode == 0:
            return obs, server.workspace
        failures.append(failure_report(attempt, home, done, obs))
    pytest.fail("\n\n".join(failures))


def run_driver(script: str, home: Path, config: dict, observed: Path, server: CodeServer):
    """Run a node driver (tests/e2e/SCRIPT) against the started code-server, then
    stop the server; (the process, the driver's observations)."""
    (home / "config.json").write_text(json.dumps(config))
    observed.unlink(missing_ok=True)
    try:
        done = subprocess.run(
            ["node", str(ROOT / "tests" / "e2e" / script), str(home / "config.json"), str(observed)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=480,
        )
    finally:
        server.stop()
    return done, (json.loads(observed.read_text()) if observed.exists() else {})


def failure_report(attempt: int, home: Path, done, obs: dict) -> str:
    """What a failed attempt says (printed at once, so a retry never hides it)."""
    log = (home / "code-server.log").read_text()[-3000:]
    report = (
        f"attempt {attempt}: driver failed: {obs.get('failure') or done.stderr[-3000:]}\n"
        f"driver log: {obs.get('log')}\ncode-server log tail:\n{log}"
    )
    print(report, file=sys.stderr)
    # kept beside the screenshots too: a session that passed on its second attempt shows
    # no captured output, and what made the first one fail is worth reading
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{home.name}-failed-attempt-{attempt}.txt").write_text(report, encoding="utf-8")
    return report


def test_clear_messages_when_the_server_cannot_start(session):
    bad = session["errors"]["badPath"]
    assert f"the Python interpreter '{MISSING_PYTHON}' (setting trainiumLens.python) was not found" in bad
    assert "Set 'trainiumLens.python'" in bad
    assert "codicon-warning" in session["errors"]["badPathStatus"]
    missing = session["errors"]["missingDeps"]
    assert "cannot import its dependencies" in missing and "ModuleNotFoundError" in missing
    assert "Reinstall the Trainium Lens extension" in missing
    # ...and the same bare interpreter runs the server from the bundled libraries.
    assert session["errors"]["bareStarts"] is True


def test_host_picker_offers_the_ssh_config_hosts_and_saves_the_choice(session):
    host = session["host"]
    assert host["choices"] == ["local", "inf2-e2e", "trn-e2e", "trn-e2e-alias"]
    assert host["saved"] == "trn-e2e"  # the status bar showed it too; then back to local
    assert "Trainium: trn-e2e" in host["status"]


def the_result(session):
    (result,) = [r for r in session["results"] if r.function.file == EXAMPLE]  # the one the click made
    assert result.function.name == FUNCTION and result.function.file == EXAMPLE
    # the workspace's settings reached the server and shaped the job
    assert result.backend == "cpu" and result.function.protocol.active == 12 == result.totals.steps
    return result


def profiled_lines(result) -> dict[int, float]:
    return {
        s.line: (s.self_time_us or s.total_time_us)
        for s in result.lines
        if s.file == EXAMPLE and (s.self_time_us or s.total_time_us) > 0
    }


def test_context_menu_profiles_and_hints_land_on_the_attributed_lines(session):
    result = the_result(session)
    assert session["profile"]["menuItems"][0] == "Profile on Trainium"
    hints = {int(k): v for k, v in session["profile"]["hints"].items()}
    expected = profiled_lines(result)
    assert expected, "the engine attributed no line"
    assert sorted(hints) == sorted(expected)
    for line, t in expected.items():
        assert hints[line].startswith(f"⏱ {time_us(t)} cpu"), (line, hints[line])
    print(
        f"\ncommand → hints: {session['timings']['commandToHintsMs']} ms, "
        f"→ panel: {session['timings']['commandToPanelMs']} ms"
    )


def test_a_training_step_hint_shows_forward_and_backward(session):
    """A linear line of the example's training step: its forward and the backward
    it caused, both on the line (``⏱ fwd 0.40 ms · bwd 0.91 ms cpu · ...``)."""
    line = line_number(ROOT / TRAIN_EXAMPLE, "model.qkv(h)", f"def {TRAIN_FUNCTION}(")
    hint = session["train"]["hints"][str(line)]
    assert re.match(r"^⏱ fwd [\d.]+ (ns|µs|ms|s) · bwd [\d.]+ (ns|µs|ms|s) cpu · ", hint), hint


def test_the_script_lens_profiles_with_the_launch_configuration(session):
    """The code lens on ``if __name__ == "__main__":`` runs the script as launch.json
    runs it (its args and folder); the steps' lines get hints, as the stored run has."""
    assert "Profile Script on Trainium" in session["script"]["lens"]
    (run,) = [r for r in session["results"] if r.script is not None]
    assert run.script.command[-4:] == ["--steps", "14", "--log-every", "7"], run.script.command
    assert run.function.file == SCRIPT
    rendered = set(session["script"]["rendered"])  # the lines the editor drew
    timed = {s.line for s in run.lines if s.file == SCRIPT and (s.self_time_us or s.total_time_us) > 0}
    shown = {int(k) for k in session["script"]["hints"]}
    assert timed & rendered and shown == timed & rendered, (shown, timed, rendered)
    step = line_number(SCRIPTS / SCRIPT, "optimizer.step()")
    assert step in rendered
    assert session["script"]["hints"][str(step)].startswith("⏱"), session["script"]["hints"]
    print(f"\nscript lens → hints: {session['script']['clickToHintsMs']} ms")


def test_a_quick_fix_is_measured_then_applied_only_on_accept(session):
    """The optimizer finding's quick fix in the editor: chosen from the diagnostic's
    menu, measured first (the message says how), nothing written until Apply; after
    Apply the constructor reads ``fused=True`` and its line's hint shows the measured
    figures. A fix that did not hold here offers no Apply and changes nothing."""
    fix = session["fix"]
    assert any("Measure and apply: AdamW(..., fused=True)" in a for a in fix["actions"]), fix["actions"]
    assert re.search(r"AdamW\(\.\.\., fused=True\) at optim_step\.py:\d+: ", fix["message"]), fix
    assert "fused=True" not in fix["callBefore"]  # measured, not yet written
    (run,) = [r for r in session["results"] if r.function.file == FIX_FILE]
    (finding,) = [f for f in run.findings if f.edit is not None]
    assert finding.edit.title == "AdamW(..., fused=True)"
    if "outputs equal" in fix["message"] and "not applied" not in fix["message"]:
        assert fix["offered"] == 1, fix
        assert "fused=True" in fix["callAfter"]
        line = line_number(ROOT / "tests" / "data" / FIX_FILE, "torch.optim.AdamW(")
        hint = fix["hints"][str(line)]
        assert re.match(r"^⏱ [\d.]+ (µs|ms) · fix [\d.]+× faster \(was [\d.]+ (µs|ms)\)$", hint), hint
    else:  # slower or disturbed here: said so, nothing to apply
        assert fix["offered"] == 0, fix


def test_heat_is_drawn_on_the_same_lines_by_intensity(session):
    expected = profiled_lines(the_result(session))
    gutter = {int(k): v for k, v in session["profile"]["heat"]["gutter"].items()}
    background = {int(k) for k in session["profile"]["heat"]["background"]}
    assert sorted(gutter) == sorted(expected) == sorted(background)
    assert all(mark["svg"] for mark in gutter.values())
    result = the_result(session)
    if any(f.kind == "noisy_measurement" for f in result.findings):
        # judged noisy (the editor's run shares the machine with the torch-xla tests): its
        # lines are drawn apart, grey, one decoration for all, never as hot or cool
        assert len({mark["type"] for mark in gutter.values()}) == 1, gutter
        return
    hottest = max(expected.values())
    buckets = {line: max(1, math.ceil(5 * t / hottest - 1e-9)) for line, t in expected.items()}
    # One decoration type per bucket, created in order: type ids differ as buckets do.
    offset = {gutter[line]["type"] - bucket for line, bucket in buckets.items()}
    assert len(offset) == 1, (gutter, buckets)


def test_an_edited_line_loses_its_heat_and_its_hint_says_stale(session):
    expected = profiled_lines(the_result(session))
    after = session["profile"]["afterEdit"]
    edited = after["line"]
    assert str(edited) not in after["heat"]["gutter"]
    assert after["hints"][str(edited)].endswith("(stale)")
    others = sorted(line for line in expected if line != edited)
    assert sorted(int(k) for k in after["heat"]["gutter"]) == others


def test_hover_shows_the_line_op_table(session):
    result = the_result(session)
    line = session["profile"]["hoverLine"]
    stat = next(s for s in result.lines if s.line == line and s.file == EXAMPLE)
    hover = session["profile"]["hover"]
    assert f"line {line} of {FUNCTION}" in hover
    for op in stat.ops:
        assert op.name in hover


def test_results_panel_lists_ops_by_self_time_and_reveals_lines(session):
    result = the_result(session)
    ops = session["profile"]["panelOps"]
    # (which op is hottest is the machine's business: under load one preempted
    # step can put a bf16 copy above the muls; the panel must show the result's order)
    assert len(ops) > 3 and ops == [o.name for o in sorted(result.ops, key=lambda o: -o.self_time_us)]
    lines = [s.line for s in sorted(result.lines, key=lambda s: (-s.self_time_us, s.line))]
    assert session["profile"]["panelLines"] == lines
    assert session["profile"]["panelFindings"] == len(result.findings)
    # The settings the client sends are all ones the server knows, and the run
    # produced no error message.
    assert not [
        n for n in session["profile"]["notifications"] if "setting" in n or "failed" in n or "cannot" in n
    ], session["profile"]["notifications"]
    revealed = session["profile"]["revealed"]
    assert revealed["before"] != revealed["clicked"] and revealed["cursor"] == revealed["clicked"]
    for shot in ("editor-hints.png", "editor-and-panel.png", "hover.png"):
        assert (RESULTS / shot).stat().st_size > 10_000


def test_results_panel_draws_the_roofline_and_a_point_reveals_its_line(session):
    """The training step's panel: one point per line (and phase) with FLOPs, under the
    roof measured on this host; a click on a point puts the cursor on its line."""
    train = next(r for r in session["results"] if r.function.name == TRAIN_FUNCTION)
    roofline = session["roofline"]
    assert TRAIN_FUNCTION in roofline["title"]
    with_flops = {s.line for s in train.lines if (s.flops or 0) + (s.backward_flops or 0) > 0}
    drawn = {p["line"] for p in roofline["points"]}
    assert drawn and drawn <= with_flops
    qkv = line_number(ROOT / TRAIN_EXAMPLE, "model.qkv(h)", f"def {TRAIN_FUNCTION}(")
    assert qkv in drawn  # a Linear: FLOPs forward and backward
    assert any("backward" in p["cls"] for p in roofline["points"])
    assert "measured on this host" in roofline["roof"]
    assert roofline["mfu"] and "Function MFU" in roofline["mfu"]
    assert roofline["memoryLines"]  # the memory view lists the lines live at the peak
    revealed = roofline["revealed"]
    assert revealed["before"] != revealed["clicked"] and revealed["cursor"] == revealed["clicked"]
    assert (RESULTS / "roofline-panel.png").stat().st_size > 10_000


def test_the_docs_show_this_runs_screenshots(session):
    """README.md's picture (and docs/editor.md's) is the one this session took."""
    for shot, name in DOC_SHOTS.items():
        assert (RESULTS / shot).read_bytes() == (DOC_IMAGES / name).read_bytes(), name
    readme = (ROOT / "README.md").read_text()
    assert "](docs/images/editor.png)" in readme
    editor_doc = (ROOT / "docs" / "editor.md").read_text()
    assert all(f"](images/{name})" in editor_doc for name in DOC_SHOTS.values())
