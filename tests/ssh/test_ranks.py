"""torchrun jobs (``--nproc 2``) over SSH against the real sshd on loopback (the
"host" is this machine, its work dir a temp folder): the same merged result as
a local run, and a cancel stops every rank on the host."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.integration.engine.test_ranks_run import check_uneven
from tests.support.ranks_cases import HANGS, UNEVEN, cancel_when_running, wait_gone
from trainium_lens.engine import runner
from trainium_lens.errors import Cancelled
from trainium_lens.model.job import make_job
from trainium_lens.model.store import RunStore
from trainium_lens.targets.ssh.target import SshTarget

pytestmark = pytest.mark.ssh


def _target(sshd, work: Path) -> SshTarget:
    return SshTarget(
        "lens-test", ssh_config=str(sshd.config), remote_python=sys.executable, work_dir=str(work)
    )


def test_uneven_ranks_over_ssh(sshd, ssh_control_dir, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "uneven.py").write_text(UNEVEN)
    work = tmp_path / "work"
    job = make_job(ws / "uneven.py", workspace=ws, nproc=2)
    (res,) = runner.profile(job, _target(sshd, work), store=RunStore(ws), timeout=300)
    check_uneven(res, UNEVEN)
    assert res.host == "lens-test"
    for rank in res.ranks:  # each rank's artifacts are on the host, in its own folder
        assert rank.artifacts.location == "lens-test"
        assert rank.artifacts.run_dir.startswith(str(work.resolve()))
        assert Path(rank.artifacts.trace or "").is_file()
    assert not wait_gone(f"{job.batch_id}/spec.json"), "a rank outlived the run on the host"


def test_cancel_over_ssh_leaves_no_rank_on_the_host(sshd, ssh_control_dir, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hangs.py").write_text(HANGS)
    work = tmp_path / "work"
    job = make_job(ws / "hangs.py", workspace=ws)
    marker = f"{job.batch_id}/spec.json"
    cancel, seen = cancel_when_running([work / "src" / f"hangs.py.rank{k}" for k in range(2)], marker)
    with pytest.raises(Cancelled):
        runner.profile(job, _target(sshd, work), cancel=cancel, timeout=180)
    assert len(seen) >= 3, "the torchrun agent and both ranks were running on the host"
    assert not wait_gone(marker, 15), "a rank outlived the cancel"
