"""``run``'s reading of the user's command: which launcher, which script, and
the commands the harness cannot arm in, refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainium_lens.errors import UsageError
from trainium_lens.model.script import parse_command, parse_steps


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("import torch\n\n\nif __name__ == '__main__':\n    pass\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "run.py").write_text("")
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "launcher", "script"),
    [
        (["python", "train.py", "--lr", "3e-4"], "python", "train.py"),
        (["/opt/venv/bin/python3.11", "-u", "-X", "dev", "train.py"], "python", "train.py"),
        (["python", "-um", "pkg.run", "-x"], "python", "pkg/run.py"),
        (
            ["torchrun", "--nproc-per-node", "2", "--standalone", "train.py", "--lr", "1"],
            "torchrun",
            "train.py",
        ),
        (["torchrun", "--nproc_per_node=2", "train.py"], "torchrun", "train.py"),
        (["python", "-m", "torch.distributed.run", "--nnodes", "1", "train.py"], "torchrun", "train.py"),
        (
            [
                "accelerate",
                "launch",
                "--num_processes",
                "2",
                "--cpu",
                "--mixed-precision=no",
                "train.py",
                "-x",
            ],
            "accelerate",
            "train.py",
        ),
        (["accelerate-launch", "--multi-gpu", "train.py"], "accelerate", "train.py"),
        (
            ["python", "-m", "accelerate.commands.launch", "--num-processes", "2", "train.py"],
            "accelerate",
            "train.py",
        ),
        (["accelerate", "launch", "-m", "pkg.run"], "accelerate", "pkg/run.py"),
    ],
)
def test_launchers(cwd: Path, argv: list[str], launcher: str, script: str) -> None:
    cmd = parse_command(argv, cwd)
    assert cmd.launcher == launcher
    assert cmd.script == (cwd / script).resolve()
    assert cmd.argv == argv  # never rewritten


def test_torchrun_nproc_and_main_line(cwd: Path) -> None:
    cmd = parse_command(["torchrun", "--nproc-per-node", "4", "train.py"], cwd)
    assert cmd.nproc == 4
    assert cmd.main_line() == 4
    assert parse_command(["accelerate", "launch", "--num-processes=3", "train.py"], cwd).nproc == 3


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["python", "-I", "train.py"], "-I"),
        (["python", "-sE", "train.py"], "-E"),
        (["python3", "-S", "train.py"], "-S"),
        (["bash", "run.sh"], "not a Python command"),
        (["python", "-c", "print(1)"], "-c is not a script"),
        (["python", "missing.py"], "no such script"),
        (["torchrun", "--nproc-per-node", "2"], "names no script"),
        (["torchrun", "--no-python", "echo"], "--no-python"),
        (["accelerate", "launch", "--num_processes", "2"], "names no script"),
        (["accelerate", "launch", "--no-python", "echo"], "--no_python"),
        (["accelerate", "env"], "not a Python command"),
        ([], "no command"),
    ],
)
def test_refused(cwd: Path, argv: list[str], says: str) -> None:
    with pytest.raises(UsageError, match=None) as info:
        parse_command(argv, cwd)
    assert says in str(info.value)


def test_steps() -> None:
    assert parse_steps("3:5") == (3, 5)
    for bad in ("1:3", "5:3", "3", "a:b"):
        with pytest.raises(UsageError):
            parse_steps(bad)


@pytest.mark.parametrize(
    ("argv", "launcher", "inner", "nproc"),
    [
        (
            ["srun", "-N2", "--ntasks-per-node=1", "torchrun", "--nproc-per-node", "2", "train.py"],
            "torchrun",
            3,
            2,
        ),
        (
            ["srun", "-N", "2", "-l", "--partition", "lab", "python", "train.py", "--lr", "1"],
            "python",
            6,
            None,
        ),
        (
            [
                "srun",
                "--kill-on-bad-exit",
                "--export=ALL,X=1",
                "python3",
                "-m",
                "torch.distributed.run",
                "train.py",
            ],
            "torchrun",
            3,
            None,
        ),
        (["srun", "-K", "-u", "/opt/venv/bin/python", "train.py"], "python", 3, None),
    ],
)
def test_srun_wraps_python_or_torchrun(cwd: Path, argv: list[str], launcher: str, inner: int, nproc) -> None:
    cmd = parse_command(argv, cwd)
    assert (cmd.wrapper, cmd.launcher, cmd.inner, cmd.nproc) == ("srun", launcher, inner, nproc)
    assert cmd.script == (cwd / "train.py").resolve()
    assert cmd.argv == argv  # never rewritten


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["srun", "-N2", "bash", "-c", "torchrun train.py"], "srun runs bash, not Python"),
        (["srun", "--export=NONE", "python", "train.py"], "does not pass this environment"),
        (["srun", "--export", "PATH", "python", "train.py"], "does not pass this environment"),
        (["srun", "-N2"], "srun names no command"),
        (["srun", "--multi-prog", "progs.conf"], "--multi-prog"),
        (["srun", "python", "-I", "train.py"], "-I"),
    ],
)
def test_srun_refused(cwd: Path, argv: list[str], says: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_command(argv, cwd)
    assert says in str(info.value)


def test_remote_argv_puts_the_hosts_python_in_the_wrapped_command() -> None:
    from trainium_lens.targets.ssh.script import remote_argv

    py = "/opt/venv/bin/python"
    assert remote_argv(["srun", "-N2", "torchrun", "--nnodes", "2", "t.py"], "torchrun", py, 2) == [
        "srun",
        "-N2",
        py,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "2",
        "t.py",
    ]
    assert remote_argv(["srun", "python3", "t.py"], "python", py, 1) == ["srun", py, "t.py"]
    assert remote_argv(["python", "t.py"], "python", py) == [py, "t.py"]
