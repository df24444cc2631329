"""Advice checked against measurement, side by side (bench/README.md, "Advice checked").

1. **tanh GELU**: a tiny random GPT-2 (transformers, 2 layers, 128 wide,
   batch 4 × 128 tokens) with ``activation_function="gelu_new"`` (transformers'
   ``NewGELUActivation``: the tanh GELU op by op, what the finding flags) and
   with ``"gelu_pytorch_tanh"`` (``F.gelu(approximate="tanh")``, the fix it
   names); a training step each (forward, backward, no optimizer), and the
   activation alone on the MLP's hidden tensor (forward + backward).
2. **optimizer step**: AdamW over the parameters of the same GPT-2 and of a
   nanoGPT-sized stack of Linears, per-parameter loop / ``foreach=True`` /
   ``fused=True``, three independent optimizers stepped in turn (A B C A B C);
   then the harness's own measurement (``harness/eager/optim_trials.measure``)
   on the loop optimizer, and whether both pick the same fastest.
3. **origins**: the labeller's cost of noting where each torch call came from
   (``harness/eager/origin.py``), on the forward of tests/data/project's GPT
   with line labels: real ``Origins.note`` against a no-op, pair by pair.

Rounds alternate; figures are medians (and best) of the rounds, ratios pair by pair.

    .venv/bin/python bench/advice_bench.py [ROUNDS] [THREADS] [gelu,optimizers,origins]

THREADS (default: torch's) sets ``torch.set_num_threads``: on a shared, busy
machine one thread keeps intra-op barriers from waiting on a descheduled peer.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from trainium_lens.harness.eager import optim_trials  # noqa: E402
from trainium_lens.harness.eager.lines import LineLabeler  # noqa: E402
from trainium_lens.harness.eager.origin import Origins  # noqa: E402
from trainium_lens.harness.eager.run import invoke  # noqa: E402
from trainium_lens.harness.job.loader import UserCode, load_module  # noqa: E402


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def alternate(named: dict, rounds: int) -> dict[str, list[float]]:
    for fn in named.values():  # warm-up
        fn()
    out: dict[str, list[float]] = {k: [] for k in named}
    for _ in range(rounds):
        for k, fn in named.items():
            out[k].append(timed(fn))
    return out


def report(title: str, times: dict[str, list[float]], base: str) -> None:
    print(f"\n{title}")
    for k, v in times.items():
        line = f"  {k:<22} median {statistics.median(v):8.3f} ms  best {min(v):8.3f} ms"
        if k != base:
            pairs = [a / b for a, b in zip(v, times[base], strict=True)]
            line += f"  {k}/{base} pair by pair {statistics.median(pairs):.3g}×"
        print(line)


def gpt2(activation: str):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=2, n_head=4, n_embd=128, vocab_size=1000, n_positions=256, activation_function=activation
    )
    return GPT2LMHeadModel(config).train()


def gelu(rounds: int) -> None:
    ids = torch.randint(0, 1000, (4, 128))
    models = {a: gpt2(a) for a in ("gelu_new", "gelu_pytorch_tanh")}

    def step(model):
        def run():
            model.zero_grad(set_to_none=True)
            model(ids, labels=ids).loss.backward()

        return run

    report(
        "GPT-2 training step (fwd+bwd), tanh GELU op by op vs F.gelu(approximate='tanh')",
        alternate({a: step(m) for a, m in models.items()}, rounds),
        "gelu_new",
    )
    from transformers.activations import NewGELUActivation

    h = torch.randn(4, 128, 512, requires_grad=True)
    act = NewGELUActivation()

    def line(fn):
        def run():
            fn(h).sum().backward()

        return run

    report(
        "the activation line alone (4×128×512, fwd+bwd)",
        alternate(
            {"NewGELUActivation": line(act), "F.gelu(tanh)": line(lambda x: F.gelu(x, approximate="tanh"))},
            rounds,
        ),
        "NewGELUActivation",
    )


def adamw_sets():
    model = gpt2("gelu_new")
    yield "GPT-2 tiny (AdamW)", list(model.parameters())
    torch.manual_seed(0)
    layers = [torch.nn.Linear(128, 512) for _ in range(16)] + [torch.nn.Linear(512, 128) for _ in range(16)]
    yield "32 Linears, 4.2M params (AdamW)", [p for m in layers for p in m.parameters()]


def optimizers(rounds: int) -> None:
    for title, params in adamw_sets():
        opts = {}
        for label, flags in optim_trials.CONFIGS:
            copies = [p.detach().clone().requires_grad_() for p in params]
            for q in copies:
                q.grad = torch.randn_like(q) * 1e-3
            opts[label] = torch.optim.AdamW(copies, lr=1e-4, **flags)
            opts[label].step()
        times = alternate({k: o.step for k, o in opts.items()}, rounds)
        report(f"{title}: step, independent optimizers", times, "foreach=False")
        bench_fastest = min(times, key=lambda k: min(times[k]))
        watch = optim_trials.OptimizerWatch(UserCode(str(ROOT)))
        loop = opts["foreach=False"]
        watch.seen = {id(loop): optim_trials.Seen(loop, "bench", 0)}
        (m,) = optim_trials.measure(watch, lambda: None)
        trials = {t["config"]: t for t in m["trials"]}
        harness_fastest = min(trials, key=lambda k: trials[k]["time_us_min"])
        print(
            "  harness trials (best, median): "
            + ", ".join(
                f"{k} {t['time_us_min'] / 1e3:.3f}/{t['time_us'] / 1e3:.3f} ms" for k, t in trials.items()
            )
        )
        print(f"  fastest: bench {bench_fastest}, harness {harness_fastest}")


def origins(rounds: int) -> None:
    workspace = ROOT / "tests" / "data" / "project"
    path = workspace / "src" / "tinygpt" / "bench.py"
    module = load_module(str(path), str(workspace), "src/tinygpt/bench.py")
    kwargs = module.forward_inputs()
    labeler = LineLabeler(UserCode(str(workspace)), invoke.__code__)
    real = Origins.note

    def labelled():
        with labeler:
            invoke(module.forward, (), kwargs)

    def without():
        Origins.note = lambda self, name, module: None  # type: ignore[method-assign]
        try:
            labelled()
        finally:
            Origins.note = real  # type: ignore[method-assign]

    report(
        "labelled forward of tests/data/project's GPT: origins noted vs a no-op note",
        alternate({"without origins": without, "with origins": labelled}, rounds),
        "without origins",
    )


def main(rounds: int = 30, threads: int | None = None, sections: str = "gelu,optimizers,origins") -> None:
    if threads:
        torch.set_num_threads(threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {rounds} rounds")
    for name in sections.split(","):
        {"gelu": gelu, "optimizers": optimizers, "origins": origins}[name](rounds)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(int(args[0]) if args else 30, int(args[1]) if len(args) > 1 and args[1] != "0" else None, *args[2:3])
