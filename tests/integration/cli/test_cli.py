"""``trainium-lens profile/show/compare`` end to end: the real CLI, the real
harness, the real torch profiler on CPU, on a copy of examples/rmsnorm.py.

examples/rmsnorm.py is profiled twice per module (all three variants once,
the naive one alone once) and every table test reads those runs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, ROOT
from tests.unit.model.test_result import minimal
from trainium_lens.model import figures
from trainium_lens.model.result import Result, load

SERVER = ROOT / "server"


def cli(
    *args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 240
) -> subprocess.CompletedProcess:
    environ = dict(os.environ)
    environ["PYTHONPATH"] = str(SERVER)
    environ["PYTHONIOENCODING"] = "utf-8"
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "trainium_lens", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def error_line(proc: subprocess.CompletedProcess) -> str:
    """The CLI's error: non-zero exit, exactly one ``trainium-lens:`` line on
    stderr (progress lines are indented), and it is the last line."""
    assert proc.returncode != 0, proc.stdout
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("trainium-lens: ")]
    assert len(errors) == 1, proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1] == errors[0], proc.stderr
    return errors[0]


def source_line(path: Path, pattern: str, after: int = 0) -> int:
    """1-based number of the first line after ``after`` matching ``pattern``."""
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if number > after and re.search(pattern, text):
            return number
    raise AssertionError(f"{pattern!r} not in {path}")


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    cache = tmp_path_factory.mktemp("cache")
    return {"TRAINIUM_LENS_CACHE": str(cache)}


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    """A workspace holding a copy of the example (the repo stays clean)."""
    root = tmp_path_factory.mktemp("ws")
    (root / "examples").mkdir()
    shutil.copy(EXAMPLES / "rmsnorm.py", root / "examples" / "rmsnorm.py")
    return root


@pytest.fixture(scope="module")
def all_variants(ws, env):
    out = ws / "all.json"
    proc = cli(
        "profile", str(ws / "examples" / "rmsnorm.py"), "--workspace", str(ws), "--json", str(out), env=env
    )
    assert proc.returncode == 0, proc.stderr
    return proc, json.loads(out.read_text())


@pytest.fixture(scope="module")
def naive(ws, env):
    out = ws / "naive.json"
    # Picked by a line inside it (what the editor sends), not by name.
    inside = source_line(ws / "examples" / "rmsnorm.py", r"\.mean\(")
    proc = cli(
        "profile",
        str(ws / "examples" / "rmsnorm.py"),
        "--line",
        str(inside),
        "--workspace",
        str(ws),
        "--wait",
        "0",
        "--active",
        "3",
        "--timing-calls",
        "5",
        "--json",
        str(out),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    return proc, out


def section(stdout: str, function: str) -> str:
    """One function's block of ``profile`` output."""
    blocks = stdout.split("\n\n")
    start = next(i for i, b in enumerate(blocks) if b.startswith(f"{function}  "))
    end = next(
        (
            i
            for i in range(start + 1, len(blocks))
            if re.match(r"^\S", blocks[i]) and not blocks[i].startswith("  ")
        ),
        len(blocks),
    )
    return "\n\n".join(blocks[start:end])


def table_rows(text: str) -> dict[int, str]:
    """Per-line table rows by line number (the time table: the work section's
    rows, which follow the findings, are not these)."""
    rows = {}
    for ln in text.split("  work and roofline")[0].splitlines():
        m = re.match(r"^  (\d+)\s{2,}", ln)
        if m:
            rows[int(m.group(1))] = ln
    return rows


# -- the tables ----------------------------------------------------------------------


