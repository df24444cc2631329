"""Calling the user's marked function, for every protocol (eager and xla): the one
frame user code is called from, its inputs and outputs, the variant it belongs
to. Imports no protocol, so both build on it."""

from __future__ import annotations

from typing import Any, Protocol

import torch

from trainium_lens.harness.events import EventStream, HarnessError
from trainium_lens.harness.job.loader import UserCode, call_inputs, required_params, resolve
from trainium_lens.harness.job.placement import to_device
from trainium_lens.harness.markers import Marked, variant_group
from trainium_lens.harness.spec import Spec


class CallSession(Protocol):
    """What calling needs of a batch's session (``eager/run.Session`` is one)."""

    spec: Spec
    events: EventStream
    backend: Any
    module: Any
    user: UserCode
    rel_file: str
    inputs: dict[str, tuple[tuple, dict]]
    references: dict[str, tuple[str, Any]]


def invoke(fn: Any, args: tuple, kwargs: dict) -> Any:
    """The one place the harness calls user code: line labels stop at this frame."""
    return fn(*args, **kwargs)


def variant_key(marked: Marked) -> str:
    """Functions compared as variants share this (``markers.variant_group``)."""
    return variant_group(marked.options.get("compare"), marked.options.get("inputs"))


def marked_function(s: CallSession, marked: Marked) -> Any:
    """The marked function, looked up in the imported module (both backends)."""
    fn = resolve(s.module, marked.name)
    if not callable(fn):
        raise HarnessError(
            "unknown_function",
            f"{marked.name} is marked but is not a function at import time",
            s.rel_file,
            marked.def_line,
        )
    return fn


def function_record(s: CallSession, marked: Marked, protocol: dict) -> dict:
    """The result's ``function`` block (both backends)."""
    return {
        "file": s.rel_file,
        "name": marked.name,
        "line": marked.def_line,
        "marker_line": marked.marker_line,
        "protocol": dict(protocol),
        "inputs": marked.options.get("inputs") or None,
        "compare": marked.options.get("compare") or None,
    }


def inputs(s: CallSession, marked: Marked, fn: Any) -> tuple[tuple, dict]:
    name = marked.options.get("inputs")
    if not name:
        missing = required_params(fn)
        if missing:
            raise HarnessError(
                "inputs",
                f"{marked.name} needs arguments ({', '.join(missing)}): "
                f"add inputs=NAME to its marker, naming a function that returns "
                f"them as a tuple or dict",
                s.rel_file,
                marked.marker_line,
            )
        return (), {}
    if name not in s.inputs:  # one call per inputs function: variants share their inputs
        torch.manual_seed(0)
        dev = torch.device(s.backend.device)
        args, kwargs = call_inputs(s.module, name, s.rel_file, marked.name, s.user, device=dev)
        s.inputs[name] = (to_device(args, dev), to_device(kwargs, dev))  # placement.py
    return s.inputs[name]


def first_tensor(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for item in value:
            found = first_tensor(item)
            if found is not None:
                return found
    return None


def output(s: CallSession, name: str, value: Any, group: str = "") -> dict:
    tensor = first_tensor(value)
    if tensor is None:
        return {}
    tensor = tensor.detach()
    out: dict[str, Any] = {"dtype": str(tensor.dtype).replace("torch.", ""), "shape": list(tensor.shape)}
    if tensor.numel() and tensor.dtype != torch.bool:
        out["max_abs"] = float(tensor.abs().max().to("cpu").double().item())
    if group not in s.references:
        s.references[group] = (name, tensor.to("cpu", copy=True))
        out.update(reference=name, max_abs_diff=0.0)
        return out
    ref_name, ref = s.references[group]
    out["reference"] = ref_name
    if list(ref.shape) == out["shape"]:
        diff = (tensor.to("cpu").double() - ref.double()).abs()
        out["max_abs_diff"] = float(diff.max().item()) if diff.numel() else 0.0
    return out
