"""``trainium-lens fetch RUN_ID [--dest DIR]``: copy a run's artifacts here.

Artifacts (the Chrome trace, the Neuron profile folder, NEFF/NTFF files) stay
on the host that ran the job; the stored result names the host
(``artifacts.location``) and the run folder there. This copies that folder
(over the same SSH master as a run) and prints where each artifact landed.
"""

from __future__ import annotations

import argparse
from pathlib import Path, PurePosixPath

from trainium_lens.cli.common import add_run_arguments, workspace_path
from trainium_lens.cli.where import where_from_args
from trainium_lens.errors import UsageError
from trainium_lens.model.job import workspace_id
from trainium_lens.model.paths import UnsafePath, in_workspace_folder, local_run_file, plain_name
from trainium_lens.model.store import ARTIFACTS_DIR, STORE_DIR, RunStore, write_ignore
from trainium_lens.targets.make import make_target


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "fetch",
        help="copy a run's artifacts (trace, Neuron profile) from its host",
        description="Copy the artifacts of a stored run (trace, Neuron profile, NEFF/NTFF) "
        "from the host that ran it into a local folder.",
    )
    add_run_arguments(p, "a run id (or a unique prefix)")
    p.add_argument(
        "--dest", metavar="DIR", help="where to put them (default: <workspace>/.trainium-lens/artifacts)"
    )
    p.add_argument("--work-dir", metavar="DIR", help="the work dir on the SSH host the run used")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    workspace = workspace_path(args.workspace)
    result = RunStore(workspace).get(args.run)
    art = result.artifacts
    if not art.run_dir:
        raise UsageError(f"run {result.run_id} lists no artifacts")
    # The result names the folder (untrusted): a plain name here, a run folder
    # of this workspace when it says the folder is on this machine.
    try:
        name = plain_name(art.run_dir, "run folder name")
        local = art.location in ("", "local")
        if local:
            local_run_file(art.run_dir, workspace_id(workspace))
    except UnsafePath as err:
        raise UsageError(f"run {result.run_id}: {err}: not fetched") from None
    if args.dest:
        local_dir = Path(args.dest).expanduser() / name  # the user's own choice
    else:
        local_dir = workspace / STORE_DIR / ARTIFACTS_DIR / name
        try:  # a committed `.trainium-lens` or `artifacts` link must not carry the copy out
            in_workspace_folder(local_dir, workspace, STORE_DIR)
        except UnsafePath:
            raise UsageError(
                f"{local_dir.parent} leads outside {workspace / STORE_DIR} (a symlink?): not fetched there"
            ) from None
        write_ignore(workspace / STORE_DIR)
    if local_dir.exists() or local_dir.is_symlink():
        verb = "already fetched"  # a fetch never replaces anything: the copy there stays
    else:
        target = make_target(where_from_args(args).at(None if local else art.location))
        try:
            local_dir = target.fetch(art.run_dir, local_dir, workspace=workspace)
        finally:
            target.close()
        verb = "fetched"
    files = [p for p in local_dir.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    print(
        f"{verb} {len(files)} files ({size / 1e6:.1f} MB) of run {result.run_id} "
        f"from {art.location or 'local'} to {local_dir}"
        + (" (remove it to fetch again)" if verb == "already fetched" else "")
    )
    for label, remote in (("trace", art.trace), ("neuron profile", art.neuron_profile_dir)):
        if remote:
            print(f"  {label}: {_local_path(remote, art.run_dir, local_dir)}")
    return 0


def _local_path(remote: str, run_dir: str, local_dir: Path) -> Path:
    try:
        return local_dir / PurePosixPath(remote).relative_to(PurePosixPath(run_dir))
    except ValueError:
        return Path(remote)