def test_naive_ops_on_their_lines(all_variants, ws):
    proc, _ = all_variants
    path = ws / "examples" / "rmsnorm.py"
    square = source_line(path, r"x2 = x \* x")
    mean = source_line(path, r"\.mean\(")
    rsqrt = source_line(path, r"torch\.rsqrt")
    last = source_line(path, r"return x \* rstd \* weight")
    define = source_line(path, r"def rms_norm_naive")
    naive = section(proc.stdout, "rms_norm_naive")
    assert "clock: CPU self time" in naive
    header = next(ln for ln in naive.splitlines() if ln.lstrip().startswith("line "))
    for column in ("source", "self (cpu)", "total (cpu)", "share", "calls", "top ops"):
        assert column in header
    assert "neuron" not in header and "device" not in header
    rows = table_rows(naive)
    assert set(rows) == {square, mean, rsqrt, last}  # nothing on the def line
    assert define not in rows
    assert re.search(r"\bmul ×1\b", rows[square]) and "x2 = x * x" in rows[square]
    assert rows[mean].split("top ops")[0].split()[-1]  # non-empty row
    assert re.search(r"\s1\s+mean ×1", rows[mean])  # one dispatch: the mean
    assert re.search(r"\s2\s+add ×1, rsqrt ×1", rows[rsqrt])
    assert re.search(r"\s2\s+mul ×2$", rows[last])
    # Shares of the four lines add up to ~100 % (nothing unattributed here).
    shares = [float(re.search(r"([\d.]+)%", rows[n]).group(1)) for n in rows]
    assert 97 <= sum(shares) <= 103
    # The op table is key_averages' view, sorted by self time.
    ops = [ln.split() for ln in naive.splitlines() if ln.startswith("  aten::")]
    assert {"aten::mul", "aten::mean", "aten::add", "aten::rsqrt"} <= {o[0] for o in ops}


def test_fused_and_compiled_variants(all_variants, ws):
    proc, data = all_variants
    path = ws / "examples" / "rmsnorm.py"
    fused_line = source_line(path, r"torch\.rms_norm\(")
    fused = section(proc.stdout, "rms_norm_fused")
    rows = table_rows(fused)
    assert list(rows) == [fused_line] and re.search(r"\s1\s+rms_norm ×1", rows[fused_line])
    compiled = section(proc.stdout, "rms_norm_compiled")
    call_line = source_line(path, r"return _compiled_naive\(")
    assert list(table_rows(compiled)) == [call_line]
    first, last = source_line(path, r"x2 = x \* x"), source_line(path, r"return x \* rstd")
    assert re.search(
        rf"Torch-Compiled Region: \S+: line {call_line}, .*covers lines "
        rf"{first}–{last}",
        compiled,
    )
    assert [r["function"]["name"] for r in data] == ["rms_norm_naive", "rms_norm_fused", "rms_norm_compiled"]


def test_findings_name_the_fix(all_variants, ws):
    proc, data = all_variants
    first = source_line(ws / "examples" / "rmsnorm.py", r"x2 = x \* x")
    naive = " ".join(section(proc.stdout, "rms_norm_naive").split())  # findings wrap
    if "noisy_measurement" in [f["kind"] for f in data[0]["findings"]]:
        # a loaded machine: the advice that rests on timing is withheld, and said to be
        assert re.search(r"\d+ timing-based findings? withheld", naive), naive
        return
    assert re.search(
        rf"info examples/rmsnorm.py:{first} lines {first}–\d+ of "
        r"rms_norm_naive\(\) compute RMSNorm op by op: 6 dispatches per call",
        naive,
    )
    # named as a candidate, never as faster: the same run's comparison measures it
    assert "torch.rms_norm computes it in one op; whether that is faster here is untested" in naive
    assert "does it in one fused op" not in naive and "would make it" not in naive
    rsqrt = source_line(ws / "examples" / "rmsnorm.py", r"torch\.rsqrt")
    # the generic dispatch hint, or where the roofline says these ops are overhead- or
    # memory-bound (analysis/findings/roofline.py), that finding in its place
    assert (
        f"hint examples/rmsnorm.py:{rsqrt} 2 dispatches on this line (add, rsqrt): "
        "each one is a separate launch; whether fusing them (a fused op, torch.compile) is faster "
        "is untested here."
    ) in naive or re.search(
        rf"info examples/rmsnorm.py:{rsqrt} (Overhead-bound: 2 ops per execution|Memory-bound: 2 "
        r"elementwise dispatches per execution) \(add, rsqrt\)",
        naive,
    )
    assert "fused_op" not in [f["kind"] for f in data[1]["findings"]]  # already fused
    assert "RMSNorm" not in section(proc.stdout, "rms_norm_fused")


