"""Large stored results in the real language server (pytest-lsp): a committed
result over the store's bound (``model/result.MAX_RESULT_BYTES``) is refused
from its size, before it is read, with one clear message, and the other
results are served as usual; the panel of a large result within the bound is
built off the server's loop, so a hover asked meanwhile is answered first."""

from __future__ import annotations

import asyncio
import textwrap

from tests.integration.lsp.test_features import LINES, SOURCE
from tests.support.lsp_client import hints, hover, make_result, open_doc, request, start, stop, until
from trainium_lens.model.result import MAX_RESULT_BYTES
from trainium_lens.model.store import RunStore

BIG_SOURCE = textwrap.dedent("""\
    import torch


    # trainium: profile
    def g():
        return torch.ones(4, 4)
""")


def big_lines(n: int) -> dict[int, tuple[str, float, list]]:
    return {
        i: (f"    x{i} = torch.ones(4, 4)", 10.0, [(f"aten::op{j}", 1, 1.0) for j in range(8)])
        for i in range(6, 6 + n)
    }


async def test_a_committed_200_mb_result_is_refused_unread_and_the_others_are_served(tmp_path):
    (tmp_path / "mod.py").write_text(SOURCE)
    (tmp_path / "big.py").write_text(BIG_SOURCE)
    store = RunStore(tmp_path)
    store.save(make_result("mod.py", "f", 5, LINES))
    # A valid result padded with JSON's own whitespace to 200 MB: whoever reads it whole gets a result.
    big = make_result("big.py", "g", 5, big_lines(10), run_id="20261129-101600-bbbb-0")
    path = store.runs / "20261129-101600-bbbb-0.json"
    size = 200 << 20
    with path.open("wb") as out:
        text = big.to_json().encode()
        out.write(text)
        out.write(b" " * (size - len(text)))
    client = await start(tmp_path)
    try:
        uri = open_doc(client, tmp_path / "mod.py")
        big_uri = open_doc(client, tmp_path / "big.py")
        panel, text_at = await asyncio.gather(
            request(client, "trainiumLens/runData", {"uri": big_uri}), hover(client, uri, 7)
        )
        assert panel["result"] is None  # refused: not read, not sent
        assert text_at is not None and "aten::mean" in text_at
        assert (await hints(client, uri))[7].startswith("⏱ 60 µs")
        await until(lambda: client.messages, "the refused result named")
        (message,) = [m.message for m in client.messages]
        assert path.name in message and f"larger than {MAX_RESULT_BYTES >> 20} MiB" in message, message
        assert "not read" in message
    finally:
        await stop(client)


async def test_the_panel_of_a_large_result_holds_up_no_other_request(tmp_path):
    (tmp_path / "mod.py").write_text(SOURCE)
    (tmp_path / "big.py").write_text(BIG_SOURCE)
    store = RunStore(tmp_path)
    store.save(make_result("mod.py", "f", 5, LINES))
    # 2,000 lines of 8 ops (4 MB): a panel the server takes a second or more to build, a
    # hover a few ms (built on the loop, this panel is answered first: the test fails)
    store.save(make_result("big.py", "g", 5, big_lines(2000), run_id="20261129-101600-bbbb-0"))
    assert (store.runs / "20261129-101600-bbbb-0.json").stat().st_size < MAX_RESULT_BYTES
    client = await start(tmp_path)
    try:
        uri = open_doc(client, tmp_path / "mod.py")
        big_uri = open_doc(client, tmp_path / "big.py")
        assert (await hints(client, uri))[7].startswith("⏱ 60 µs")  # every stored run loaded
        answered: list[str] = []

        async def panel() -> dict:
            reply = await request(client, "trainiumLens/runData", {"uri": big_uri})
            answered.append("panel")
            return reply

        async def hovered() -> str | None:
            await asyncio.sleep(0)  # asked after the panel's request
            text = await hover(client, uri, 7)
            answered.append("hover")
            return text

        reply, text_at = await asyncio.gather(panel(), hovered())
        assert len(reply["result"]["lines"]) == 2000
        assert text_at is not None and "aten::mean" in text_at
        assert answered == ["hover", "panel"]
        assert not client.messages
    finally:
        await stop(client)
