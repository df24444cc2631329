"""``trainium-lens``: the terminal peer of the language server.

Each subcommand lives in its own module under ``cli/commands/`` with two functions,
``register(subparsers)`` (adds its parser, sets ``handler``) and the handler
itself, which returns an exit code. Errors are ``LensError``s: printed here as
one line on stderr, with the error's exit code.
"""

from __future__ import annotations

import argparse
import sys

from trainium_lens import __version__
from trainium_lens.cli.commands import (
    check,
    compare,
    doctor,
    explorer,
    export,
    fetch,
    fix,
    lsp,
    profile,
    run,
    runs,
    show,
)
from trainium_lens.cli.pipes import silence_stdout
from trainium_lens.errors import LensError

#: Every command's ``--help`` ends with this (README's table says the same).
EXIT_CODES = """exit codes:
  0    ok
  1    a regression (check), a failed finding gate, or a fix not measurable
       on this host now (fix): nothing else
  2    usage: an unknown function, no marker, a file that does not parse,
       a missing baseline or result file, bad options, an output path that cannot be written
  3    your code failed (the message names its file:line)
  4    the host or backend cannot run it (unreachable, no torch, no such backend)
  124  timed out
  130  cancelled"""

# In the order ``--help`` lists them.
COMMANDS = (profile, run, show, runs, compare, fix, check, fetch, doctor, explorer, export, lsp)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainium-lens",
        description="Which lines of my PyTorch code cost device time, and why.",
        epilog=EXIT_CODES,
        formatter_class=_Help,
    )
    parser.add_argument("--version", action="version", version=f"trainium-lens {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    for child in sub.choices.values():  # one contract, in every command's --help
        child.epilog = EXIT_CODES
        child.formatter_class = _Help
    return parser


class _Help(argparse.HelpFormatter):
    """Descriptions wrapped as usual; the exit-code table kept as laid out."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("exit codes:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.handler(args) or 0)
    except LensError as err:
        print(f"trainium-lens: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("trainium-lens: cancelled", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout went away (``| head``): end quietly
        silence_stdout()
        return 0
