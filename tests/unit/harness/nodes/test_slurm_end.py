"""How SLURM ended a job, read from SLURM's own words (harness/nodes/slurm_end.py).

The texts below are what the lab's slurm 22.05 printed (``scontrol show job -o``
after a ``scancel`` and after node2's slurmd was killed, ``sinfo -N`` then); the
lab keeps no accounting, so ``sacct``'s line is its documented ``-P`` form. The
end to end checks are the lab's (tests/nodes/test_slurm_ends.py)."""

from __future__ import annotations

from trainium_lens.harness.nodes.slurm_end import cause, parse_sacct, parse_scontrol, parse_sinfo

CANCELLED = (
    "JobId=4 JobName=sleep UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901756 Nice=0 "
    "Account=(null) QOS=(null) JobState=CANCELLED Reason=None Dependency=(null) Requeue=1 Restarts=0 "
    "BatchFlag=0 Reboot=0 ExitCode=0:15 RunTime=00:00:02 TimeLimit=UNLIMITED TimeMin=N/A "
    "SubmitTime=2026-12-07T04:28:47 EndTime=2026-12-07T04:28:49 Partition=lab NodeList=node[1-2] "
    "BatchHost=node1 NumNodes=2 Command=sleep WorkDir=/root Power= \n"
)
NODE_FAIL = CANCELLED.replace("JobId=4", "JobId=5").replace(
    "JobState=CANCELLED Reason=None", "JobState=NODE_FAIL Reason=NodeDown"
)


def test_a_cancelled_job_is_named_with_its_time():
    end = parse_scontrol(CANCELLED, "4")
    assert end is not None and end["state"] == "CANCELLED" and end["nodes"] == "node[1-2]"
    assert cause({"job": "4", **end}) == "the SLURM job 4 was cancelled at 2026-12-07T04:28:49 (scancel)"


def test_a_node_failure_names_the_node_that_is_down():
    end = parse_scontrol(NODE_FAIL, "5")
    assert end is not None and end["state"] == "NODE_FAIL"
    down = parse_sinfo("node1|idle|none\nnode2|down*|Not responding\n")
    assert down == [("node2", "Not responding")]
    line = cause({"job": "5", **end, "down": down})
    assert line is not None and line.startswith("node2 (Not responding) went down")
    assert "SLURM ended the job 5 with NODE_FAIL at 2026-12-07T04:28:49" in line


def test_another_jobs_record_or_none_is_not_read_as_this_one():
    assert parse_scontrol(CANCELLED, "40") is None
    assert parse_scontrol("slurm_load_jobs error: Invalid job id specified\n", "4") is None


def test_sacct_names_who_cancelled():
    end = parse_sacct("CANCELLED by 1000|2026-12-07T04:28:49|node[1-2]|00:10:00\n")
    assert end == {
        "state": "CANCELLED",
        "end": "2026-12-07T04:28:49",
        "nodes": "node[1-2]",
        "limit": "00:10:00",
        "by": "1000",
    }
    assert "cancelled by uid 1000 at" in str(cause({"job": "7", **end}))
    assert parse_sacct("") is None  # no accounting: sacct fails, nothing to read


def test_the_scripts_own_end_is_not_slurms():
    for state in ("COMPLETED", "FAILED", "RUNNING", "COMPLETING"):
        assert cause({"job": "4", "state": state, "end": "2026-12-07T04:28:49"}) is None
    assert cause(None) is None
    timeout = cause({"job": "9", "state": "TIMEOUT", "end": "2026-12-07T05:00:00", "limit": "00:01:00"})
    assert timeout == "the SLURM job 9 reached its time limit (00:01:00) at 2026-12-07T05:00:00"
