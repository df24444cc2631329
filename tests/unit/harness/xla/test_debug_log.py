"""torch-xla's execution log as a cross-check of the steps found (``harness/xla/debug_log.py``).

``tests/data/xla_nxd_executions.log`` is a real log: torch-xla 2.9 (PJRT CPU) with
``PT_XLA_DEBUG_LEVEL=2 PT_XLA_DEBUG_FILE=…`` running ``tests/data/nanogpt/train_xla.py
--loop nxd --grad-accum 2 --max-iters 5`` (paths cut to SITE/, WS/, PY/): five updates, each
two micro-batch graphs and the optimizer's, the first update's optimizer graph its own."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import DATA
from trainium_lens.harness.xla import debug_log

LOG = DATA / "xla_nxd_executions.log"
LOADER = "torch_xla.sync in parallel loader at step end"


def test_every_execution_is_read_with_its_cause_and_hash_and_compiles_are_not() -> None:
    runs = debug_log.executions(str(LOG))
    assert len(runs) == 15  # 5 updates × 3 graphs; the 4 "Compilation Analysis" blocks are no execution
    assert [c for c, _h in runs[:3]] == [LOADER, "user torch_xla.sync", LOADER]
    assert all(len(h) == 32 for _c, h in runs)
    # between two offsets: only the blocks written there
    text = LOG.read_bytes()
    cut = 0
    for _ in range(5):  # the third execution's block starts (each block opens and closes with ====)
        cut = text.index(b"Execution Analysis: ====", cut + 1)
    assert len(debug_log.executions(str(LOG), 0, cut)) == 2
    assert len(debug_log.executions(str(LOG), cut)) == 13


def test_the_steady_part_repeats_one_update_of_three_graphs() -> None:
    hashes = [h for _c, h in debug_log.executions(str(LOG))]
    assert debug_log.period(hashes) is None  # the first update's optimizer graph differs
    assert debug_log.period(hashes[3:]) == 3
    assert debug_log.period(hashes[3:6]) is None  # one turn is no repeat


def test_steps_found_as_one_update_each_agree_and_cut_elsewhere_do_not() -> None:
    runs = debug_log.executions(str(LOG))
    steady = runs[3:]
    check = debug_log.cross_check([runs[3:6], runs[6:9], runs[9:12]], steady)
    assert check["agrees"] and check["period"] == 3 and check["graphs_per_step"] == [3, 3, 3]
    assert [g["cause"] for g in check["pattern"]] == [LOADER, "user torch_xla.sync", LOADER]
    assert debug_log.disagreement(check) is None
    # a step per micro-batch (what a detector counting the loader's syncs would find)
    per_batch = debug_log.cross_check([runs[3:4], runs[4:5], runs[5:6]], steady)
    assert not per_batch["agrees"]
    assert "repeats every 3 graphs" in (debug_log.disagreement(per_batch) or "")
    # the right length, the wrong phase (from the second micro-batch to the next update's first)
    shifted = debug_log.cross_check([runs[4:7], runs[7:10], runs[10:13]], runs[4:])
    assert shifted["period"] == 3 and shifted["agrees"]  # one turn of the pattern read from there


def test_the_users_own_settings_stand_and_a_worker_writes_its_own_file(tmp_path: Path) -> None:
    for own in ({"PT_XLA_DEBUG_LEVEL": "1"}, {"PT_XLA_DEBUG": "1"}, {"PT_XLA_DEBUG_FILE": "/x"}):
        users = dict(own)
        assert debug_log.arm(str(tmp_path), users) is None and users == own
    env: dict[str, str] = {}
    path = debug_log.arm(str(tmp_path), env)
    assert path and env["PT_XLA_DEBUG_LEVEL"] == "2" and env["PT_XLA_DEBUG_FILE"] == path
    # a child process (a torchrun worker) inherits ours: armed again, its own file
    env["PT_XLA_DEBUG_FILE"] = env[debug_log.OURS] = str(tmp_path / "xla-executions-1.log")
    assert debug_log.arm(str(tmp_path), env) == path
    # the user's script changed it meanwhile: theirs
    env["PT_XLA_DEBUG_FILE"] = "/mine.log"
    assert debug_log.arm(str(tmp_path), env) is None and env["PT_XLA_DEBUG_FILE"] == "/mine.log"


def test_the_metrics_fallback_counts_graphs_per_step() -> None:
    assert debug_log.counted([3, 3, 3], "why")["agrees"]
    uneven = debug_log.counted([3, 2, 3], "why")
    assert not uneven["agrees"] and "different numbers of graphs" in (debug_log.disagreement(uneven) or "")


def test_the_finder_takes_the_third_turn_of_a_pattern_as_a_step_then_counts_turns(tmp_path: Path) -> None:
    """The real log written block by block, as the script's syncs write it: the first update
    (its optimizer graph its own) is no turn; the pattern of 3 is taken at the end of the
    third turn after it, and every 3 graphs executed from there end a step."""
    text = LOG.read_text()
    starts = [i for i in range(len(text)) if text.startswith("Execution Analysis: ====", i)][::2]
    log = tmp_path / "x.log"
    log.write_text("")
    executed = {"n": 0}
    finder = debug_log.StepFinder(str(log), lambda: executed["n"])
    ended = []
    for k, start in enumerate(starts):
        stop = starts[k + 1] if k + 1 < len(starts) else len(text)
        with log.open("a") as f:
            f.write(text[start:stop])
        executed["n"] += 1
        if finder.turn_ended():
            ended.append(k + 1)  # executions so far
    assert finder.period == 3
    assert ended == [12, 15]  # 3 (first update) + 3 turns; then one more turn
    assert not finder.gave_up()


def test_the_finder_gives_up_on_a_log_that_never_repeats(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    finder = debug_log.StepFinder(str(log), lambda: 0)
    block = (
        f"Execution Analysis: {'=' * 80}\n"
        "Execution Analysis: Execution Cause\nExecution Analysis:   user torch_xla.sync\n"
        "Execution Analysis: Graph Info: \nExecution Analysis:   Graph Hash: {h}\n"
        f"Execution Analysis: {'-' * 80}\n"
    )
    with log.open("a") as f:
        for i in range(debug_log.GIVE_UP):
            f.write(block.format(h=f"{i:032x}"))
    assert not finder.turn_ended() and finder.period is None and finder.gave_up()


def test_a_retired_log_grows_no_more(tmp_path: Path) -> None:
    """torch-xla opens the file for each block (checked: a removed log is made again at the
    next execution): once retired, what it appends goes nowhere."""
    log = tmp_path / "xla-executions-1.log"
    log.write_text(LOG.read_text())
    debug_log.retire(str(log))
    with open(log, "a") as f:  # as torch-xla appends each block
        f.write(LOG.read_text())
    assert log.is_symlink() and debug_log.offset(str(log)) == 0 and debug_log.executions(str(log)) == []
    assert not (tmp_path / "xla-executions-1.log.retired").exists()