def test_work_and_roofline_section(all_variants, ws):
    """Per line: bytes moved and a verdict against this host's measured roof, whose
    source is printed; RMSNorm has no matmul, so no FLOPs and no MFU."""
    proc, data = all_variants
    naive = section(proc.stdout, "rms_norm_naive")
    work = naive.split("  work and roofline", 1)[1]
    assert "roof: " in work and "measured on this host" in work
    header = next(ln for ln in work.splitlines() if ln.lstrip().startswith("line "))
    for column in ("FLOPs", "bytes", "% peak", "verdict", "saved", "at peak"):
        assert column in header
    square = source_line(ws / "examples" / "rmsnorm.py", r"x2 = x \* x")
    row = next(ln for ln in work.splitlines() if re.match(rf"^  {square}\s", ln))
    stored = next(s for s in data[0]["lines"] if s["line"] == square)
    assert stored["flops"] == 0 and stored["bytes"] > 0  # a mul: bytes, no FLOPs by definition
    assert re.search(r"(compute|memory|overhead)-bound|below-roof", row), row
    assert "function MFU" not in work


def test_comparison_table(all_variants):
    proc, data = all_variants
    comparison = proc.stdout.split("\n\n")[-1]
    lines = comparison.splitlines()
    # CPU time is profiled (inflated per op event): the speedups are the unprofiled walls'.
    # walls timed in turn (harness/eager/paired.py): named so, not as each function's own wall
    assert lines[0].startswith("comparison (speedup from the unprofiled walls timed in turn")
    assert lines[0].endswith("output against rms_norm_naive)")
    assert (
        "wall in turn" in lines[1] and "profiled (cpu, ops + host)" in lines[1] and "max |diff|" in lines[1]
    )
    rows = {ln.split()[0]: ln for ln in lines[2:5]}
    for result in data:  # the profiled column holds the headline's figure: ops + host
        t = result["totals"]
        shown = figures.time_us(t["self_time_us"] + (t["host_time_us"] or 0.0))
        assert shown in rows[result["function"]["name"]], (shown, rows[result["function"]["name"]])
        assert shown in section(proc.stdout, result["function"]["name"]).splitlines()[3]
    assert list(rows) == ["rms_norm_naive", "rms_norm_fused", "rms_norm_compiled"]
    assert rows["rms_norm_naive"].rstrip().endswith("reference")
    # the variants' walls timed in turn after the batch (harness/eager/paired.py): the speedups'
    walls = {r["function"]["name"]: r["totals"]["paired_wall_us_median"] for r in data}
    for name, result in zip(rows, data, strict=True):
        cells = rows[name].split()
        assert f"{result['totals']['dispatches']:g}" in cells
        assert figures.ratio(walls["rms_norm_naive"] / walls[name]) in cells  # speedup: wall against wall
    fastest = min(walls, key=walls.__getitem__)
    if "(busy)" in comparison:  # most unprofiled calls ran slow: flagged, and nothing is ranked
        assert "  fastest: not judged (the host was busy" in comparison and "not reliable" in comparison
    else:
        assert f"  fastest: {fastest} (" in comparison and "wall in turn)" in comparison
    bound = 1e-2 + 1.6e-2 * data[0]["output"]["max_abs"]  # bf16 against the reference
    for name, result in zip(("rms_norm_fused", "rms_norm_compiled"), data[1:], strict=True):
        # The same computation in bf16: within a bf16 ulp or two of the naive one.
        diff = result["output"]["max_abs_diff"]
        assert 0 <= diff <= bound
        assert rows[name].rstrip().endswith(f"{diff:.3g}  ok (≤ {bound:.2g})"), rows[name]


# -- JSON, show, compare --------------------------------------------------------------


def test_json_output_validates_and_is_stored(all_variants, naive, ws):
    _, data = all_variants
    results = [Result.from_dict(item) for item in data]
    runs = ws / ".trainium-lens" / "runs"
    for res in results:
        assert load(runs / f"{res.run_id}.json") == res  # same document as stored
        assert res.findings == load(runs / f"{res.run_id}.json").findings
    _, path = naive
    single = load(path)  # one function: the result itself, not a list
    assert single.function.name == "rms_norm_naive" and single.totals.steps == 3
    protocol = single.function.protocol  # command-line overrides, defaults for the rest
    assert (protocol.wait, protocol.warmup, protocol.active, protocol.timing_calls) == (0, 1, 3, 5)


def test_show_reprints_the_same_table(all_variants, naive, ws, env):
    proc, out = naive
    by_file = cli("show", str(out), env=env)
    assert by_file.returncode == 0 and by_file.stdout == proc.stdout
    run_id = load(out).run_id
    by_prefix = cli("show", run_id[:-1], "--workspace", str(ws), env=env)
    assert by_prefix.returncode == 0 and by_prefix.stdout == proc.stdout
    all_proc, data = all_variants
    batch = cli("show", data[0]["batch_id"], "--workspace", str(ws), env=env)
    assert batch.returncode == 0 and batch.stdout == all_proc.stdout
    listed = cli("show", str(ws / "all.json"), env=env)
    assert listed.stdout == all_proc.stdout


