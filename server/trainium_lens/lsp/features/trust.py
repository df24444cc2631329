"""Workspace Trust on the server: in Restricted Mode (the client sends
``trusted: false`` in its settings) nothing runs, whatever asks.

Profiling runs the workspace's code with the interpreter and on the hosts its
settings name; Neuron Explorer starts a program on a host and opens a tunnel.
Stored results still serve hints, hovers, the panel and the timeline: reading
them runs nothing, and the timeline opens only traces already on this machine
(``traces/artifacts.local_trace_path(remote=False)``: nothing reaches a host).
The client refuses the same commands first, with the same words
(extension/src/trustPolicy.ts); this is the check no request gets around.
"""

from __future__ import annotations

from lsprotocol import types

from trainium_lens.lsp.state import LensServer

_HINT = "Trust the workspace (Manage Workspace Trust) to use it."
PROFILE_REFUSED = (
    "Trainium Lens: profiling is off in Restricted Mode: it runs this workspace's code, "
    "with the interpreter and on the hosts its settings name. " + _HINT
)
EXPLORER_REFUSED = (
    "Trainium Lens: Neuron Explorer is off in Restricted Mode: it starts a program "
    "on the host and opens an SSH tunnel. " + _HINT
)


def refused(ls: LensServer, message: str) -> bool:
    """True (after showing ``message``) when the workspace is not trusted."""
    if ls.settings.trusted:
        return False
    ls.show(message, types.MessageType.Warning)
    return True
