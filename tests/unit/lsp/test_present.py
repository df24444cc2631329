"""The language server's pure parts: settings, line tracking, labels."""

from __future__ import annotations

import pytest

from tests.support.lsp_client import make_result
from trainium_lens.lsp.features.inlay_hints import label
from trainium_lens.lsp.present import format as fmt
from trainium_lens.lsp.runs import Annotation
from trainium_lens.lsp.settings import Settings, Threshold, parse
from trainium_lens.lsp.tracking import LineTracker, is_stale
from trainium_lens.model import figures
from trainium_lens.targets.where import Where

# -- settings --------------------------------------------------------------------


def test_no_settings_profiles_locally_on_the_automatic_backend():
    settings, warnings = parse(None)
    assert settings == Settings() and warnings == []
    assert (settings.host, settings.backend) == ("local", "auto")


def test_settings_nested_or_flat_and_typed():
    settings, warnings = parse(
        {
            "trainiumLens": {
                "host": "trn1",
                "sshConfig": "/tmp/cfg",
                "remotePython": "/opt/venv/bin/python",
                "workDir": "~/lens",
                "backend": "neuron",
                "protocol": {"warmup": 3, "active": 10},
                "hintThreshold": "2%",
                "historySize": 5,
                "timeoutSeconds": 60,
                "python": "python3",
            }
        }
    )
    assert warnings == []
    assert settings.host == "trn1" and settings.protocol == {"warmup": 3, "active": 10}
    assert settings.hint_threshold == Threshold(share=0.02)
    assert parse({"host": "local", "active": 7})[0].protocol == {"active": 7}
    # The extension's form: {settings: {trainiumLens: ...}}, flat schedule keys
    # (null: unset), and settings only the client reads kept aside without a warning.
    settings, warnings = parse(
        {
            "settings": {
                "trainiumLens": {
                    "host": "local",
                    "wait": None,
                    "warmup": 2,
                    "active": None,
                    "openResultsAfterRun": True,
                }
            }
        }
    )
    assert warnings == [] and settings.protocol == {"warmup": 2}
    assert settings.extra == {"openResultsAfterRun": True}


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("backend", "tpu", "'tpu' is not one of auto, neuron, cuda, cpu, xla; using the default (auto)"),
        ("protocol", {"active": 0}, "active must be at least 1"),
        ("hintThreshold", "fast", "use a share"),
        ("historySize", 0, "between 1 and 10000; using the default (20)"),
        ("timeoutSeconds", "soon", "expected a number of seconds"),
    ],
)
def test_invalid_setting_names_itself_and_its_default(key, value, words):
    settings, warnings = parse({"trainiumLens": {key: value}})
    assert settings == Settings()
    assert len(warnings) == 1 and f"trainiumLens.{key}" in warnings[0] and words in warnings[0]


def test_a_rejected_host_refuses_runs_instead_of_falling_back_to_local():
    settings, warnings = parse({"trainiumLens": {"host": "-oProxyCommand=x"}})
    assert len(warnings) == 1 and "trainiumLens.host" in warnings[0] and "is not a host name" in warnings[0]
    assert "no fallback" in warnings[0] and "using the default" not in warnings[0]
    assert settings.rejected and settings.rejected[0].startswith("trainiumLens.host")
    assert settings != Settings()  # a new target key: the old target is closed
    from trainium_lens.errors import TargetError
    from trainium_lens.lsp.state import LensServer

    server = LensServer()
    server.settings = settings
    with pytest.raises(TargetError, match="invalid setting trainiumLens.host"):
        server.target()
    fixed, _ = parse({"trainiumLens": {"host": "local"}})
    assert fixed.rejected == ()


def test_the_settings_say_where_as_the_cli_options_do():
    settings, warnings = parse(
        {
            "trainiumLens": {
                "host": "trn1",
                "sshConfig": "/tmp/cfg",
                "remotePython": "/opt/py",
                "workDir": "~/w",
            }
        }
    )
    assert warnings == []
    assert settings.where() == Where(
        host="trn1", ssh_config="/tmp/cfg", remote_python="/opt/py", work_dir="~/w"
    )
    assert parse(None)[0].where() == Where()  # this machine
    # across nodes: the hosts (or the login host) take the place of host
    settings, warnings = parse({"trainiumLens": {"host": "trn1", "hosts": ["n1", "n2"], "ifname": "ens5"}})
    assert warnings == []
    where = settings.where()
    assert (where.kind, where.hosts, where.host, where.node.ifname) == ("hosts", ("n1", "n2"), None, "ens5")
    settings, warnings = parse(
        {"trainiumLens": {"slurm": {"login": "login1", "nodes": 4, "partition": "trn"}}}
    )
    assert warnings == []
    where = settings.where()
    assert (where.kind, where.slurm, where.node.nodes, where.node.partition) == ("slurm", "login1", 4, "trn")