def test_compare_two_runs(all_variants, naive, ws, env):
    _, data = all_variants
    before = data[0]["run_id"]
    after = load(naive[1]).run_id
    proc = cli("compare", before, after, "--workspace", str(ws), env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == f"rms_norm_naive: {before} → {after}"
    # a busy host puts a note (the speedup is not reliable) before the total line
    notes = [line for line in out[1:] if line.startswith("  note: ")]
    assert out[1 + len(notes)].startswith("  total (cpu) ")
    rows = table_rows(proc.stdout)
    path = ws / "examples" / "rmsnorm.py"
    expected = {source_line(path, p) for p in (r"x2 = x", r"\.mean\(", r"rsqrt", r"return x \*")}
    assert set(rows) == expected and all(r.rstrip().endswith("same") for r in rows.values())
    # A batch id holds three results: compare needs one run on each side.
    bad = cli("compare", data[0]["batch_id"], after, "--workspace", str(ws), env=env)
    assert "holds 3 results" in error_line(bad)


@pytest.mark.parametrize(
    "content, reason",
    [
        ('{"schema_version": 1, "run_id": ', r"not valid JSON \(line 1"),
        (json.dumps({k: v for k, v in minimal().items() if k != "totals"}), r"result: missing .*totals"),
        (json.dumps(minimal(schema_version=7)), r"schema version 7.*upgrade trainium-lens"),
        ("[]", "an empty list"),
    ],
)
def test_show_bad_result_file(tmp_path, env, content, reason):
    path = tmp_path / "r.json"
    path.write_text(content, encoding="utf-8")
    proc = cli("show", str(path), env=env)
    assert proc.returncode == 2  # a result file named on the command line that cannot be read
    assert re.search(reason, error_line(proc))


def test_show_unknown_run(tmp_path, env):
    proc = cli("show", "20991231", "--workspace", str(tmp_path), env=env)
    assert proc.returncode == 2 and "no stored run '20991231'" in error_line(proc)


# -- bad input: one line, non-zero, nothing stored -------------------------------------

GOOD = textwrap.dedent("""\
    import torch

    def make_inputs():
        return (torch.ones(8),)

    # trainium: profile inputs=make_inputs
    def good(x):
        return x * 2
""")


def bad_workspace(tmp_path: Path, source: str) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "mod.py").write_text(source, encoding="utf-8")
    return ws, ws / "mod.py"


def profile_bad(ws: Path, file: Path, *extra: str, env: dict) -> str:
    out = ws / "out.json"
    proc = cli("profile", str(file), *extra, "--workspace", str(ws), "--json", str(out), env=env)
    line = error_line(proc)
    assert not (ws / ".trainium-lens").exists(), "a failed run wrote to the store"
    assert not out.exists()
    return line


@pytest.mark.parametrize(
    "source, args, reason",
    [
        ("def broken(:\n    pass\n", [], r"mod\.py.*(line 1|:1)"),
        ("import torch\n\ndef plain():\n    return 1\n", [], r"no marked function|no function"),
        (GOOD, ["nope"], r"nope"),
        (GOOD.replace("return (torch.ones(8),)", "return 42"), [], r"inputs|tuple|dict"),
        (  # a later def of the same name replaces the first: both "results" would run it
            GOOD + "\n# trainium: profile inputs=make_inputs\ndef good(x):\n    return x + 1\n",
            [],
            r"^trainium-lens: mod\.py: two marked functions are named good \(lines 7 and 11\)",
        ),
    ],
)
def test_bad_input(tmp_path, env, source, args, reason):
    ws, file = bad_workspace(tmp_path, source)
    line = profile_bad(ws, file, *args, env=env)
    assert re.search(reason, line), line


def test_user_error_points_at_the_line(tmp_path, env):
    ws, file = bad_workspace(tmp_path, GOOD.replace("return x * 2", "return x * 2 + {}['k']"))
    line = profile_bad(ws, file, env=env)
    assert line.startswith("trainium-lens: mod.py:8: ") or "mod.py:8" in line, line
    assert "KeyError" in line


def test_torch_missing(tmp_path, env):
    venv = tmp_path / "notorch"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    ws, file = bad_workspace(tmp_path, GOOD)
    line = profile_bad(ws, file, "--python", str(venv / "bin" / "python"), env=env)
    assert "torch" in line


