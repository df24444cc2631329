"""The server's JSON-RPC protocol: pygls's, with its ``shutdown`` made safe while
requests still run.

pygls 2's ``lsp_shutdown`` cancels the requests in flight by iterating its
``_request_futures`` dict, while a worker thread whose request just finished pops
its entry from that same dict (``JsonRPCProtocol._send_handler_result``). When
the two meet, ``shutdown`` itself fails ("dictionary changed size during
iteration") and the client sees an internal error instead of a clean stop: a
profile cancelled just before the editor closes does exactly that. The same steps
run here over a snapshot of the dict.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from lsprotocol import types
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method


class LensProtocol(LanguageServerProtocol):
    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        if (user_handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current_id = self.msg_id  # this request's own future is left alone
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        self._shutdown = True
        return None