@pytest.mark.parametrize(
    "section, words",
    [
        ({"hosts": ["n1", "n1"]}, "trainiumLens.hosts: a host is listed twice"),
        ({"hosts": ["local"]}, "trainiumLens.hosts: 'local' is no node"),
        ({"slurm": {"login": "l", "nodes": 0}}, "trainiumLens.slurm: must be between 1 and 4096"),
        ({"hosts": ["n1"], "slurm": {"login": "l"}}, "trainiumLens.hosts, trainiumLens.slurm.login: use one"),
    ],
)
def test_a_rejected_nodes_setting_refuses_runs_instead_of_falling_back(section, words):
    settings, warnings = parse({"trainiumLens": section})
    assert len(warnings) == 1 and "no fallback" in warnings[0]
    assert settings.rejected and settings.rejected[0].startswith(words)


def test_thresholds():
    assert parse({"hintThreshold": 50})[0].hint_threshold == Threshold(us=50)
    assert parse({"hintThreshold": "0.5ms"})[0].hint_threshold == Threshold(us=500)
    t = Threshold(share=0.1)
    assert t.passes(20, 100) and not t.passes(5, 100)
    assert not Threshold().passes(0, 100)


# -- line tracking -----------------------------------------------------------------

DOC = ["a", "b", "c", "d", "e"]


def test_insert_above_moves_lines_and_insert_below_does_not():
    t = LineTracker({2: 1, 4: 3})  # profiled lines 2 and 4 at 0-based 1 and 3
    t.apply((0, 0), (0, 0), "x\ny\n")
    assert dict(t.items()) == {2: 3, 4: 5} and not t.touched
    t.apply((4, 1), (4, 1), "\nnew")  # Enter at the end of line 4 (0-based)
    assert dict(t.items()) == {2: 3, 4: 6}


def test_edit_inside_a_line_keeps_it_there_touched():
    t = LineTracker({3: 2})
    t.apply((2, 1), (2, 1), "zz")
    assert t.current(3) == 2 and 3 in t.touched


def test_deleting_whole_lines_drops_them_and_pulls_the_rest_up():
    t = LineTracker({1: 0, 2: 1, 3: 2, 5: 4})
    t.apply((1, 0), (3, 0), "")  # delete 0-based lines 1 and 2
    assert dict(t.items()) == {1: 0, 5: 2}


def test_joining_two_annotated_lines_keeps_the_first():
    t = LineTracker({1: 0, 2: 1})
    t.apply((0, 1), (1, 0), "")  # Backspace at the start of line 1
    assert dict(t.items()) == {1: 0}


def test_place_finds_moved_text_and_marks_the_rest_stale():
    placed = LineTracker.place({2: "b", 4: "d", 5: "gone"}, ["new", "a", "b", "c", "d", "e"])
    # "b" and "d" moved down one line; "gone" stays at its number, where "d" now
    # sits, and the line that reads as profiled wins.
    assert dict(placed.items()) == {2: 2, 4: 4}
    assert is_stale("gone", "e", False) and not is_stale("  b", "b  ", False)
    assert is_stale("", "x", True) and not is_stale("", "x", False)


# -- labels ------------------------------------------------------------------------


def test_times_counts_and_headline_name_the_clock():
    times = [figures.time_us(v) for v in (12, 1160, 2_355_000, 0.5)]
    assert times == ["12 µs", "1.16 ms", "2.35 s", "500 ns"]
    neuron = make_result("m.py", "f", 2, {3: ("x", 1160.0, [("aten::mul", 3, 1160.0)])}, clock="neuron")
    assert fmt.headline(neuron) == "1.16 ms neuron · 3 dispatches · 0 findings"
    a = Annotation(2, neuron.lines[0], neuron, stale=False)
    assert label(a) == "⏱ 1.16 ms · 100% · 3 ops"  # device time: no clock word
    cpu = make_result("m.py", "f", 2, {3: ("x", 12.0, [("aten::mul", 1, 12.0)])})
    stale = Annotation(2, cpu.lines[0], cpu, stale=True, previous_us=20.0)
    assert label(stale) == "⏱ 12 µs cpu · 100% · 1 op (stale)"  # the run's details go