def test_usage_errors(tmp_path, env):
    proc = cli("profile", str(tmp_path / "missing.py"), env=env)
    assert proc.returncode == 2 and "no such file" in error_line(proc)
    ws, file = bad_workspace(tmp_path, GOOD)
    proc = cli("profile", str(file), "--workspace", str(ws), "--active", "0", env=env)
    assert proc.returncode == 2 and "--active must be at least 1" in error_line(proc)
    proc = cli("profile", str(file), "--workspace", str(ws), "--python", "/no/python", env=env)
    assert proc.returncode == 4 and "python not found: /no/python" in error_line(proc)
    for timeout in ("0", "-5", "nan"):
        proc = cli("profile", str(file), "--workspace", str(ws), "--timeout", timeout, env=env)
        assert proc.returncode == 2 and "--timeout must be a positive number of seconds" in error_line(proc)
    assert not (ws / ".trainium-lens").exists()


def test_a_store_that_cannot_be_written_still_prints_the_tables(tmp_path, env):
    ws, file = bad_workspace(tmp_path, GOOD)
    (ws / ".trainium-lens").mkdir()
    (ws / ".trainium-lens" / "runs").write_text("")  # a file where the folder goes: no save can work
    proc = cli("profile", str(file), "--workspace", str(ws), "--active", "1", env=env)
    assert proc.returncode == 4  # the results could not be stored here
    assert "good  mod.py:7" in proc.stdout and "aten::mul" in proc.stdout  # the finished run's tables
    line = error_line(proc)
    assert "cannot store the result in" in line and "the tables above are not saved" in line
    assert [p.name for p in (ws / ".trainium-lens").iterdir()] == ["runs"]  # no temporary file left


