"""Look inside included torch functions written in Python (``--include torch.nn.functional``).

The line labeler is a ``TorchFunctionMode``: it sees one torch-level call and
runs it with the mode switched off, so a Python torch function such as
``F.multi_head_attention_forward`` (which starts with ``if has_torch_function(...):
return handle_torch_function(...)``) would be one call, and every op inside it
would land on the line that called it. For the modules of included packages,
the ``has_torch_function*`` checks in their globals are replaced by ones that
answer False when the only reason to dispatch is the labeler's own mode (no
other mode is active, no argument overrides ``__torch_function__``): the body
then runs with the mode on, and each torch call inside it is labelled with the
included file's line. Outside labelled calls (no mode) the originals answer.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch

from trainium_lens.harness.job.loader import UserCode

_NAMES = ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic")
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _plain(value: Any) -> bool:
    kind = type(value)
    if kind in _PLAIN:
        return True
    hook = getattr(kind, "__torch_function__", None)
    return hook is None or getattr(hook, "__func__", hook) in (
        torch._C._disabled_torch_function_impl,
        getattr(torch.Tensor.__torch_function__, "__func__", None),
    )


class _Checks:
    def __init__(self, mode: Any):
        self.mode = mode
        self.originals: dict[str, Callable] = {name: getattr(torch.overrides, name) for name in _NAMES}

    def only_ours(self) -> bool:
        return torch._C._len_torch_function_stack() == 1 and torch._C._get_function_stack_at(0) is self.mode

    def make(self, name: str) -> Callable:
        original = self.originals[name]
        only_ours = self.only_ours

        check: Callable
        if name == "has_torch_function":

            def check_iterable(relevant):
                if only_ours() and all(_plain(v) for v in relevant):
                    return False
                return original(relevant)

            check = check_iterable
        else:

            def check_args(*relevant):
                if only_ours() and all(_plain(v) for v in relevant):
                    return False
                return original(*relevant)

            check = check_args
        check.__name__ = name
        check._trainium_lens = True  # type: ignore[attr-defined]
        return check


class IncludeHooks:
    """Patches the included modules loaded so far; ``refresh`` after more load."""

    def __init__(self, user: UserCode, mode: Any):
        self.user = user
        self.checks = _Checks(mode)
        self.replacements = {name: self.checks.make(name) for name in _NAMES}
        self._seen = 0

    def refresh(self) -> None:
        if not self.user.include or len(sys.modules) == self._seen:
            return
        self._seen = len(sys.modules)
        for module in list(sys.modules.values()):
            file = getattr(module, "__file__", None)
            if not file or not self._included(file):
                continue
            names = vars(module)
            for name in _NAMES:
                if names.get(name) is self.checks.originals[name]:
                    names[name] = self.replacements[name]

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """The originals back while the unprofiled wall is timed: the user's code
        runs without the checks it would never have without the harness."""
        patched = self.restore()
        try:
            yield
        finally:
            for names, name in patched:
                names[name] = self.replacements[name]

    def restore(self) -> list[tuple[dict, str]]:
        """The originals back in every module patched (for good at the end of a run in
        a process that lives on: a notebook's kernel); what was put back."""
        patched = []
        for module in list(sys.modules.values()):
            names = getattr(module, "__dict__", None)
            if not isinstance(names, dict):
                continue
            for name in _NAMES:
                if names.get(name) is self.replacements[name]:
                    names[name] = self.checks.originals[name]
                    patched.append((names, name))
        self._seen = 0
        return patched

    def _included(self, file: str) -> bool:
        path = os.path.realpath(file)
        return any(path == loc or path.startswith(loc + os.sep) for loc, _root in self.user.include)
