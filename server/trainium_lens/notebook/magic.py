"""``%%trainium_lens`` and ``%trainium_lens STATEMENT``, registered by
``%load_ext trainium_lens`` (``trainium_lens.load_ipython_extension``).

What the user sees when something goes wrong, and why:

* the cell raises: the user's own exception, raised as it is, its traceback
  starting at the cell's frame (the tool's frames are not the user's business);
* a bad option, or anything the tool refuses: one line, IPython's ``UsageError``
  form, no traceback. The kernel and the namespace stay as they were.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from trainium_lens.errors import LensError
from trainium_lens.notebook import cell as cells
from trainium_lens.notebook.html import render_html
from trainium_lens.notebook.options import parse
from trainium_lens.notebook.run import UserCodeFailed, header, profile_cell, render

NAME = "trainium_lens"
STOPPED = (
    "KeyboardInterrupt: the profile run stopped; nothing was stored (the cell's variables hold its last run)"
)


def load(shell: Any) -> None:
    shell.register_magic_function(magic, magic_kind="line_cell", magic_name=NAME)


def magic(line: str, body: str | None = None) -> None:
    from IPython import get_ipython
    from IPython.core.error import UsageError as IPythonUsageError

    shell = get_ipython()
    try:
        if body is None:  # %trainium_lens STATEMENT: the options are the cell's defaults
            options, statement = parse(""), line
        else:
            options, statement = parse(line), None
        cell = cells.current_cell(shell, line, body)
        cells.remember(cell)
        if statement is None:
            code = cells.compile_body(shell, cell, body or "")
            what = "the cell"
        else:
            code = cells.compile_statement(shell, cell, statement)
            what = f"`{statement.strip()}`"
        loop = (
            options.loop
            if options.loop is not None
            else statement is None and cells.loops_over_steps(body or "")
        )
        run = profile_cell(shell, cell, code, options, loop=bool(loop))
    except UserCodeFailed as failed:
        raise _as_users(shell, failed.error, failed.cell_file) from None
    except SyntaxError as exc:
        raise _syntax_error(shell, exc) from None
    except LensError as exc:
        raise IPythonUsageError(str(exc)) from None
    except KeyboardInterrupt:  # the profiler stopped and the run folder went on the way out
        stopped = KeyboardInterrupt()
        stopped._render_traceback_ = lambda: [STOPPED]  # type: ignore[attr-defined]
        raise stopped from None
    from IPython.display import display

    # HTML with heat bars where the front end draws it; the CLI's text everywhere else
    text = render(run, what)
    display({"text/plain": text, "text/html": render_html(header(run, what), run.results)}, raw=True)


def _as_users(shell: Any, error: BaseException, cell_file: str) -> BaseException:
    """``error`` as IPython would show it had the cell raised it alone: its traceback
    from the first frame of a cell on (the tool's frames above it dropped)."""
    is_cell = cells.cell_names(cell_file)
    tb: TracebackType | None = error.__traceback__
    while tb is not None and is_cell(tb.tb_frame.f_code.co_filename) is None:
        tb = tb.tb_next
    error.__suppress_context__ = True
    if tb is None:
        return error
    try:
        shown = shell.InteractiveTB.structured_traceback(type(error), error, tb)
        # IPython's hook for an exception that renders its own traceback
        error._render_traceback_ = lambda: shown  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - an object that takes no attribute: IPython's own rendering
        pass
    return error.with_traceback(tb)


class _Rendered(Exception):
    """An error whose lines are already rendered as IPython renders its kind."""

    def __init__(self, message: str, lines: list[str]) -> None:
        super().__init__(message)
        self.lines = lines

    def _render_traceback_(self) -> list[str]:  # IPython's hook: these lines, as they are
        return self.lines


def _syntax_error(shell: Any, error: SyntaxError) -> BaseException:
    """The cell's syntax error as IPython shows one in a cell it compiles itself: the
    cell's line and a caret, no frame (raised from here, a SyntaxError would be shown
    with every frame between the cell and the magic)."""
    try:
        lines = shell.SyntaxTB.structured_traceback(type(error), error, [])
    except Exception:  # noqa: BLE001 - an IPython without it: the error as it is
        return error
    return type(type(error).__name__, (_Rendered,), {})(str(error), lines)