def test_a_coding_declaration_is_honoured(tmp_path, env):
    ws = tmp_path / "ws"
    ws.mkdir()
    source = "# -*- coding: latin-1 -*-\n" + GOOD.replace("return x * 2", "return x * 2  # café")
    (ws / "mod.py").write_bytes(source.encode("latin-1"))
    proc = cli("profile", str(ws / "mod.py"), "--workspace", str(ws), "--active", "1", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "return x * 2  # café" in proc.stdout


HANGS = textwrap.dedent("""\
    import os, time

    # trainium: profile
    def hangs():
        with open(__file__ + ".pid", "w") as f:
            f.write(str(os.getpid()))
        time.sleep(300)
""")


@pytest.mark.parametrize(
    "signum, reason",
    [(signal.SIGINT, "trainium-lens: cancelled"), (signal.SIGTERM, "trainium-lens: stopped by SIGTERM")],
)
def test_signal_stops_the_harness(tmp_path, env, signum, reason):
    ws, file = bad_workspace(tmp_path, HANGS)
    environ = dict(os.environ, PYTHONPATH=str(SERVER), PYTHONIOENCODING="utf-8", **env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainium_lens", "profile", str(file), "--workspace", str(ws)],
        env=environ,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    pid_file = Path(str(file) + ".pid")
    deadline = time.monotonic() + 90
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    harness = int(pid_file.read_text())
    proc.send_signal(signum)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err.rstrip().splitlines()[-1] == reason
    assert not _running(harness)
    assert not (ws / ".trainium-lens").exists()


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# -- rendering of results from other backends (stand-ins: no device here) --------------


def _stand_in(backend: str, clock: str, reported: bool) -> Result:
    doc = minimal(
        backend=backend,
        clock=clock,
        signals={"device_time_reported": reported},
        ops=[
            {
                "name": "aten::mul",
                "calls": 2,
                "self_time_us": 12.5,
                "total_time_us": 12.5,
                "self_cpu_us": 30.0,
            }
        ],
    )
    return Result.from_dict(doc)


def test_device_clock_is_named_and_cpu_kept_apart():
    from trainium_lens.cli.render.result import render_result

    text = render_result(_stand_in("neuron", "neuron", True))
    assert "clock: Neuron device time" in text
    table_head = next(ln for ln in text.splitlines() if ln.lstrip().startswith("line "))
    assert "self (neuron)" in table_head and "total (neuron)" in table_head
    op_head = next(ln for ln in text.splitlines() if ln.lstrip().startswith("op "))
    assert op_head.split() == ["op", "calls", "self", "(neuron)", "total", "(neuron)", "self", "(cpu)"]
    assert "30 µs" in text  # the CPU figure, under its own heading


def test_no_device_time_is_visible_never_a_device_heading():
    from trainium_lens.analysis.findings.analyze import analyze
    from trainium_lens.cli.render.result import render_result

    res = _stand_in("neuron", "cpu", False)  # as the harness writes it: CPU time, said so
    res.findings = analyze(res)
    text = render_result(res)
    assert "clock: CPU self time (no neuron device time was reported)" in text
    assert "(neuron)" not in text
    assert "No neuron device time was reported: every figure falls back to CPU" in " ".join(text.split())


def test_ascii_terminal():
    from trainium_lens.analysis.findings.analyze import analyze
    from trainium_lens.cli.render.result import render_result
    from trainium_lens.cli.render.text import Style

    res = Result.from_dict(minimal())
    res.lines[0].self_time_us_max = 14.0
    res.findings = analyze(res)  # messages carry µs and –
    text = render_result(res, Style(unicode=False))
    assert text.isascii() and "12.5 us" in text and "########" in text
    assert "0-14 us" in text


def test_progress_on_stderr(all_variants):
    proc, _ = all_variants
    err = proc.stderr.splitlines()
    assert all(ln.startswith("  ") for ln in err), err  # progress only: no error line
    assert "  [compile] rms_norm_compiled: first calls" in "\n".join(err)
    steps = [ln for ln in err if ln.startswith("  [profile] rms_norm_naive step ")]
    last = re.fullmatch(r"  \[profile\] rms_norm_naive step (\d+)/(\d+)", steps[-1])
    # warmup 1 + active 5 pairs (the wait ran as settling calls), more if the host disturbed some
    assert last and last.group(1) == last.group(2) and int(last.group(2)) >= 11
    assert "\x1b" not in proc.stderr  # not a terminal: plain lines


def test_live_progress_line():
    import io

    from trainium_lens.cli.console import Progress

    stream = io.StringIO()
    progress = Progress(stream, live=True)
    progress({"event": "stage", "stage": "compile", "function": "f", "message": "first calls"})
    progress({"event": "output", "text": "hello from user code"})
    progress(
        {"event": "stage", "stage": "profile", "function": "f", "step": 2, "of": 8, "message": "step 2 of 8"}
    )
    progress.close()
    text = stream.getvalue()
    assert "\r\x1b[K" in text and "[compile] f: first calls" in text
    assert "  | hello from user code\n" in text  # printed on its own line, then redrawn
    assert "[profile] f step 2/8" in text and "step 2 of 8" not in text
    assert text.endswith("\r\x1b[K")  # the live line is cleared before the tables print


def test_table_fits_a_narrow_terminal():
    from trainium_lens.cli.render.result import render_result
    from trainium_lens.cli.render.text import Style

    doc = minimal()
    doc["lines"][0]["text"] = "y = torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)"
    doc["lines"][0]["self_time_us_max"] = 14.0
    doc["lines"][0]["ops"] += [
        {"name": f"aten::op_number_{i}", "calls": 1, "self_time_us": 1.0} for i in range(4)
    ]
    res = Result.from_dict(doc)
    wide = render_result(res, Style())
    assert "min–max" in wide and "+2" in wide  # full table: the spread and every op count
    narrow = render_result(res, Style(width=80))
    table = narrow.split("\n\n")[1].splitlines()
    assert all(len(ln) <= 80 for ln in table), table
    assert "min–max" not in table[0] and "top ops" in table[0]
    assert re.match(r"  11\s+y = torch\.nn\.\S*…\s+12\.5 µs", table[1]), table[1]


def test_headline_names_the_file_of_a_hottest_line_elsewhere():
    """With --include (or a helper module) the hottest line can live in another
    file: the headline says which, not a bare line number of the wrong file."""
    from tests.support.lsp_client import make_result
    from trainium_lens.cli.render.result import headline

    r = make_result("train.py", "step", 10, {11: ("y = model(x)", 5.0, [("aten::add", 1, 5.0)])})
    assert "hottest line 11 (" in headline(r)
    r.lines.append(
        dataclasses.replace(
            r.lines[0],
            file="transformers/models/llama/modeling_llama.py",
            line=220,
            self_time_us=50.0,
            total_time_us=50.0,
        )
    )
    r.totals.self_time_us += 50.0
    assert "hottest line transformers/models/llama/modeling_llama.py:220 (" in headline(r)