def test_a_stale_hint_keeps_stale_inside_the_editors_cut():
    """VS Code cuts an inlay hint past 43 characters: an edited line of a noisy run read
    "⏱ 5.96 µs cpu · 5.4% · 1 op · ⚠ noisy (stal…" there."""
    from trainium_lens.lsp.features.inlay_hints import HINT_MAX
    from trainium_lens.model.result import Finding

    noisy = Finding("noisy_measurement", "warning", "m.py", 2, "Noisy measurement")
    r = make_result("m.py", "f", 2, {3: ("y = x * x", 5.96, [("aten::mul", 1, 5.96)])}, findings=[noisy])
    r.totals.self_time_us = 110.0
    assert label(Annotation(2, r.lines[0], r, stale=False)).endswith("· ⚠ noisy")
    assert label(Annotation(2, r.lines[0], r, stale=True)) == "⏱ 5.96 µs cpu · 5.4% · 1 op (stale)"
    wide = make_result("m.py", "f", 2, {3: ("y", 5.96, [(f"aten::op{i}", 1, 0.5) for i in range(12)])})
    wide.lines[0].backward_self_time_us = 910.0
    text = label(Annotation(2, wide.lines[0], wide, stale=True))
    assert len(text) <= HINT_MAX and text.endswith("(stale)") and text.startswith("⏱ fwd"), text


def test_line_times_pair_lines_as_diff_runs_does():
    from trainium_lens.analysis.compare import diff_runs
    from trainium_lens.lsp.runs import line_times

    before = make_result(
        "m.py",
        "f",
        2,
        {
            3: ("a = x * x", 10.0, []),
            4: ("b = a + 1", 20.0, []),
            5: ("c = b * 2", 30.0, []),
            6: ("d = c * 2", 40.0, []),
            7: ("return d", 5.0, []),
        },
        run_id="r1",
    )
    after = make_result(
        "m.py",
        "f",
        2,
        {  # a line inserted, one edited, one removed
            3: ("a = x * x", 11.0, []),
            4: ("z = 0", 1.0, []),
            5: ("b = a + 1", 21.0, []),
            6: ("c = b * 3", 31.0, []),
            8: ("return d", 6.0, []),
        },
        run_id="r2",
    )
    expected = {
        (d.file, d.after_line): d.before_us
        for d in diff_runs(before, after).lines
        if d.after_line is not None and d.before_us is not None
    }
    assert expected == {("m.py", 3): 10.0, ("m.py", 5): 20.0, ("m.py", 6): 40.0, ("m.py", 8): 5.0}
    assert line_times(before, after) == expected


def test_hint_deltas_are_fwd_plus_bwd_and_file_qualified():
    """A training step: the delta is of the line's forward + backward; a helper
    file's line 3 is not the profiled file's line 3."""
    from trainium_lens.lsp.runs import line_times
    from trainium_lens.model.lines import LineStat

    before = make_result("m.py", "f", 2, {3: ("y = x @ w", 10.0, [])}, run_id="t1")
    after = make_result("m.py", "f", 2, {3: ("y = x @ w", 10.0, [])}, run_id="t2")
    before.lines[0].backward_self_time_us = 30.0
    after.lines[0].backward_self_time_us = 90.0  # the backward tripled, the forward did not move
    for res, us in ((before, 5.0), (after, 1.0)):
        res.lines.append(LineStat("helper.py", 3, us, us, us, 1.0, text="return x * 2", function="h"))
    times = line_times(before, after)
    assert times == {("m.py", 3): 40.0, ("helper.py", 3): 5.0}
    a = Annotation(2, after.lines[0], after, stale=False, previous_us=times[("m.py", 3)])
    assert label(a).endswith("▲ 150%")  # 40 -> 100 µs, where forward alone reads "= 0%"


def test_a_line_picks_the_marked_function_around_it(tmp_path):
    from trainium_lens.errors import HarnessError, UsageError
    from trainium_lens.lsp.features.profile import choose_functions, parse_request

    source = (
        "import torch\n\n# trainium: profile\ndef f():\n    return 1\n\n"
        "# trainium: profile\n@torch.no_grad()\ndef g():\n    return 2\n"
    )
    path = tmp_path / "m.py"
    path.write_text(source)

    def pick(**arg):
        return choose_functions(parse_request(({"uri": path.as_uri(), **arg},)), source)

    assert pick() == ["f", "g"]
    assert pick(line=2) == ["f"]  # 0-based: the marker line counts
    assert pick(line=4) == ["f"] and pick(line=7) == ["g"] and pick(line=9) == ["g"]
    assert pick(function="g") == ["g"]
    with pytest.raises(UsageError, match="line 6 of m.py is not inside a marked function"):
        pick(line=5)
    with pytest.raises(HarnessError, match=r"m.py:1: ") as err:
        choose_functions(parse_request(({"uri": path.as_uri()},)), "def (:\n")
    assert err.value.kind == "parse" and err.value.line == 1
    with pytest.raises(UsageError, match="0-based line number"):
        parse_request(({"uri": path.as_uri(), "line": -1},))


