"""The line-label format: the one definition, written by ``lines.py`` and read
by the trace reader (``trainium_lens.traces.chrome``) and the trace tagger.

A label is a profiler range name ``<relpath>(<LINE>): <function>`` — the form
Neuron Explorer links to source. Stdlib only: the core imports this module.
"""

from __future__ import annotations

import re

#: The keys of a trace event's ``args`` that name its line and phase (written by
#: ``attribution/trace_tags.py``, read by the core's trace reader).
SOURCE_KEY = "Source line"
PHASE_KEY = "Phase"
THREAD_KEY = "Torch thread"  # PyTorch's thread counter of an op (attribution/trace_tags.py)

_LABEL = re.compile(r"^(?P<file>[^()]+?)\((?P<line>\d+)\): (?P<func>.*)$")


def format_label(file: str, line: int, function: str) -> str:
    return f"{file}({line}): {function}"


def parse_label(name: str) -> tuple[str, int, str] | None:
    """(file, line, function) of a label name; None for any other range name."""
    if "): " not in name:
        return None
    m = _LABEL.match(name)
    return (m["file"], int(m["line"]), m["func"]) if m else None


def source_ref(file: str, line: int) -> str:
    """How a trace event names its line in ``args`` (``examples/rmsnorm.py:22``)."""
    return f"{file}:{line}"
