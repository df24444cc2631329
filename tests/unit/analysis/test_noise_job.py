"""The noise verdict tells the job's own processes from outside load (analysis/noise.py):
sibling ranks sharing the cores are the job's shape, not noise; outside load that is
there flags the run with the evidence that fired, even when its figures agree with
the wall (a load that slows both alike). Results built by hand, with the evidence
fields the harness writes (harness/runtime/outside.py makes them for real:
tests/unit/harness/runtime/test_outside.py, tests/integration/cli/test_run_load.py)."""

from __future__ import annotations

from tests.unit.analysis.test_noise_and_reconcile import BUSY, QUIET, _result, kinds
from trainium_lens.analysis.noise import evidence

# two ranks on a 2-core host, nothing else running: our threads waited for the sibling
RANKS_ALONE = dict(BUSY, others_cores=0.01, job_cores=0.95, job_processes=4, cpus=2)


def test_sibling_ranks_sharing_the_cores_are_not_noise():
    """Measured: 2 ranks of torchrun on 2 cores were always noisy (the sibling counted
    as other processes, its waits as disturbed steps) with 0.01 cores outside."""
    r = _result(105.0, 100.0, stability=RANKS_ALONE, step_us=[100.0, 400.0, 150.0, 120.0, 90.0])
    assert evidence(r) == [] and "noisy_measurement" not in kinds(r), [f.message for f in r.findings]
    assert "dispatches" in kinds(r)  # timing-based findings are kept
    (note,) = [f for f in r.findings if f.kind == "shared_cores"]
    assert note.severity == "info" and "share the cores" in note.message and "on 2 cores" in note.message
    assert "0.9 cores" in note.message or "1.0 cores" in note.message  # the siblings' use, said
    assert "outside_load" not in kinds(r)


def test_outside_load_flags_a_run_whose_figures_agree_and_names_it():
    """A memory-bandwidth job on the other core: the steps clean, the figures equal to a
    wall it slowed alike (ratio 1.0): the old check needed the figures to show it."""
    loaded = dict(QUIET, others_cores=1.0, cpus=2, outside_top=["python (pid 4242) 0.98 cores"])
    r = _result(100.0, 100.0, stability=loaded)
    assert r.reconciliation.within and "noisy_measurement" not in kinds(r)
    (flag,) = [f for f in r.findings if f.kind == "outside_load"]
    assert flag.severity == "warning" and "1.0 of 2 cores" in flag.message
    assert "python (pid 4242) 0.98 cores" in flag.message
    assert "dispatches" in kinds(r)  # kept: the steps held, the figures say what they were under
    quiet = _result(100.0, 100.0, stability=dict(QUIET, others_cores=0.01, cpus=2))
    assert "outside_load" not in kinds(quiet) and "shared_cores" not in kinds(quiet)


def test_the_kernels_evidence_flags_what_no_process_list_shows():
    """Another container's job (its processes not in our /proc) is seen as memory
    pressure or steal time; CPU pressure alone is not named (our own ranks cause it)."""
    mem = _result(100.0, 100.0, stability=dict(QUIET, others_cores=0.1, memory_pressure_some=0.2))
    (flag,) = [f for f in mem.findings if f.kind == "outside_load"]
    assert "stalled on memory 20%" in flag.message
    steal = _result(100.0, 100.0, stability=dict(QUIET, others_cores=0.1, steal_cores=0.4))
    assert any("steal time" in f.message for f in steal.findings if f.kind == "outside_load")
    own = dict(RANKS_ALONE, cpu_pressure_some=0.8)
    assert "outside_load" not in kinds(_result(105.0, 100.0, stability=own))


def test_ranks_under_an_outside_spinner_are_flagged_with_the_spinner_not_the_sibling():
    spun = dict(
        RANKS_ALONE, others_cores=0.9, outside_top=["spin (pid 77) 0.90 cores"], cpu_pressure_some=0.7
    )
    r = _result(300.0, 100.0, stability=spun, step_us=[100.0, 400.0, 150.0, 120.0, 90.0])
    (noisy,) = [f for f in r.findings if f.kind == "noisy_measurement"]
    assert "outside this job used 0.9 of 2 cores" in noisy.message and "spin (pid 77)" in noisy.message
    assert "waited for a CPU 70% of it (PSI)" in noisy.message
    assert "shared_cores" not in kinds(r)
