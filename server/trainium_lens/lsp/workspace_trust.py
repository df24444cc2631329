"""Workspace Trust on the server: in Restricted Mode (the client sends
``trusted: false`` in its settings) nothing runs, whatever asks.

Profiling runs the workspace's code with the interpreter and on the hosts its
settings name; Neuron Explorer starts a program on a host and opens a tunnel.
Stored results still serve hints, hovers, the panel and the timeline: reading
them runs nothing, and the timeline opens only traces already on this machine
(``traces/artifacts.local_trace_path(remote=False)``: nothing reaches a host).
This is the one check, and its words are the only ones: the refusal is the
command's reply (``{error, kind: "untrusted"}``) and the client shows that text
(extension/src/trustPolicy.ts keeps none of its own).
"""

from __future__ import annotations

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


UNTRUSTED = "untrusted"  # the reply's kind (the client reads it: trustPolicy.ts)


def refused(ls: LensServer) -> bool:
    """True when the workspace is not trusted: the command replies with its refusal
    (``refusal``), which the client shows; nothing is shown from here, so it reads once."""
    return not ls.settings.trusted


def refusal(message: str, **reply: object) -> dict:
    return {**reply, "error": message, "kind": UNTRUSTED}
