"""Shared test setup: quiet, repeatable torch in every subprocess the tests start."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SERVER = ROOT / "server"
DATA = ROOT / "tests" / "data"  # fixture sources (line numbers matter: never reformatted)

# Fixtures of one area live in their own module; pytest loads them from here.
pytest_plugins = ["tests.support.sshd", "tests.support.lab"]

# A suite started in the background by a shell without job control (`cmd &` in a script,
# `nohup`) inherits SIGINT ignored (POSIX), and so would every process it starts: the tests
# that stop a run with Ctrl-C would signal a CLI that never hears it (a fresh-clone CI started
# that way failed three of them, each timing out). A Python handler resets to the default at
# exec, so the processes the tests start hear SIGINT as a user's terminal sends it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The harness runs as a subprocess with the same interpreter as the tests.
PYTHON = sys.executable


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run folders of local targets under this test's tmp dir (TRAINIUM_LENS_CACHE)."""
    monkeypatch.setenv("TRAINIUM_LENS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def workspace(tmp_path: Path, name: str, source: str) -> Path:
    """A workspace folder holding one source file."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / name).write_text(source, encoding="utf-8")
    return ws


# The torch-xla venv (scripts/setup-xla.sh, which scripts/test.sh always runs first).
# A developer without it skips the xla end-to-end tests; in CI its absence fails them.
XLA_PY = Path(os.environ.get("TRAINIUM_LENS_XLA_PYTHON", ROOT / ".venv-xla" / "bin" / "python"))
needs_xla = pytest.mark.skipif(
    not XLA_PY.exists() and not os.environ.get("CI"), reason="no torch-xla venv: run scripts/setup-xla.sh"
)


#: The machine's CPU roof, shared by every test's runs (scripts/test.sh measures it
#: before the tests load the machine): each test keeps its own run folders
#: (TRAINIUM_LENS_CACHE), and a roof measured there was measured again in every test
#: (1.5–3 s on both cores, and under the suite's load "busy", so never reused).
TEST_ROOF = ROOT / ".cache" / "tests" / "cpu-roof.json"
#: The same for the profiler's calibration (TRAINIUM_LENS_CALIBRATION,
#: harness/eager/calibration_store.py): ~0.8 s of CPU in each of the suite's few hundred
#: cpu-clock runs, and under the suite's load each one read a busier machine than the
#: quiet one scripts/test.sh measures it on. Tests about the calibration itself unset it.
TEST_CALIBRATION = ROOT / ".cache" / "tests" / "calibration.json"


@pytest.fixture(autouse=True, scope="session")
def _quiet_torch_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One thread (the machine has 2 busy cores), a private inductor cache, the
    machine's roof and calibration."""
    cache = tmp_path_factory.mktemp("inductor")
    keys = ("OMP_NUM_THREADS", "TORCHINDUCTOR_CACHE_DIR", "TRAINIUM_LENS_ROOF", "TRAINIUM_LENS_CALIBRATION")
    old = {k: os.environ.get(k) for k in keys}
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache))
    os.environ.setdefault("TRAINIUM_LENS_ROOF", str(TEST_ROOF))
    os.environ.setdefault("TRAINIUM_LENS_CALIBRATION", str(TEST_CALIBRATION))
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


#: What the xla and Neuron backends set in the process that prepares a run
#: (``harness/xla/backend.prepare_env``, ``prepare_neuron_capture``): a test that calls
#: them in this process must not leave them for the next test on the same worker (a
#: left ``NEURON_RT_INSPECT_ENABLE`` makes every later ``run`` step aside).
BACKEND_ENV_PREFIXES = ("NEURON_RT_INSPECT", "NEURON_FRAMEWORK_DEBUG", "NEURON_COMPILE_CACHE_URL", "XLA_")


@pytest.fixture(autouse=True)
def _backend_env_restored() -> Iterator[None]:
    before = {k: v for k, v in os.environ.items() if k.startswith(BACKEND_ENV_PREFIXES)}
    had_pjrt = os.environ.get("PJRT_DEVICE")
    yield
    for key in [k for k in os.environ if k.startswith(BACKEND_ENV_PREFIXES)]:
        if key not in before:
            del os.environ[key]
    os.environ.update(before)
    if had_pjrt is None:
        os.environ.pop("PJRT_DEVICE", None)
    else:
        os.environ["PJRT_DEVICE"] = had_pjrt


#: Files whose tests assert what only an undisturbed run shows (see below).
QUIET_FILES = frozenset(
    {
        "tests/integration/lsp/test_profile_run.py",
        "tests/integration/lsp/test_fixes.py",
        "tests/integration/cli/test_fix.py",
        # the bound needs an undisturbed wall: under the parallel part's load it bounds nothing
        "tests/integration/harness/test_calibration_bound.py",
    }
)


#: Files whose tests drive the torch-xla venv (XLA_PY) as the target's Python: marked
#: ``xla``, scripts/test.sh runs them beside the editor's tests, with scripts/test-xla.sh
#: (each run imports torch 2.9 and torch-xla: ~4 s of CPU before it profiles anything).
XLA_FILES = frozenset(
    {
        "tests/integration/cli/test_run_xla.py",
        "tests/integration/cli/test_run_xla_trainer.py",
        "tests/integration/harness/test_xla_backend.py",
        "tests/integration/harness/test_xla_device.py",
        "tests/integration/harness/test_xla_nanogpt.py",
        "tests/integration/harness/test_xla_work.py",
    }
)


def worker_group(nodeid: str) -> str:
    """Which tests run on one worker, in order, under ``pytest -n N --dist loadgroup``
    (scripts/test.sh): each test file together, so its module-scoped harness runs happen
    once; every editor test together (one VS Code at a time); the lab's tests together
    (they share the machine's namespaces and daemons: one lab user at a time; they
    mostly wait on timeouts, so they run beside the rest)."""
    file = nodeid.split("::", 1)[0]
    if file.startswith("tests/e2e/"):
        return "e2e"
    if file.startswith("tests/nodes/"):
        return "lab"
    return file


@pytest.hookimpl(optionalhook=True)  # xdist's hook: absent under -p no:xdist (the serial part)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:  # xdist's Producer, Scheduling
    """The groups above, read from the test ids. xdist's own ``loadgroup`` reads an
    ``xdist_group`` mark through a suffix it writes into ``item._nodeid``, which
    pytest 9.2 no longer reads (its ids come from ``item._id``): every test was then
    scheduled alone, and each module fixture ran once per worker."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return ByGroup(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The editor's tests and those whose assertions need a quiet host are ``serial``,
    out of the parallel part: scripts/test.sh runs the editor's in a pytest of their
    own beside it (one VS Code at a time, at a higher priority than the niced suite),
    and the quiet ones alone after everything else (a run judged noisy withholds timing
    findings and draws its heat grey; a fix is offered only when it measured faster)."""
    for item in items:
        file = item.nodeid.split("::", 1)[0]
        if item.get_closest_marker("e2e") or file in QUIET_FILES:
            item.add_marker(pytest.mark.serial)
        if file in XLA_FILES:
            item.add_marker(pytest.mark.xla)


# In CI (CI=true) a skip is a failure unless its reason names hardware no CI machine
# has: a missing tool or set-up step must not pass as green. On a developer's machine
# skips stay skips (e.g. no sshd installed yet).
HARDWARE = ("GPU", "CUDA", "Trainium", "Neuron device")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    if report.skipped and os.environ.get("CI") and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if not any(word in reason for word in HARDWARE):
            report.outcome = "failed"
            report.longrepr = f"skipped in CI, which counts as a failure: {reason}"
    return report
