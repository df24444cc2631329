"""Which window an armed script gets: the backend is chosen once ``import torch``
has finished (``arm.py``); torch-xla's window (``xla_run.py``) has its own
protocol, every other backend runs torch.profiler (``session.py``)."""

from __future__ import annotations

from typing import Any

import torch

from trainium_lens.harness.runtime.choose import choose
from trainium_lens.harness.spec import ScriptSpec


def start(spec: ScriptSpec, events: Any) -> None:
    backend = choose(torch, spec.backend)
    if backend.name == "xla":
        from trainium_lens.harness.script.xla_run import XlaScriptRun

        XlaScriptRun(spec, events, backend).install()
        return
    from trainium_lens.harness.script.session import ScriptRun

    ScriptRun(spec, events, backend).install()