def test_hover_links_explorer_only_for_neuron_runs():
    from trainium_lens.lsp.features.hover import markdown
    from trainium_lens.lsp.runs import Annotations

    for clock, expected in (("neuron", True), ("cpu", False)):
        r = make_result("m.py", "f", 2, {3: ("y = x * x", 10.0, [("aten::mul", 2, 10.0)])}, clock=clock)
        a = Annotation(2, r.lines[0], r, stale=False)
        text = markdown("file:///w/m.py", a, Annotations([a], {2: a}, []))
        assert "| `aten::mul` | 2 |" in text
        assert "[Open timeline](command:trainiumLens.openTimeline?" in text
        assert ("[Open in Neuron Explorer](command:trainiumLens.openExplorer?" in text) == expected
        assert ("Neuron device time" in text) == expected


def test_diff_markdown_of_training_steps_shows_fwd_bwd_and_files():
    from trainium_lens.lsp.present.compare import diff_markdown, variants_markdown
    from trainium_lens.model.lines import LineStat

    before = make_result("m.py", "f", 2, {3: ("y = attn(q, k, v)", 696.0, [])}, run_id="d1")
    after = make_result("m.py", "f", 2, {3: ("y = attn(q, k, v)", 888.0, [])}, run_id="d2")
    before.lines[0].backward_self_time_us, after.lines[0].backward_self_time_us = 1400.0, 4400.0
    for res in (before, after):
        res.totals.backward_time_us = res.lines[0].backward_self_time_us
        res.totals.self_time_us += res.lines[0].backward_self_time_us
        res.lines.append(LineStat("lib/h_[x].py", 3, 5.0, 5.0, 5.0, 1.0, text="return x | y", function="h"))
    text = diff_markdown(before, after)
    assert "| line | source | fwd | bwd | fwd + bwd | Δ |" in text
    assert (
        "| 3 | `y = attn(q, k, v)` | 696 µs → 888 µs | 1.4 ms → 4.4 ms | 2.1 ms → 5.29 ms | ▲ 152% |" in text
    )
    assert (
        "| lib\\/h\\_\\[x\\]\\.py:3 | `return x \\| y` |" in text
    )  # a file's name escaped, the cell's pipe too
    assert "step: forward" in text and "backward 1.4 ms → 4.4 ms" in text
    table = variants_markdown([before, after])
    assert (
        table.splitlines()[0]
        == "| variant | wall median | speedup | profiled (ops + host) | dispatches | max abs diff |"
    )
    assert "speedups from the unprofiled wall medians" in table
    # the profiled column holds the headline's figure (ops + host), the walls in turn are named so
    before.totals.host_time_us, after.totals.host_time_us = 100.0, 50.0
    for res in (before, after):
        assert res.totals.wall_us_median
        res.totals.paired_wall_us_median = res.totals.wall_us_median * 1.1
    table = variants_markdown([before, after])
    assert table.splitlines()[0].startswith("| variant | wall in turn | speedup | profiled (ops + host) |")
    assert f"| {figures.time_us(before.per_call_us)} cpu |" in table


def test_a_noisy_run_says_so_in_hints_hover_and_heat_and_escapes_stored_text():
    from trainium_lens.lsp.features.hover import markdown
    from trainium_lens.lsp.present.markdown import escape
    from trainium_lens.lsp.runs import Annotations
    from trainium_lens.model.evidence import Calibration, Reconciliation
    from trainium_lens.model.result import Finding

    noisy = Finding(
        "noisy_measurement", "warning", "m.py", 2, "Noisy measurement: steps varied 40× <img src=x> [a](b)"
    )
    r = make_result("m.py", "f", 2, {3: ("y = x * x", 12.0, [("aten::mul", 1, 12.0)])}, findings=[noisy])
    r.lines[0].self_cpu_us = 18.0  # raw, before calibration
    r.calibration = Calibration(per_depth_us=0.08)
    r.reconciliation = Reconciliation("wall", 10.0, 12.0, 18.0, 1.2, 0.25, True)
    a = Annotation(2, r.lines[0], r, stale=False)
    assert label(a) == "⏱ 12 µs cpu · 100% · 1 op · ⚠ noisy"
    text = markdown("file:///w/m.py", a, Annotations([a], {2: a}, []))
    assert "self **12 µs cpu** (raw 18 µs)" in text
    assert "⚠ **Unreliable figures**: " + escape(noisy.message) in text
    assert " <img" not in text and "[a](b)" not in text  # stored text, never markup
    assert "12 µs per call = 1.2× the unprofiled wall 10 µs (within ±25%)" in text
    assert "80 ns per op event per nesting level" in text
    assert escape("a*b_c`d") == "a\\*b\\_c\\`d"
    clean = make_result("m.py", "f", 2, {3: ("y = x * x", 12.0, [("aten::mul", 1, 12.0)])})
    assert "noisy" not in label(Annotation(2, clean.lines[0], clean, stale=False))
