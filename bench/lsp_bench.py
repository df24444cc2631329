"""Language server: inlay hints and hover on a big annotated file.

A 5,000-line file whose marked function has 2,000 annotated lines (a stored
synthetic result with 2,000 LineStats of 3 ops each, plus a previous run so
every hint carries a delta). Measured two ways, side by side:

* through real LSP requests to the server subprocess (pytest-lsp client over
  stdio): p50/p99 latency of inlay hints (full file and a 60-line viewport),
  hover, and inlay hints right after an edit (the cache invalidated), against
  the same requests on a file with no runs (the transport's floor: baseline);
* in-process: the handlers alone (``inlay_hints.hints``, ``hover.hover``) on a
  server object, and the memory the run state takes (tracemalloc), plus the
  server process's RSS before and after.

Run: ``.venv/bin/python bench/lsp_bench.py`` (about a minute). Goal: p99 <= 10 ms.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lsprotocol import types  # noqa: E402

from tests.support.lsp_client import change, open_doc, start, stop  # noqa: E402
from trainium_lens.model.lines import LineOp, LineStat  # noqa: E402
from trainium_lens.model.result import (  # noqa: E402
    Finding,
    FunctionRef,
    LineWindows,
    Result,
    Totals,
    Window,
)
from trainium_lens.model.store import RunStore  # noqa: E402

N_LINES, N_ANNOTATED, ROUNDS = 5000, 2000, 200
FIRST = 1000  # 1-based line of the def


def source() -> str:
    lines = [f"# filler line {i}" for i in range(1, FIRST - 1)]
    lines += ["# trainium: profile", "def big():", "    x0 = torch.ones(8)"]
    lines += [f"    x{i} = x{i - 1} * 2 + {i}" for i in range(1, N_ANNOTATED)]
    lines += ["    return x0"]
    lines += [f"# tail line {i}" for i in range(len(lines) + 1, N_LINES + 1)]
    return "\n".join(lines) + "\n"


def result(run_id: str, created: str, scale: float) -> Result:
    text = source().splitlines()
    stats = []
    for k in range(N_ANNOTATED):
        line = FIRST + 1 + k
        t = scale * (1.0 + (k % 97))
        stats.append(
            LineStat(
                file="big.py",
                line=line,
                self_time_us=t,
                total_time_us=t,
                self_cpu_us=t,
                calls=3.0,
                self_time_us_min=t * 0.9,
                self_time_us_max=t * 1.1,
                self_time_us_median=t,
                text=text[line - 1],
                function="big",
                ops=[
                    LineOp("aten::mul", 1, t * 0.5, t * 0.5),
                    LineOp("aten::add", 1, t * 0.3, t * 0.3),
                    LineOp("aten::ones", 1, t * 0.2, t * 0.2),
                ],
            )
        )
    total = sum(s.self_time_us for s in stats)
    return Result(
        run_id=run_id,
        created_at=created,
        backend="cpu",
        clock="cpu",
        host="local",
        function=FunctionRef(file="big.py", name="big", line=FIRST, marker_line=FIRST - 1),
        totals=Totals(
            self_time_us=total, self_cpu_us=total, wall_us_median=total, steps=5, dispatches=3.0 * N_ANNOTATED
        ),
        lines=sorted(stats, key=lambda s: -s.self_time_us),
        findings=[
            Finding("dispatches", "hint", "big.py", s.line, "3 dispatches on this line") for s in stats[::40]
        ],
        timeline=[LineWindows("big.py", s.line, [Window(s.line * 10.0, 5.0)]) for s in stats],
    )


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] * 1000


def row(name: str, samples: list[float], base: list[float] | None = None) -> str:
    p50, p99 = pct(samples, 0.5), pct(samples, 0.99)
    ratio = f"{p50 / pct(base, 0.5):.1f}x" if base else "1.0x"
    return f"| {name} | {p50:.2f} | {p99:.2f} | {ratio} |"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def hint_params(uri: str, first: int, last: int) -> types.InlayHintParams:
    return types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(
            start=types.Position(line=first, character=0), end=types.Position(line=last, character=0)
        ),
    )


def hover_params(uri: str, line: int) -> types.HoverParams:
    return types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=4)
    )


def cpu_ms(pid: int) -> float:
    """CPU time the process used so far (user + system), in ms."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


