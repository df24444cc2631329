"""``shutdown`` while a request finishes on a worker thread (lsp/protocol.py)."""

from __future__ import annotations

from concurrent.futures import Future

from trainium_lens.lsp.state import LensServer


class FinishingFuture(Future):
    """A request in flight whose worker thread finishes it while ``shutdown`` looks:
    finishing pops its entry from the protocol's dict, as pygls's result callback does."""

    def __init__(self, futures: dict, msg_id: str) -> None:
        super().__init__()
        self.futures, self.msg_id = futures, msg_id

    def done(self) -> bool:
        self.futures.pop(self.msg_id, None)
        return True


def test_shutdown_cancels_the_other_requests_while_one_finishes() -> None:
    protocol = LensServer().protocol
    futures = protocol._request_futures
    running: Future = Future()
    futures["finishing"] = FinishingFuture(futures, "finishing")
    futures["running"] = running
    futures["shutdown"] = Future()
    protocol._ctx_msg_id.set("shutdown")  # as pygls sets it for the request it handles
    shutdown = protocol.lsp_shutdown()
    try:
        next(shutdown)
    except StopIteration:
        pass  # no user handler: the generator ends at once
    assert running.cancelled()
    assert not futures["shutdown"].cancelled()
    assert protocol._shutdown
