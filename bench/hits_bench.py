"""Cost of counting line hits (harness/eager/hits.py) in the line labeler.

The GPT-style model of tests/data/project (2 layers, 64 wide: small ops, so the
labeler's per-call work weighs the most it can), its forward called with the
line labels on, hit counting on vs. a no-op ``note`` (the labeler without
hits), and plain (no labels). Rounds alternate A/B/C; ratios of medians.

    .venv/bin/python bench/hits_bench.py [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

import torch  # noqa: E402

from trainium_lens.harness.eager.hits import HitCounter  # noqa: E402
from trainium_lens.harness.eager.lines import LineLabeler  # noqa: E402
from trainium_lens.harness.eager.run import invoke  # noqa: E402
from trainium_lens.harness.job.loader import UserCode, load_module  # noqa: E402


def main(rounds: int = 30) -> None:
    torch.set_num_threads(1)
    workspace = ROOT / "tests" / "data" / "project"
    path = workspace / "src" / "tinygpt" / "bench.py"
    module = load_module(str(path), str(workspace), "src/tinygpt/bench.py")
    kwargs = module.forward_inputs()
    user = UserCode(str(workspace))
    labeler = LineLabeler(user, invoke.__code__)
    real_note = HitCounter.note

    def labelled() -> float:
        t0 = time.perf_counter()
        with labeler:
            invoke(module.forward, (), kwargs)
        return time.perf_counter() - t0

    def plain() -> float:
        t0 = time.perf_counter()
        invoke(module.forward, (), kwargs)
        return time.perf_counter() - t0

    for _ in range(5):
        labelled(), plain()
    with_hits, without, bare = [], [], []
    for _ in range(rounds):
        HitCounter.note = real_note  # type: ignore[method-assign]
        with_hits.append(labelled())
        HitCounter.note = lambda self, name, frame, child: None  # type: ignore[method-assign]
        without.append(labelled())
        HitCounter.note = real_note  # type: ignore[method-assign]
        bare.append(plain())
    med = statistics.median
    print(f"rounds {rounds}; forward of the 2-layer GPT, median ms per call")
    print(f"  plain (no labels)           {med(bare) * 1e3:8.2f}")
    print(f"  labels, no hit counting     {med(without) * 1e3:8.2f}   {med(without) / med(bare):.2f}x plain")
    print(
        f"  labels + hit counting       {med(with_hits) * 1e3:8.2f}   {med(with_hits) / med(bare):.2f}x plain"
    )
    pairs = [a / b for a, b in zip(with_hits, without, strict=True)]
    print(
        f"  hits / no hits, pair by pair: median {med(pairs):.3f}x "
        f"(min {min(pairs):.3f}, max {max(pairs):.3f})"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
