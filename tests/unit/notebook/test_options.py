"""The magic's options: each one read, a bad one is one line with the usage."""

from __future__ import annotations

import pytest

from trainium_lens.errors import UsageError
from trainium_lens.notebook.options import USAGE, parse


def test_defaults_leave_the_protocol_alone() -> None:
    options = parse("")
    assert (options.backend, options.protocol, options.json, options.no_store, options.include) == (
        "auto",
        {},
        None,
        False,
        [],
    )


@pytest.mark.parametrize(
    "steps, protocol",
    [
        ("2:3", {"wait": 0, "warmup": 0, "active": 2}),  # run 1 unprofiled, runs 2..3 profiled
        ("3:3", {"wait": 0, "warmup": 1, "active": 1}),
        ("6:10", {"wait": 3, "warmup": 1, "active": 5}),
    ],
)
def test_steps_are_the_profiled_runs(steps: str, protocol: dict) -> None:
    assert parse(f"--steps {steps}").protocol == protocol


def test_every_option_is_read() -> None:
    options = parse("--backend cpu --json 'out dir/r.json' --no-store --include transformers --include a.b")
    assert options.backend == "cpu" and options.json == "out dir/r.json" and options.no_store
    assert options.include == ["transformers", "a.b"]


@pytest.mark.parametrize(
    "line, says",
    [
        ("--stpes 2:3", "unrecognized arguments: --stpes"),
        ("--steps 1:3", "need 2 <= N <= M"),
        ("--steps 3", "--steps takes N:M"),
        ("--backend tpu", "invalid choice: 'tpu'"),
        ("--include 'a b'", "--include takes a dotted package name"),
        ("--json 'unclosed", "No closing quotation"),
    ],
)
def test_a_bad_option_is_one_line_with_the_usage(line: str, says: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse(line)
    message = str(caught.value)
    assert says in message and message.endswith(f"usage: {USAGE}") and "\n" not in message
