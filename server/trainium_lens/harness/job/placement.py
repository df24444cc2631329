"""Move what ``inputs=`` returned to the backend's device: a pytree walk.

Tensors inside tuples, lists, dicts, dataclasses and namedtuples are moved
(containers are rebuilt, dataclasses copied, so the user's objects are not
mutated); an ``nn.Module`` is moved in place with ``.to(device)`` (parameters
and buffers, the way the user would do it; on CUDA the Parameter objects stay
the same, on devices that cannot take a CPU tensor's storage in place, such as
``meta`` and XLA, torch makes new ones); the attributes of other plain objects (a
``Trainer`` holding a model and a batch) are walked and set in place. Objects
met twice (a tensor shared by two inputs, a cycle) are moved once: aliasing
survives the move.

Optimizers are left alone: their state follows their parameters only if it
is created after the model is placed (docs/profiling.md: create the optimizer inside
``inputs`` after the move, or take ``device``).
"""

from __future__ import annotations

import copy
import dataclasses
import types
from typing import Any

import torch

# Types whose insides are never walked (no tensors worth moving, or not ours to move).
_ATOMS = (
    str,
    bytes,
    int,
    float,
    complex,
    bool,
    type(None),
    type,
    torch.device,
    torch.dtype,
    types.ModuleType,
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
)


def to_device(value: Any, device: Any) -> Any:
    """``value`` with every tensor on ``device`` (see the module docstring)."""
    return _Mover(torch.device(device)).move(value)


class _Mover:
    def __init__(self, device: torch.device):
        self.device = device
        self.memo: dict[int, Any] = {}

    def _on_device(self, tensor: torch.Tensor) -> bool:
        d = tensor.device
        return d.type == self.device.type and (self.device.index is None or d.index == self.device.index)

    def move(self, value: Any) -> Any:
        if isinstance(value, _ATOMS):
            return value
        key = id(value)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = value  # a cycle back to this object sees it as it is
        moved = self._move(value)
        self.memo[key] = moved
        return moved

    def _move(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if self._on_device(value):
                return value
            out = (
                value.detach().to(self.device)
                if isinstance(value, torch.nn.Parameter)
                else value.to(self.device)
            )
            if isinstance(value, torch.nn.Parameter):
                return torch.nn.Parameter(out, requires_grad=value.requires_grad)
            return out
        if isinstance(value, torch.nn.Module):
            if any(not self._on_device(t) for t in _module_tensors(value)):
                value.to(self.device)
            return value
        if isinstance(value, torch.optim.Optimizer):
            return value
        if isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple
            fields = [self.move(v) for v in value]
            return value if _same(fields, value) else type(value)(*fields)
        if isinstance(value, (tuple, list)):
            items = [self.move(v) for v in value]
            if _same(items, value):
                return value
            return type(value)(items) if type(value) in (tuple, list) else _rebuilt(value, items)
        if isinstance(value, dict):
            entries = {k: self.move(v) for k, v in value.items()}
            if _same(list(entries.values()), list(value.values())):
                return value
            try:
                mapping = copy.copy(value)
                mapping.update(entries)
                return mapping
            except Exception:
                return entries
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes = {}
            for f in dataclasses.fields(value):
                old = getattr(value, f.name, None)
                new = self.move(old)
                if new is not old:
                    changes[f.name] = new
            if not changes:
                return value
            instance = copy.copy(value)
            for name, new in changes.items():
                object.__setattr__(instance, name, new)  # frozen dataclasses too
            return instance
        attrs = getattr(value, "__dict__", None)
        if isinstance(attrs, dict) and type(value).__module__ != "builtins":
            for name, old in list(attrs.items()):  # a plain object: set in place
                new = self.move(old)
                if new is not old:
                    try:
                        setattr(value, name, new)
                    except Exception:
                        pass
            return value
        if hasattr(value, "to") and callable(value.to) and hasattr(value, "data"):
            try:  # e.g. transformers' BatchEncoding: a mapping with its own .to()
                return value.to(self.device)
            except Exception:
                return value
        return value


def _module_tensors(module: torch.nn.Module):
    yield from module.parameters()
    yield from module.buffers()


def _same(new: list, old) -> bool:
    return all(a is b for a, b in zip(new, old, strict=True))


def _rebuilt(value: Any, items: list) -> Any:
    try:
        return type(value)(items)
    except Exception:
        return list(items) if isinstance(value, list) else tuple(items)
