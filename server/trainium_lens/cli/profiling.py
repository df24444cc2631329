"""A profile job run from the command line (``profile``, ``check``): on the target
the arguments name (``cli/where.py``), with the
progress line on stderr and SIGTERM/SIGHUP stopping it, its errors one line."""

from __future__ import annotations

import argparse
import sys

from trainium_lens.cli.console import Progress
from trainium_lens.cli.signals import stopping_on_signals
from trainium_lens.cli.where import where_from_args
from trainium_lens.engine import runner
from trainium_lens.errors import HarnessError, LensError, NotStored
from trainium_lens.model.job import Job
from trainium_lens.model.result import Result
from trainium_lens.model.store import RunStore
from trainium_lens.targets.make import make_target


def one_line(err: LensError) -> LensError:
    """The same error with a one-line message; a user-code error names the user's line."""
    message = " ".join(str(err).split())
    if isinstance(err, HarnessError):
        if (
            err.kind in ("user_code", "inputs")
            and err.file
            and err.line
            and f"{err.file}:{err.line}" not in message
        ):
            message = f"{err.file}:{err.line}: {message}"
    err.args = (message,)  # str(err) is args[0]; kind, file, line... stay
    return err


def profile_job(
    job: Job, args: argparse.Namespace, store: RunStore | None
) -> tuple[list[Result], NotStored | None]:
    """Run ``job`` on the target the arguments name (``cli/where.py``), with
    the progress line on stderr and SIGTERM/SIGHUP stopping it: shared with ``check``.
    A run that finished but could not be stored comes back with why (``NotStored``):
    the caller shows its results first."""
    target = make_target(where_from_args(args))
    progress = Progress(sys.stderr)
    progress.status(f"starting the harness on {target.host}")
    not_stored: NotStored | None = None
    try:
        with stopping_on_signals():
            results = runner.profile(job, target, progress, timeout=args.timeout, store=store)
            if store is None:  # not stored: no result will ever name the run folder (the tables are out)
                runner.remove_own_folder(job, target)
    except NotStored as err:  # the run finished: its tables first, then why it is not kept
        results, not_stored = err.results, err
    except LensError as err:
        raise one_line(err) from None
    finally:
        progress.close()
        target.close()
    return results, not_stored
