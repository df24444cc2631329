"""``fix`` and the optimizer trial against an independent paired timer, round by round.

    .venv/bin/python bench/fix_bench.py --rounds 5 [--seconds 3] [--only rmsnorm|sgd]

**RMSNorm** (the bundled example's ``rms_norm_naive``, examples/rmsnorm.py): each round
copies the file into a fresh workspace, profiles it, runs ``trainium-lens fix --apply
--json`` and, right after, this file's own timer in a fresh process (the same process
shape as the harness's: one Python process, the two versions imported side by side):
the op-by-op function and its ``F.rms_norm`` rewrite (written out here, not taken from
the tool) called alternately — A B, B A, … — one call each per pair, ``time.perf_counter``
only, for ``--seconds``; the figure is the median of the per-pair ratios (before / after).
A round **agrees** when ``fix`` said "not measurable", or its ratio is within ±15 % of
the timer's — or, where ``fix`` gave the size as a range (its interval wider than ±15 %:
"its size not measurable to ±15 % on this host now"), the timer's ratio is inside that
range; it is **wrongly applied** when ``fix`` wrote the edit and the timer reads it
under 1.05× faster.

**SGD** (an 8-layer 256-wide MLP, ``SGD(momentum=0.9)`` without ``foreach=``): profiled,
the optimizer finding's paired ratio for the implementation it names (or each trial's,
when it names none) against the timer: two copies of the model and optimizer, one per
implementation, their ``step()`` called alternately on the same gradients.

Prints one table per part, with the load average before and after each round.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "trainium_lens"]
AGREE = 0.15
MIN_PAIRS = 200

SGD_FILE = '''"""An MLP trained with a plain SGD: the optimizer trial's subject (bench/fix_bench.py)."""
import torch
from torch import nn


def make_training():
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(8)])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    return model, opt, torch.randn(32, 256)


