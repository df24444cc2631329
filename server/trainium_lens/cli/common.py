"""Arguments the subcommands that work on stored runs share."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainium_lens.cli.where import add_ssh_config_argument
from trainium_lens.model.job import workspace_root_for

RUN_HELP = "a run id (or unique prefix), or a result .json"
PROTOCOL_HELP = {
    "wait": "steps run before the profiler records (default 2)",
    "warmup": "steps recorded but discarded (default 1)",
    "active": "measured steps; figures are their per-step average (default 5)",
    "timing_calls": "unprofiled calls timed after profiling (default 20)",
}


def add_run_arguments(
    p: argparse.ArgumentParser,
    run_help: str = RUN_HELP,
    *,
    ssh_config_help: str | None = "ssh config file to use",
) -> None:
    """``RUN_ID``, ``--workspace`` and (unless None) ``--ssh-config``."""
    p.add_argument("run", metavar="RUN_ID", help=run_help)
    add_workspace_argument(p)
    if ssh_config_help:
        add_ssh_config_argument(p, ssh_config_help)


def add_verbose_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="every row of the long sections (an xla run's fusions and HLO instructions; "
        "the default shows the top ones and says how many more)",
    )


def add_workspace_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workspace",
        metavar="DIR",
        help="workspace whose runs to look in (default: the current git work tree)",
    )


def workspace_path(workspace: str | None) -> Path:
    """``--workspace`` resolved, else the git work tree of the current folder."""
    return Path(workspace).expanduser().resolve() if workspace else workspace_root_for(Path.cwd())