async def over_lsp(ws: Path) -> list[str]:
    client = await start(ws)
    pid = client._server.pid
    rss0 = rss_kib(pid)
    uri = open_doc(client, ws / "big.py")
    empty = open_doc(client, ws / "empty.py")
    t = time.perf_counter()
    first = await client.text_document_inlay_hint_async(hint_params(uri, 0, N_LINES))
    cold = time.perf_counter() - t
    assert len(first) == N_ANNOTATED, len(first)
    version = [1]

    def line(i: int) -> int:
        return FIRST + 1 + (i * 37) % N_ANNOTATED

    async def edit_then_hints(i: int):
        # An edit above the function (a line in, then out), then the viewport's hints:
        # the request waits for the edit to be applied, as in an editor.
        version[0] += 1
        if i % 2 == 0:
            change(client, uri, version[0], (5, 0), (5, 0), "# typed\n")
        else:
            change(client, uri, version[0], (5, 0), (6, 0), "")
        return await client.text_document_inlay_hint_async(hint_params(uri, line(i) - 30, line(i) + 30))

    async def type_then_hints(i: int):
        version[0] += 1
        at = FIRST + 5  # 0-based: an annotated line
        if i % 2 == 0:
            change(client, uri, version[0], (at, 4), (at, 4), "z")
        else:
            change(client, uri, version[0], (at, 4), (at, 5), "")
        return await client.text_document_inlay_hint_async(hint_params(uri, FIRST, FIRST + 60))

    cases = [
        (
            "baseline: inlay hints, file with no runs",
            None,
            lambda i: client.text_document_inlay_hint_async(hint_params(empty, 0, N_LINES)),
        ),
        (
            f"inlay hints, whole file ({N_ANNOTATED} hints)",
            "base_hint",
            lambda i: client.text_document_inlay_hint_async(hint_params(uri, 0, N_LINES)),
        ),
        (
            "inlay hints, 60-line viewport",
            "base_hint",
            lambda i: client.text_document_inlay_hint_async(hint_params(uri, line(i) - 30, line(i) + 30)),
        ),
        ("a line in/out above, then inlay hints of the viewport", "base_hint", edit_then_hints),
        ("typing in a line, then inlay hints of the viewport", "base_hint", type_then_hints),
        (
            "baseline: hover, file with no runs",
            None,
            lambda i: client.text_document_hover_async(hover_params(empty, 10)),
        ),
        (
            "hover on an annotated line",
            "base_hover",
            lambda i: client.text_document_hover_async(hover_params(uri, line(i))),
        ),
    ]
    rows = [
        "Through LSP (client-side round trip; server CPU per request from /proc):",
        "",
        "| request | p50 ms | p99 ms | p50 vs baseline | server CPU ms/request |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    base: dict[str, list[float]] = {}
    for name, against, call in cases:
        samples = []
        cpu0 = cpu_ms(pid)
        for i in range(ROUNDS):
            t = time.perf_counter()
            await call(i)
            samples.append(time.perf_counter() - t)
        cpu = (cpu_ms(pid) - cpu0) / ROUNDS
        if against is None:
            base["base_hint" if "inlay" in name else "base_hover"] = samples
        ratio = f"{pct(samples, 0.5) / pct(base[against], 0.5):.1f}x" if against else "1.0x"
        rows.append(f"| {name} | {pct(samples, 0.5):.2f} | {pct(samples, 0.99):.2f} | {ratio} | {cpu:.2f} |")
    rss1 = rss_kib(pid)
    await stop(client)
    return rows + [
        "",
        f"First inlay-hint request (loads the store, places 2,000 lines, pairs them with the "
        f"previous run's): {cold * 1000:.0f} ms. Server RSS: {rss0 / 1024:.0f} MiB before "
        f"opening, {rss1 / 1024:.0f} MiB after ({(rss1 - rss0) / 1024:.0f} MiB for the runs "
        f"and documents).",
    ]


def in_process(ws: Path) -> list[str]:
    from pygls.workspace import Workspace

    from trainium_lens.lsp.features import hover, inlay_hints
    from trainium_lens.lsp.server import create_server

    server = create_server()
    server.protocol._workspace = Workspace(
        ws.as_uri(),
        types.TextDocumentSyncKind.Incremental,
        [types.WorkspaceFolder(uri=ws.as_uri(), name="ws")],
    )
    uri = (ws / "big.py").as_uri()
    server.workspace.put_text_document(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text=(ws / "big.py").read_text())
    )
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    runs = server.document_runs(uri)
    runs.replace_all(server.doc_lines(uri)[0])
    assert len(inlay_hints.hints(server, hint_params(uri, 0, N_LINES))) == N_ANNOTATED
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    state_mib = sum(s.size_diff for s in snap1.compare_to(snap0, "filename")) / 2**20
    cases = [
        ("inlay hints, whole file", lambda i: inlay_hints.hints(server, hint_params(uri, 0, N_LINES))),
        (
            "inlay hints, viewport",
            lambda i: inlay_hints.hints(
                server, hint_params(uri, FIRST + i % N_ANNOTATED, FIRST + 60 + i % N_ANNOTATED)
            ),
        ),
        ("hover", lambda i: hover.hover(server, hover_params(uri, FIRST + 1 + (i * 37) % N_ANNOTATED))),
        # What an edit does: pygls updates the text, the trackers follow it, the
        # annotations are patched (typing in a line) or rebuilt (a line in or out).
        (
            "typing in a line, then inlay hints of the viewport",
            lambda i: (
                edit(i, (FIRST + 5, 4), (FIRST + 5, 4 if i % 2 == 0 else 5), "z" if i % 2 == 0 else ""),
                inlay_hints.hints(server, hint_params(uri, FIRST, FIRST + 60)),
            ),
        ),
        (
            "a line in/out above, then inlay hints of the viewport",
            lambda i: (
                edit(i, (5, 0), (5 if i % 2 == 0 else 6, 0), "# typed\n" if i % 2 == 0 else ""),
                inlay_hints.hints(
                    server, hint_params(uri, FIRST + i % N_ANNOTATED, FIRST + 60 + i % N_ANNOTATED)
                ),
            ),
        ),
    ]
    version = [1]

    def edit(i: int, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
        version[0] += 1
        server.workspace.update_text_document(
            types.VersionedTextDocumentIdentifier(uri=uri, version=version[0]),
            types.TextDocumentContentChangePartial(
                range=types.Range(
                    start=types.Position(line=start[0], character=start[1]),
                    end=types.Position(line=end[0], character=end[1]),
                ),
                text=text,
            ),
        )
        runs.apply_change(start, end, text)

    rows = [
        "In process (the handler alone; wall and CPU time of the thread, ms):",
        "",
        "| handler | wall p50 | wall p99 | CPU p50 | CPU p99 |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, call in cases:
        wall, cpu = [], []
        for i in range(ROUNDS):
            t, c = time.perf_counter(), time.thread_time()
            call(i)
            cpu.append(time.thread_time() - c)
            wall.append(time.perf_counter() - t)
        rows.append(
            f"| {name} | {pct(wall, 0.5):.2f} | {pct(wall, 0.99):.2f} | "
            f"{pct(cpu, 0.5):.2f} | {pct(cpu, 0.99):.2f} |"
        )
    return rows + [
        "",
        f"Memory of the run state (both stored results loaded, 2,000 lines placed, "
        f"annotations and the pairing with the previous run): {state_mib:.1f} MiB "
        f"(tracemalloc).",
    ]


def main() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "big.py").write_text(source())
        (ws / "empty.py").write_text("x = 1\n" * 20)
        store = RunStore(ws)
        store.save(result("20261129-100000-aaaa-0", "2026-11-29T10:00:00Z", 1.5))
        store.save(result("20261129-110000-bbbb-0", "2026-11-29T11:00:00Z", 1.0))
        report = [
            f"{N_LINES}-line file, {N_ANNOTATED} annotated lines, {ROUNDS} rounds "
            f"(python {sys.version.split()[0]}, {os.cpu_count()} cores).",
            "",
        ]
        report += asyncio.run(over_lsp(ws)) + [""] + in_process(ws)
        print("\n".join(report))


if __name__ == "__main__":
    main()