# trainium: profile inputs=make_training
def train_step(model, opt, x):
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.detach()
'''


# -- the independent timer (run in a fresh process: --timer) ---------------------------


def _pairs(a, b, seconds: float) -> dict:
    """``a`` and ``b`` called alternately (the order swapped each pair) for ``seconds``
    (and at least ``MIN_PAIRS`` pairs, up to 4 × ``seconds``), after a warm-up of at most
    20 pairs or 1 s (on a host at load 14 one optimizer step took up to 160 ms)."""
    perf = time.perf_counter
    warm = perf() + 1.0
    for _ in range(20):
        a()
        b()
        if perf() > warm:
            break
    ta: list[float] = []
    tb: list[float] = []
    start = perf()
    k = 0
    while (perf() - start < seconds or k < MIN_PAIRS) and perf() - start < 4 * seconds:
        for fn, out in ((a, ta), (b, tb)) if k % 2 == 0 else ((b, tb), (a, ta)):
            t0 = perf()
            fn()
            out.append(perf() - t0)
        k += 1
    ratios = sorted(x / y for x, y in zip(ta, tb, strict=True))
    n = len(ratios)
    return {
        "pairs": n,
        "ratio": statistics.median(ratios),
        "q1": ratios[n // 4],
        "q3": ratios[(3 * n) // 4],
        "ratio_of_medians": statistics.median(ta) / statistics.median(tb),
        "before_us": statistics.median(ta) * 1e6,
        "after_us": statistics.median(tb) * 1e6,
    }


def timer_rmsnorm(seconds: float) -> dict:
    import torch

    torch.manual_seed(0)
    x = torch.randn(4, 512, dtype=torch.bfloat16)
    weight = torch.randn(512, dtype=torch.bfloat16)
    eps = 1e-6

    def before():  # examples/rmsnorm.py's rms_norm_naive, as written there
        x2 = x * x
        mean = x2.mean(-1, keepdim=True)
        rstd = torch.rsqrt(mean + eps)
        return x * rstd * weight

    def after():
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)

    return _pairs(before, after, seconds)


def timer_sgd(seconds: float, config: str) -> dict:
    import torch
    from torch import nn

    def build(flags: dict):
        torch.manual_seed(0)
        model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(8)])
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, **flags)
        torch.manual_seed(1)
        model(torch.randn(32, 256)).square().mean().backward()
        opt.step()  # the momentum buffers exist, as after the profiled steps
        return opt

    key, _, value = config.partition("=")
    now, other = build({"foreach": False}), build({key: value == "True"})
    return _pairs(now.step, other.step, seconds)


# -- the rounds ------------------------------------------------------------------------


def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "server")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def timer(kind: str, seconds: float, *extra: str) -> dict:
    proc = run([sys.executable, __file__, "--timer", kind, "--seconds", str(seconds), *extra], ROOT)
    if proc.returncode:
        raise SystemExit(f"the timer failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def rmsnorm_round(seconds: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="fixbench-") as tmp:
        ws = Path(tmp)
        src = ws / "rmsnorm.py"
        shutil.copy(ROOT / "examples" / "rmsnorm.py", src)
        original = src.read_text()
        load0 = load()
        proc = run([*CLI, "profile", str(src), "rms_norm_naive", "--workspace", str(ws)], ws)
        if proc.returncode:
            raise SystemExit(f"profile failed:\n{proc.stderr}")
        out = ws / "fix.json"
        t0 = time.monotonic()
        proc = run(
            [*CLI, "fix", str(src), "rms_norm_naive", "--apply", "--json", str(out), "--workspace", str(ws)],
            ws,
        )
        fix_s = time.monotonic() - t0
        if proc.returncode not in (0, 1):
            raise SystemExit(f"fix failed ({proc.returncode}):\n{proc.stderr}")
        (row,) = json.loads(out.read_text())
        written = src.read_text() != original
        indep = timer("rmsnorm", seconds)
        return {
            "fix": row,
            "exit": proc.returncode,
            "written": written,
            "fix_s": fix_s,
            "timer": indep,
            "load": f"{load0}→{load()}",
        }


def sgd_round(seconds: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="fixbench-") as tmp:
        ws = Path(tmp)
        src = ws / "sgd_step.py"
        src.write_text(SGD_FILE)
        load0 = load()
        out = ws / "result.json"
        proc = run([*CLI, "profile", str(src), "train_step", "--workspace", str(ws), "--json", str(out)], ws)
        if proc.returncode:
            raise SystemExit(f"profile failed:\n{proc.stderr}")
        result = json.loads(out.read_text())
        (opt,) = [o for o in result["optimizers"] if o["name"].startswith("Optimizer.step#")]
        finding = next((f for f in result["findings"] if f["kind"].startswith("optimizer")), None)
        trials = [t for t in opt["trials"] if not t.get("current") and t.get("paired_ratio")]
        rows = []
        for t in trials:
            indep = timer("sgd", seconds, "--config", t["config"])
            rows.append({"trial": t, "timer": indep})
        named = finding["fix"] if finding else None
        return {"rows": rows, "named": named, "load": f"{load0}→{load()}"}


def _yes(value: bool) -> str:
    return "yes" if value else "NO"


def _agree(tool: float | None, indep: float) -> str:
    if tool is None:
        return "n/a"
    return f"{tool / indep:.3f}"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=3.0, help="the independent timer's pairs, per round")
    p.add_argument("--only", choices=("rmsnorm", "sgd"))
    p.add_argument("--timer", choices=("rmsnorm", "sgd"), help=argparse.SUPPRESS)
    p.add_argument("--config", default="foreach=True", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.timer:
        data = (
            timer_rmsnorm(args.seconds) if args.timer == "rmsnorm" else timer_sgd(args.seconds, args.config)
        )
        print(json.dumps(data))
        return
    print(f"{os.cpu_count()} CPUs; load average at start {os.getloadavg()}")
    bad = 0
    if args.only in (None, "rmsnorm"):
        print(
            "\nRMSNorm edit (examples/rmsnorm.py rms_norm_naive → F.rms_norm), fix --apply vs a paired timer"
        )
        print(
            "| round | load | fix verdict | fix ratio (99% interval, pairs, s) | exit | written "
            "| timer ratio (IQR, pairs) | fix / timer | agrees | timer in interval |"
        )
        print("| ---: | --- | --- | --- | ---: | --- | --- | ---: | --- | --- |")
        for r in range(1, args.rounds + 1):
            got = rmsnorm_round(args.seconds)
            f, t = got["fix"], got["timer"]
            ratio = f.get("speedup")
            measurable = f.get("verdict") not in (None, "not measurable")
            low, high = f.get("speedup_low"), f.get("speedup_high")
            inside = low is not None and high is not None and low <= t["ratio"] <= high
            within = ratio is not None and abs(ratio / t["ratio"] - 1) <= AGREE
            agrees = (not measurable) or within or (not f.get("precise") and inside)
            wrongly = got["written"] and t["ratio"] < 1.05
            bad += (not agrees) + wrongly
            ci = (
                f"{ratio:.3f}× ({f['speedup_low']:.3f}–{f['speedup_high']:.3f}, {f['pairs']}, "
                f"{f['paired_s']:.1f} s)"
                if ratio and f.get("speedup_low")
                else str(ratio)
            )
            print(
                f"| {r} | {got['load']} | {f.get('verdict')} | {ci} | {got['exit']} | "
                f"{'yes' if got['written'] else 'no'}{' (WRONG)' if wrongly else ''} | "
                f"{t['ratio']:.3f}× ({t['q1']:.2f}–{t['q3']:.2f}, {t['pairs']}) | "
                f"{_agree(ratio, t['ratio'])} | {_yes(agrees)} | {'yes' if inside else 'no'} |",
                flush=True,
            )
    if args.only in (None, "sgd"):
        print("\nSGD(momentum=0.9) step, 8×Linear(256, 256): the optimizer trial vs a paired timer")
        print(
            "| round | load | trial (vs foreach=False, now) | tool ratio (99% interval) | verdict "
            "| timer ratio (IQR, pairs) | tool / timer | agrees | timer in interval | finding names |"
        )
        print("| ---: | --- | --- | --- | --- | --- | ---: | --- | --- | --- |")
        for r in range(1, args.rounds + 1):
            got = sgd_round(args.seconds)
            for row in got["rows"]:
                tr, t = row["trial"], row["timer"]
                ratio = tr["paired_ratio"]
                measurable = tr.get("paired_verdict") != "undecided"
                low, high = tr.get("paired_low"), tr.get("paired_high")
                inside = low is not None and high is not None and low <= t["ratio"] <= high
                precise = (
                    low is not None and high is not None and high <= ratio * 1.15 and low * 1.15 >= ratio
                )
                within = abs(ratio / t["ratio"] - 1) <= AGREE
                agrees = (not measurable) or within or (not precise and inside)
                bad += not agrees
                ci = f"{low:.2f}–{high:.2f}" if low and high and math.isfinite(low) else "none"
                print(
                    f"| {r} | {got['load']} | {tr['config']} | {ratio:.3f}× ({ci}) | {tr['paired_verdict']} "
                    "| "
                    f"{t['ratio']:.3f}× ({t['q1']:.2f}–{t['q3']:.2f}, {t['pairs']}) | "
                    f"{_agree(ratio, t['ratio'])} | {_yes(agrees)} | {'yes' if inside else 'no'} | "
                    f"{got['named']} |",
                    flush=True,
                )
    print(f"\nload average at end {os.getloadavg()}; rounds that disagree or were wrongly applied: {bad}")


if __name__ == "__main__":
    main()
