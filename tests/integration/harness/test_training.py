"""Training steps with the real torch.profiler on CPU: backward time lands on the
forward lines that caused it, whichever thread ran it; checkpoint recomputation,
no_grad, the optimizer, the exported trace, schema 2 and the schema-1 reader."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch

from tests.conftest import DATA, ROOT
from tests.integration.cli.test_cli import cli
from tests.support.harness import line_of, run_harness
from trainium_lens.analysis.findings.analyze import analyze
from trainium_lens.harness.attribution.kinds import OP, classify
from trainium_lens.harness.attribution.tree import attribute
from trainium_lens.harness.eager.lines import LineLabeler
from trainium_lens.harness.job.loader import UserCode, load_module
from trainium_lens.harness.runtime import call
from trainium_lens.model.result import Batch

EXAMPLE = ROOT / "examples" / "train_step.py"
TRAINING = DATA / "training.py"
CPU = torch.autograd.DeviceType.CPU


def _batch(file: str, tmp_path_factory, name: str) -> dict:
    run_dir = tmp_path_factory.mktemp(name) / "run"
    code, events, stderr = run_harness(ROOT, file, run_dir, env={"OMP_NUM_THREADS": "1"})
    assert code == 0, stderr[-3000:] + json.dumps(events[-2:])
    parsed = Batch.from_dict(json.loads((run_dir / "batch.json").read_text()))
    return {r.function.name: r for r in parsed.results}


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    return _batch("examples/train_step.py", tmp_path_factory, "train_step")


@pytest.fixture(scope="module")
def training(tmp_path_factory):
    return _batch("tests/data/training.py", tmp_path_factory, "training")


def _line(result, path: Path, needle: str, after: int = 0):
    number = line_of(path, needle) if not after else _line_after(path, needle, after)
    stat = result.line(str(path.relative_to(ROOT)), number)
    assert stat is not None, (needle, number)
    return stat


def _line_after(path: Path, needle: str, after: int) -> int:
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if number > after and needle in text:
            return number
    raise AssertionError(needle)


def _reconciles(result) -> None:
    t = result.totals
    lines = sum(s.self_time_us + s.backward_self_time_us + s.recompute_time_us for s in result.lines)
    assert lines + result.unattributed_us == pytest.approx(t.self_time_us, rel=0.01)
    split = t.forward_time_us + t.backward_time_us + t.optimizer_time_us + t.recompute_time_us
    assert split == pytest.approx(t.self_time_us, rel=0.01)


def test_example_linear_and_norm_lines_carry_their_backward(example):
    for name in ("train_step_naive", "train_step_fused"):
        r = example[name]
        start = r.function.line
        assert r.schema_version == 3 and r.totals.backward_time_us > 0
        for needle in ("model.qkv(h)", "model.proj(", "model.out(F.gelu", "model.head(x)"):
            s = _line(r, EXAMPLE, needle, after=start)
            assert s.backward_self_time_us > 0, (name, needle)
            assert s.self_time_us > 0
            mm = [o for o in s.backward_ops if o.name == "aten::mm"]
            assert mm and {o.node for o in mm} == {"AddmmBackward0"}, (name, needle)
        norms = (
            ["return x * rstd * weight"]
            if name == "train_step_naive"
            else ["model.norm1, 1e-6", "model.norm2, 1e-6"]
        )
        for needle in norms:  # the norm weight's gradient
            assert _line(r, EXAMPLE, needle, after=0 if "rstd" in needle else start).backward_self_time_us > 0
        backward_line = _line(r, EXAMPLE, "loss.backward()", after=start)
        assert {o.node for o in backward_line.backward_ops} <= {"torch::autograd::AccumulateGrad"}
        _reconciles(r)


@pytest.mark.serial  # a timing-based finding: withheld when a loaded machine makes the run noisy
def test_example_optimizer_sits_on_its_line_and_the_loop_gets_a_finding(example):
    naive, fused = example["train_step_naive"], example["train_step_fused"]
    for r in (naive, fused):
        step = _line(r, EXAMPLE, "optimizer.step()", after=r.function.line)
        assert r.totals.optimizer_time_us > 0
        assert step.self_time_us >= 0.99 * r.totals.optimizer_time_us
        (opt,) = [o for o in r.optimizers if o.name == "Optimizer.step#AdamW.step"]
        assert (opt.file, opt.line) == (step.file, step.line)
    loop = [o for o in naive.optimizers if o.name.startswith("Optimizer.step#")][0]
    fused_opt = [o for o in fused.optimizers if o.name.startswith("Optimizer.step#")][0]
    assert loop.fused_ops == 0 and fused_opt.fused_ops > 0
    found = [f for f in analyze(naive) if f.kind == "optimizer_loop"]
    assert len(found) == 1 and found[0].line == loop.line
    assert f"{loop.ops:g} ops per step" in found[0].message and "foreach=True" in found[0].message
    assert not [f for f in analyze(naive) if f.kind == "dispatches" and f.line == loop.line]
    assert not [f for f in analyze(fused) if f.kind == "optimizer_loop"]
    # the foreach step dispatches a few _foreach_ ops: no generic "fuse these" hint either
    assert not [f for f in analyze(fused) if f.kind == "dispatches" and f.line == fused_opt.line]


def test_helper_backward_self_on_the_helper_total_on_its_callers(training):
    r = training["step_main"]
    helper = _line(r, TRAINING, "return torch.tanh(lin(x))")
    callers = [
        _line(r, TRAINING, n) for n in ('layer(x, model["a"])', 'layer(h, model["b"])', "h = layer(h, lin)")
    ]
    assert helper.backward_self_time_us > 0
    assert all(c.backward_self_time_us == 0 and c.backward_total_time_us > 0 for c in callers)
    # the helper's backward, all of it, through the three calling lines (the loop's per call)
    assert sum(c.backward_total_time_us for c in callers) == pytest.approx(
        helper.backward_self_time_us, rel=0.01
    )
    addmm = {o.node: o.calls for o in helper.backward_ops if o.name == "aten::mm"}
    assert addmm == {"AddmmBackward0": 9}  # 5 layers, 2 mm each, but the input needs no grad
    head = _line(r, TRAINING, 'return model["head"](h)')
    outer = _line(
        r,
        TRAINING,
        "loss = forward(model, x)",
    )
    assert outer.backward_total_time_us == pytest.approx(
        helper.backward_self_time_us + head.backward_self_time_us, rel=0.01
    )
    _reconciles(r)


def test_backward_on_another_thread_lands_on_the_same_lines(training):
    main, threaded = training["step_main"], training["step_thread"]
    assert threaded.totals.backward_time_us > 0
    for needle in ("return torch.tanh(lin(x))", 'return model["head"](h)'):
        a, b = _line(main, TRAINING, needle), _line(threaded, TRAINING, needle)
        assert b.backward_self_time_us > 0
        ops_a = {(o.name, o.node, o.calls) for o in a.backward_ops}
        ops_b = {(o.name, o.node, o.calls) for o in b.backward_ops}
        assert ops_a == ops_b, needle
        # within the run-to-run spread (the first op on a fresh thread pays for it)
        lo = min(a.backward_self_time_us_min, b.backward_self_time_us_min)
        assert lo > 0 and b.backward_self_time_us_min <= 5 * a.backward_self_time_us_max
    # no caller line on that thread: AccumulateGrad (gradient accumulation) is unattributed
    assert threaded.unattributed_us > 0
    _reconciles(threaded)


def test_no_op_event_of_any_thread_is_dropped():
    module = load_module(str(TRAINING), str(DATA), "training.py")
    labeler = LineLabeler(UserCode(str(DATA)), call.invoke.__code__)
    args = module.make_training()
    config = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=0, warmup=1, active=4, repeat=1),
        experimental_config=config,
    ) as prof:
        for step in range(5):
            if step and not step % 2:  # warmup, then labelled, plain, labelled, plain
                call.invoke(module.step_thread, args, {})
            else:
                with labeler:
                    call.invoke(module.step_thread, args, {})
            prof.step()
    events = prof.events()
    ops = [e for e in events if classify(e.name, labeler.labels) == OP]
    threads = {e.thread for e in ops}
    assert len(threads) >= 3  # the main thread and one backward thread per step
    att = attribute(events, labeler.labels, False, None, CPU, paired=True, record_events=True)
    assert att.paired_steps == 2 and att.threads == 3  # main + a new thread per labelled step
    assert {e.id for e in ops} <= set(att.event_lines)  # every op event, twins included
    linked = [k for k, phase in att.event_lines.values() if phase == 1 and k is not None]
    assert linked and att.backward_nodes > att.unlinked_nodes > 0


def test_checkpoint_recomputation_is_recompute_not_forward_again(training):
    r = training["step_checkpoint"]
    assert r.totals.recompute_time_us > 0
    for needle in ('h = torch.tanh(model["a"](h))', 'return torch.tanh(model["b"](h))'):
        s = _line(r, TRAINING, needle)
        assert s.recompute_time_us > 0 and s.backward_self_time_us > 0
        assert "aten::addmm" in {o.name for o in s.recompute_ops}
        assert s.calls == 2  # linear, tanh: the forward once, not again for the recompute
    _reconciles(r)


def test_no_grad_has_no_backward(training):
    from trainium_lens.cli.render.result import render_result
    from trainium_lens.cli.render.text import Style

    r = training["step_no_grad"]
    assert not r.totals.has_backward
    assert all(not s.backward_self_time_us and not s.backward_ops for s in r.lines)
    text = render_result(r, Style())
    assert "bwd" not in text and "fwd" not in text


def test_the_exported_trace_tags_every_op_and_backward_with_its_forward_line(example):
    from trainium_lens.traces.chrome import load_trace

    r = example["train_step_naive"]
    trace = load_trace(r.artifacts.trace)
    ops = [e for e in trace.events if trace.lanes[e.lane].kind == "ops" and e.name.startswith("aten::")]
    assert ops and all(e.line is not None for e in ops)
    backward = [e for e in ops if e.phase == "backward"]
    qkv = (r.function.file, _line_after(EXAMPLE, "model.qkv(h)", r.function.line))
    mm = [e for e in backward if e.name == "aten::mm" and e.line == qkv]
    # grad input + grad weight, labelled + plain twin, every measured step (used or not)
    assert len(mm) == 2 * 2 * r.stability.steps_measured * r.totals.calls_per_step


def test_hint_shows_forward_and_backward(example):
    from trainium_lens.lsp.features.inlay_hints import hint_time
    from trainium_lens.lsp.runs import Annotation

    r = example["train_step_fused"]
    s = _line(r, EXAMPLE, "model.qkv(h)", after=r.function.line)
    text = hint_time(Annotation(line=s.line - 1, stat=s, result=r, stale=False))
    assert text.startswith("fwd ") and " · bwd " in text and text.endswith(" cpu")


def test_a_schema_1_result_still_opens(tmp_path):
    from trainium_lens.cli.render.result import render_result
    from trainium_lens.cli.render.text import Style
    from trainium_lens.model import result as R

    stored = R.load(DATA / "schema1_result.json")
    assert stored.schema_version == 1 and not stored.totals.has_backward
    assert stored.lines and all(s.backward_self_time_us == 0 for s in stored.lines)
    assert [(c.file, c.line, c.calls) for c in stored.signals.h2d_copies] == [
        ("examples/rmsnorm.py", 22, 1.0)
    ]
    text = render_result(stored, Style())
    assert "rms_norm_naive" in text and "bwd" not in text
    # and in the editor: hints read as before (no fwd/bwd split)
    from trainium_lens.lsp.features.inlay_hints import label
    from trainium_lens.lsp.runs import Annotation

    hot = max(stored.lines, key=lambda s: s.self_time_us)
    hint = label(Annotation(line=hot.line - 1, stat=hot, result=stored, stale=False))
    assert hint.startswith("⏱ ") and " cpu · " in hint and "fwd" not in hint and "bwd" not in hint
    shown = cli("show", str(DATA / "schema1_result.json"), "--workspace", str(tmp_path))
    assert shown.returncode == 0, shown.stderr
    assert "rms_norm_naive" in shown.stdout and "bwd" not in shown.stdout
    copy = R.save(stored, tmp_path / "again.json")
    assert R.load(copy) == stored


def test_threaded_backward_needs_profile_all_threads():
    """Why the harness asks for ``profile_all_threads``: without it torch records
    nothing of a backward run on a thread of the user's (measured, torch 2.13)."""
    module = load_module(str(TRAINING), str(DATA), "training.py")
    args = module.make_training()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        call.invoke(module.step_thread, args, {})
    names = {e.name for e in prof.events()}
    assert not any(n.startswith("autograd::engine::evaluate_function") for n in names)
    assert threading.current_thread() is threading.main_thread()


def test_the_harness_writes_the_schema_the_reader_reads():
    from trainium_lens.harness.attribution import build
    from trainium_lens.model import result as R

    assert build.SCHEMA_VERSION == R.SCHEMA_VERSION == 3


def test_hover_lists_backward_ops_apart_from_forward_ops(example):
    from trainium_lens.lsp.features.hover import markdown
    from trainium_lens.lsp.runs import Annotation, Annotations

    r = example["train_step_naive"]
    s = _line(r, EXAMPLE, "model.qkv(h)", after=r.function.line)
    a = Annotation(line=s.line - 1, stat=s, result=r, stale=False)
    text = markdown("file:///w/examples/train_step.py", a, Annotations([a], {a.line: a}, []))
    forward, _, backward = text.partition("**backward ops")
    assert "**forward ops**" in forward and "`aten::addmm`" in forward
    assert "`aten::mm`" in backward and "AddmmBackward0" in backward
    assert "`aten::mm`" not in forward.split("**forward ops**")[1]
    assert "backward self **" in text and "fwd + bwd" in text
