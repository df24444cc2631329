"""The magic's options: ``%%trainium_lens [--steps N:M] [--backend B] [--include PKG]
[--json PATH] [--no-store]``. A bad one is one line, the usage (``UsageError``)."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, field

from trainium_lens.errors import UsageError
from trainium_lens.harness.spec import BACKENDS
from trainium_lens.model.script import parse_steps

USAGE = (
    "%%trainium_lens [--steps N:M] [--loop|--one-step] [--backend auto|neuron|cuda|cpu|xla] "
    "[--include PKG] [--json PATH] [--no-store]"
)


@dataclass
class CellOptions:
    backend: str = "auto"
    protocol: dict[str, int] = field(default_factory=dict)  # overrides of the default protocol
    json: str | None = None
    no_store: bool = False
    include: list[str] = field(default_factory=list)  # installed packages whose lines count
    steps: tuple[int, int] | None = None  # --steps as given (a loop cell's own steps N..M)
    loop: bool | None = None  # --loop / --one-step: the cell's kind as the user says; None: detected


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]  # argparse would exit
        raise UsageError(f"{message}; usage: {USAGE}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%%trainium_lens", add_help=False, exit_on_error=False)
    p.add_argument("--steps", metavar="N:M")
    p.add_argument("--backend", choices=BACKENDS, default="auto")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--no-store", action="store_true")
    p.add_argument("--include", action="append", default=[], metavar="PKG")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--loop", dest="loop", action="store_const", const=True)
    kind.add_argument("--one-step", dest="loop", action="store_const", const=False)
    return p


def steps_protocol(text: str) -> dict[str, int]:
    """``--steps N:M`` on a cell that is one step: runs N..M of the cell are the
    profiled ones (``active``), the runs before them after the first unprofiled ones
    are the profiler's wait and warm-up (``run``'s numbering: run 1 compiles)."""
    n, m = parse_steps(text)
    before = n - 2  # run 1 (and the protocol's second first call) run unprofiled
    warmup = min(1, before)
    return {"wait": before - warmup, "warmup": warmup, "active": m - n + 1}


def parse(line: str) -> CellOptions:
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"{exc}; usage: {USAGE}") from None
    try:
        args = _parser().parse_args(words)
    except argparse.ArgumentError as exc:
        raise UsageError(f"{exc}; usage: {USAGE}") from None
    try:
        protocol = steps_protocol(args.steps) if args.steps else {}
    except UsageError as exc:
        raise UsageError(f"{exc}; usage: {USAGE}") from None
    bad = [n for n in args.include if not all(part.isidentifier() for part in n.split("."))]
    if bad:
        raise UsageError(f"--include takes a dotted package name, got {bad[0]!r}; usage: {USAGE}")
    return CellOptions(
        backend=args.backend,
        protocol=protocol,
        json=args.json,
        no_store=args.no_store,
        include=args.include,
        steps=parse_steps(args.steps) if args.steps else None,
        loop=args.loop,
    )
